"""reportgen's PGD and FGSM accuracy of this family (a learnt readout: the encoder returns logits)
equals an independent attack on the PyTorch twin of the authors' model with the same weights
(torch_twin.py): the cross-entropy of the twin's own logits differentiated by torch autograd,
x' = clip(proj_eps(x + alpha sign(grad_x L)), 0, 1) (Madry et al. 2018; Goodfellow et al. 2015
for one step of eps). The labels are the network's clean predictions, so clean accuracy is 100%
and every point lost is the attack's."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TINY, build, digits, randomise

torch = pytest.importorskip("torch")
import torch_twin  # noqa: E402

EPSILONS = (0.0, 0.002, 0.005, 0.01, 0.02)
STEPS = 10
IMAGES = 64


def _twin_accuracy(twin, images, labels, epsilon, steps, step_size):
    """Accuracy of the twin on its own L-inf attack of `steps` signed-gradient steps."""
    x = torch.tensor(images.transpose(0, 3, 1, 2), dtype=torch.float32)
    y = torch.tensor(labels, dtype=torch.int64)
    low, high = torch.clamp(x - epsilon, 0, 1), torch.clamp(x + epsilon, 0, 1)
    adversarial = x.clone()
    for _ in range(steps if epsilon > 0 else 0):
        adversarial.requires_grad_(True)
        loss = torch.nn.functional.cross_entropy(twin(adversarial)[0], y, reduction="sum")
        (gradient,) = torch.autograd.grad(loss, adversarial)
        adversarial = torch.clamp(adversarial.detach() + step_size * gradient.sign(), low, high)
    with torch.no_grad():
        predicted = twin(adversarial)[0].argmax(dim=1).numpy()
    return float(np.mean(predicted == labels))


def test_pgd_and_fgsm_accuracy_equal_an_independent_attack_on_the_twin():
    from reportgen.sdk.testing import evaluate_technique

    net = build(TINY, seed=5)
    randomise(net, seed=6, scale=2.0)
    images = digits(IMAGES, seed=7)
    labels = np.asarray(net.model(images, training=False)["logits"]).argmax(axis=1)
    arrays = evaluate_technique("adversarial_robustness", net, images, labels, {
        "epsilons": EPSILONS, "targets": ("capsules",), "attacks": ("fgsm", "pgd"),
        "pgd_steps": STEPS, "images": 0, "histogram_epsilon": EPSILONS[-1]})
    ours = arrays["accuracy"][0]                                  # (attacks, epsilons)
    twin = torch_twin.from_keras(net)
    for a, (attack, steps) in enumerate((("fgsm", 1), ("pgd", STEPS))):
        for e, epsilon in enumerate(EPSILONS):
            step = epsilon if attack == "fgsm" else 2.5 * epsilon / STEPS
            independent = _twin_accuracy(twin, images, labels, epsilon, steps, step)
            # one standard error of a proportion over IMAGES images (at least one image's worth)
            se = max(np.sqrt(independent * (1 - independent) / IMAGES), 1 / IMAGES)
            print(f"{attack} eps {epsilon}: reportgen {ours[a, e]:.3f}, twin {independent:.3f}")
            assert abs(float(ours[a, e]) - independent) <= se, (attack, epsilon)
    assert ours[:, 0].tolist() == [1.0, 1.0]
    # the attack is real: PGD at eps 0.1 takes a large share of the predictions away
    assert ours[1, -1] <= 0.6
