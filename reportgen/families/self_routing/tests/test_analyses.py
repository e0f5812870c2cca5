"""The analyses of Self-Routing capsules (Hahn, Pyeon & Kim 2019) whose scores are the class
activations: the adversarial attacks score and classify by them (checked against the NumPy
oracle beside this file, numpy_oracle.py), and capsule semantics, which studies a pose per
class, says the class capsules have none."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TINY_PARAMS
from family_nets import TINY_SELF_ROUTING

from reportgen.capsnet.description import describe
from reportgen.engine.model import not_applicable_reason
from reportgen.settings.families import family_of
from reportgen.settings.model_params import parse_model_params
from reportgen.techniques import adversarial_robustness as ar
from reportgen.techniques import get_technique

from . import numpy_oracle as oracle

LABELS = np.array([0, 1, 2, 1])


@pytest.fixture(scope="module")
def net():
    """The tiny Self-Routing model with random W2 and beta (at initialisation they are 0, every
    class activation is 1/classes and no attack has a gradient to follow)."""
    import keras

    keras.utils.set_random_seed(0)
    params = parse_model_params(TINY_SELF_ROUTING)
    built = family_of(params).build(params)
    rng = np.random.default_rng(0)
    for layer in built.capsule_layers.values():
        layer.w2.assign(rng.normal(size=layer.w2.shape).astype(np.float32))
        layer.beta.assign(rng.normal(size=layer.beta.shape).astype(np.float32))
    return built


def _images(seed=0, n=4):
    return np.random.default_rng(seed).uniform(size=(n, 12, 12, 1)).astype(np.float32)


def _oracle_activations(net, images) -> np.ndarray:
    """(B, classes) the class activations from the model's ConvCaps output, routed by the NumPy
    oracle with the class layer's own W2 and beta (child slot = (row * W + column) * types +
    type)."""
    out = net.model(images, training=False)
    poses = np.asarray(out["conv_caps1_poses"], np.float64)
    activations = np.asarray(out["conv_caps1_activations"], np.float64)
    poses = poses.reshape(len(images), -1, poses.shape[-1])                 # (B, N, C)
    layer = net.capsule_layers["class_caps"]
    logits = np.einsum("bnc,ncp->bnp", poses, np.asarray(layer.w2, np.float64)) \
        + np.asarray(layer.beta, np.float64)
    scores, _, _ = oracle.self_routing(None, activations.reshape(len(images), -1), logits)
    return scores


def _attack_loss(net, images, labels) -> np.ndarray:
    """The reference loss of an attack on the activations: -log a_y (softmax(log a) = a, since
    the class activations sum to 1)."""
    scores = _oracle_activations(net, images)
    return -np.log(scores[np.arange(len(labels)), labels])


def test_the_attack_loss_is_the_negative_log_activation_of_the_true_class(net):
    images = _images()
    scores = _oracle_activations(net, images)
    assert np.ptp(scores, axis=1).min() > 1e-3              # the classes are told apart
    logits = np.asarray(ar.capsule_logits(net)(images), np.float64)
    log_softmax = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.testing.assert_allclose(-log_softmax[np.arange(4), LABELS],
                               _attack_loss(net, images, LABELS), rtol=1e-4)


def test_the_attack_gradient_is_that_of_the_oracle_loss(net):
    """The directional derivative of the oracle's -log a_y along the attack's own step direction
    (central differences) is the attack gradient's projection on it."""
    images = _images(1)
    gradient = ar.loss_gradient(ar.capsule_logits(net))(images, LABELS).astype(np.float64)
    step = 1e-2
    direction = np.sign(gradient)
    numeric = (_attack_loss(net, (images + step * direction).astype(np.float32), LABELS)
               - _attack_loss(net, (images - step * direction).astype(np.float32), LABELS)) \
        / (2 * step)
    analytic = (gradient * direction).reshape(len(images), -1).sum(-1)
    assert np.all(analytic > 0)
    np.testing.assert_allclose(numeric, analytic, rtol=0.05)


def test_adversarial_examples_are_classified_by_the_class_activations(net):
    images = _images(2, n=8)
    predicted, distances, reconstructions = ar.classify(net, images)
    np.testing.assert_array_equal(predicted, _oracle_activations(net, images).argmax(1))
    assert distances is None and reconstructions is None          # no decoder to detect with
    assert ar.variants(net.description) == [ar.Params(targets=("capsules",))]   # no votes


def test_capsule_semantics_is_not_applicable_and_names_the_missing_class_poses(net):
    """The class layer has W2 and beta but no W1: no pose per class, only the activation;
    neither capsule semantics nor the class-capsule pose panel applies (a CapsNet has both)."""
    description = describe(parse_model_params(TINY_SELF_ROUTING))
    classes = description.class_capsules
    assert (classes.pose, classes.pose_size, classes.activation) == ("none", 0, "logistic")
    assert not hasattr(net.capsule_layers["class_caps"], "w1")
    assert hasattr(net.capsule_layers["conv_caps1"], "w1")
    technique = get_technique("capsule_semantics")
    missing = technique.applies_to - description.features
    assert missing == {"class_vectors"}
    assert not_applicable_reason(missing) == ("it has no vector per class (no class-capsule "
                                              "poses and no class-by-dimension features)")
    for name in ("capsule_semantics", "class_capsules"):
        assert not get_technique(name).applicable(net.description), name
        assert get_technique(name).applicable(describe(parse_model_params(TINY_PARAMS))), name
