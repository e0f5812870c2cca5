"""Adversarial robustness: FGSM/PGD through the output capsules and through the votes
(Gu 2022), evaluation on the real model, and reconstruction-based detection, on tiny CapsNets."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from reportgen.errors import ReportgenError
from reportgen.probe.evaluation import EvalBatch
from reportgen.techniques import adversarial_robustness as ar
from reportgen.techniques.base import RenderContext

EPSILONS = (0.0, 0.02, 0.05, 0.1, 0.2)
PARAMS = ar.Params(epsilons=EPSILONS, pgd_steps=5, histogram_epsilon=0.05, examples=3)
CTX = RenderContext(model="tiny", step="1-10", class_names=("a", "b", "c"))


def _labelled_set(net, n=60, wrong=6, seed=3):
    """Random images labelled with the model's own predictions, `wrong` of them flipped, so the
    clean accuracy is (n - wrong) / n and the attacks have something to break."""
    rng = np.random.default_rng(seed)
    images = rng.random((n, 12, 12, 1), dtype=np.float32)
    _, lengths = net.encoder(images, training=False)
    labels = np.asarray(lengths).argmax(axis=1)
    labels[:wrong] = (labels[:wrong] + 1) % 3
    return EvalBatch(net, images, labels.astype(np.int64), ("a", "b", "c"))


@pytest.fixture(scope="module")
def eval_batch(tiny_net):
    return _labelled_set(tiny_net)


@pytest.fixture(scope="module")
def result(eval_batch):
    return ar.compute(eval_batch, PARAMS)


@pytest.mark.slow
def test_epsilon_zero_leaves_accuracy_unchanged(result, eval_batch):
    clean = np.mean(eval_batch.tensors("predicted")["predicted"] == eval_batch.labels)
    assert clean == pytest.approx(0.9)
    assert float(result["clean_accuracy"]) == pytest.approx(clean)
    np.testing.assert_allclose(result["accuracy"][:, :, 0], clean)
    np.testing.assert_array_equal(result["success"][:, :, 0], 0.0)
    x, y = eval_batch.images[:4], eval_batch.labels[:4]
    gradient = ar.loss_gradient(ar.capsule_logits(eval_batch.net))
    np.testing.assert_array_equal(ar.fgsm(gradient, x, y, 0.0), x)
    np.testing.assert_array_equal(ar.pgd(gradient, x, y, 0.0, 3, 0.1, random_start=True), x)


@pytest.mark.slow
def test_accuracy_falls_with_epsilon_and_pgd_is_stronger(result):
    accuracy = result["accuracy"].astype(np.float64)            # (targets, attacks, eps)
    assert np.all(np.diff(accuracy, axis=2) <= 0.05)            # non-increasing within noise
    assert np.all(accuracy[:, :, -1] < accuracy[:, :, 0] - 0.3)  # the attacks do something
    fgsm, pgd = PARAMS.attacks.index("fgsm"), PARAMS.attacks.index("pgd")
    assert np.all(accuracy[:, pgd] <= accuracy[:, fgsm] + 0.05)


@pytest.mark.slow
def test_rates_agree_with_the_predictions(result):
    labels = result["labels"]
    correct = result["clean_predicted"] == labels
    predicted = result["predicted"]                              # (T, A, E, N)
    np.testing.assert_allclose(result["accuracy"], (predicted == labels).mean(axis=-1),
                               rtol=1e-6)
    success = ((predicted != labels) & correct).sum(axis=-1) / correct.sum()
    np.testing.assert_allclose(result["success"], success, rtol=1e-6)
    assert np.all(result["undetected"] <= result["success"] + 1e-7)
    assert np.nanmax(result["detected"]) <= 1.0
    # the per-image flags the detection rates' intervals count: the same rates
    flagged = result["flagged"]
    assert flagged.dtype == bool and flagged.shape == predicted.shape
    successful = (predicted != labels) & correct
    np.testing.assert_allclose(result["undetected"],
                               (successful & ~flagged).sum(-1) / correct.sum(), rtol=1e-6)
    with np.errstate(invalid="ignore", divide="ignore"):
        np.testing.assert_allclose(result["detected"], (successful & flagged).sum(-1)
                                   / successful.sum(-1), rtol=1e-6, equal_nan=True)


@pytest.mark.slow
def test_attacks_stay_in_the_ball_and_raise_the_loss(eval_batch):
    import keras

    x, y = eval_batch.images[6:30], eval_batch.labels[6:30]
    for target in ar.TARGETS:
        logits = ar.logits_function(eval_batch.net, target)
        gradient = ar.loss_gradient(logits)
        loss = lambda z: np.asarray(keras.ops.sparse_categorical_crossentropy(  # noqa: E731
            y, logits(z), from_logits=True))
        for adversarial in (ar.fgsm(gradient, x, y, 0.05),
                            ar.pgd(gradient, x, y, 0.05, 4, 0.02),
                            ar.pgd(gradient, x, y, 0.05, 4, 0.02, random_start=True,
                                   rng=np.random.default_rng(0))):
            assert np.abs(adversarial - x).max() <= 0.05 + 1e-6
            assert adversarial.min() >= 0.0 and adversarial.max() <= 1.0
            assert loss(adversarial).mean() > loss(x).mean()


@pytest.mark.slow
def test_budgets_attacked_together_equal_one_budget_at_a_time(eval_batch):
    """compute() runs every epsilon in one batch (FGSM from one gradient, PGD stacked); the
    plain loop, one budget and one call per attack, gives the same adversarial images."""
    x, y = eval_batch.images, eval_batch.labels
    attacked = [e for e in EPSILONS if e > 0]
    for target in ar.TARGETS:
        gradient = ar.loss_gradient(ar.logits_function(eval_batch.net, target))
        for attack in ar.ATTACKS:
            together = ar.attack_all(gradient, attack, x, y, attacked, PARAMS, chunk=100,
                                     rng=np.random.default_rng(0))
            for epsilon, adversarial in zip(attacked, together):
                alone = ar.fgsm(gradient, x, y, epsilon) if attack == "fgsm" else \
                    ar.pgd(gradient, x, y, epsilon, PARAMS.pgd_steps, PARAMS.step_size(epsilon))
                # equal but for a gradient sign that a batch's float rounding may flip
                assert np.mean(np.abs(adversarial - alone) > 1e-6) < 1e-3, (target, attack)
    result = ar.compute(eval_batch, PARAMS)
    t, a = PARAMS.targets.index("capsules"), PARAMS.attacks.index("pgd")
    e = EPSILONS.index(0.05)
    alone = ar.pgd(ar.loss_gradient(ar.capsule_logits(eval_batch.net)), x, y, 0.05,
                   PARAMS.pgd_steps, PARAMS.step_size(0.05))
    predicted, _, _ = ar.classify(eval_batch.net, alone)
    assert np.mean(result["predicted"][t, a, e] == predicted) >= 0.98


def test_vote_attack_ranks_classes_like_the_model_with_one_routing_iteration(make_net):
    # One iteration: couplings are uniform (1/classes), so s_j = (N/classes) * mean_i u_hat[j|i]
    # and the squash keeps the order of lengths.
    net = make_net(seed=5, class_caps={"dims": 4, "routing_iterations": 1})
    x = np.random.default_rng(0).random((20, 12, 12, 1), dtype=np.float32)
    vote_scores = np.asarray(ar.vote_logits(net)(x))
    _, lengths = net.encoder(x, training=False)
    np.testing.assert_array_equal(np.argsort(vote_scores, axis=1),
                                  np.argsort(np.asarray(lengths), axis=1))


@pytest.mark.slow
def test_threshold_flags_five_percent_of_clean_inputs(result):
    distances = np.random.default_rng(0).gamma(4.0, 1.0, 10_000)
    threshold = ar.detection_threshold(distances)
    assert np.mean(distances > threshold) == pytest.approx(0.05, abs=0.001)
    clean = result["clean_distances"]
    assert np.mean(clean > result["threshold"]) == pytest.approx(0.05, abs=1.0 / len(clean))


def test_classify_reconstructs_from_the_predicted_capsule(eval_batch):
    """The attack's evaluation path (encoder + decoder on the predicted capsule) equals the
    model's own reconstruction that the clean distances come from."""
    predicted, distances, recon = ar.classify(eval_batch.net, eval_batch.images)
    probe = eval_batch.tensors("predicted", "reconstruction")
    np.testing.assert_array_equal(predicted, probe["predicted"])
    np.testing.assert_allclose(recon, probe["reconstruction"], atol=1e-5)
    np.testing.assert_allclose(
        distances, ar.reconstruction_distance(eval_batch.images, probe["reconstruction"]),
        rtol=1e-4)


@pytest.mark.slow
def test_summary_and_figures(result):
    summary = ar.summarize(result, PARAMS)
    json.dumps(summary)
    assert summary["images"] == 60 and summary["has_decoder"] is True
    assert summary["clean_false_positive_rate"] == pytest.approx(0.05, abs=1 / 60)
    assert summary[ar.metric_key("accuracy", "votes", "pgd", 0.2)] == pytest.approx(
        float(result["accuracy"][1, 1, -1]), abs=1e-6)
    for key in ("success", "undetected", "detected"):
        assert ar.metric_key(key, "capsules", "fgsm", 0.05) in summary
    figures = ar.TECHNIQUE.render(result, PARAMS, CTX)
    assert [f.name for f in figures] == [
        "accuracy.png", "accuracy.svg", "accuracy.pdf", "detection.png",
        "detection.svg", "detection.pdf", "distances.png", "distances.svg", "distances.pdf",
        "examples.png"]
    for figure in figures:
        assert figure.data.startswith({"png": b"\x89PNG", "pdf": b"%PDF"}.get(figure.kind,
                                                                              b"<?xml"))
    assert "Gu 2022" in figures[0].caption and "17.3%" in figures[0].caption
    assert "95th percentile" in figures[3].caption
    trend = ar.TECHNIQUE.render_trend([("1-10", summary), ("2-10", summary)], PARAMS, CTX)
    compare = ar.TECHNIQUE.render_compare([("A", summary), ("B", summary)], PARAMS, CTX)
    assert [f.kind for f in trend] == [f.kind for f in compare] == ["png", "svg", "pdf"]


@pytest.mark.slow
def test_model_without_decoder(make_net):
    net = make_net(decoder={"enabled": False})
    batch = _labelled_set(net, n=20, wrong=0)
    params = ar.Params(epsilons=(0.0, 0.1), attacks=("fgsm",), targets=("votes",),
                       histogram_epsilon=0.1, examples=2)
    result = ar.compute(batch, params)
    assert int(result["has_decoder"]) == 0 and "example_reconstruction" not in result
    assert result["accuracy"].shape == (1, 1, 2) and np.isnan(result["undetected"]).all()
    summary = ar.summarize(result, params)
    json.dumps(summary)
    assert summary["threshold"] is None and "undetected_votes_fgsm_0.1" not in summary
    names = [f.name for f in ar.TECHNIQUE.render(result, params, CTX)]
    assert names == ["accuracy.png", "accuracy.svg", "accuracy.pdf",
                     "examples.png"]
    assert ar.TECHNIQUE.render_compare([("plain", summary)], params, CTX)


def test_subset_of_the_set(eval_batch):
    params = ar.Params(epsilons=(0.0, 0.05), attacks=("fgsm",), targets=("capsules",),
                       images=30, histogram_epsilon=0.05)
    from reportgen.probe.evaluation import stratified_sample

    result = ar.compute(eval_batch, params)
    chosen = stratified_sample(eval_batch.labels, 30)           # as many per class as it can
    assert 20 <= len(chosen) <= 30
    np.testing.assert_array_equal(result["labels"], eval_batch.labels[chosen])
    assert result["predicted"].shape == (1, 1, 2, len(chosen))


def test_params():
    params = ar.Params(epsilons=[0, 0.1], attacks=["pgd"], histogram_epsilon=0.1)
    assert params.epsilons == (0.0, 0.1) and params.attacks == ("pgd",)
    hash(params)
    assert ar.Params().step_size(0.1) == pytest.approx(0.025)
    assert dataclasses.replace(ar.Params(), pgd_step_size=0.01).step_size(0.3) == 0.01
    for bad in ({"epsilons": (0.1, 0.0)}, {"epsilons": (-0.1, 0.0)}, {"epsilons": ()},
                {"attacks": ("cw",)}, {"targets": ()}, {"histogram_epsilon": 0.15},
                {"pgd_steps": 0}, {"images": -1}, {"pgd_step_size": -1.0}):
        with pytest.raises(ReportgenError):
            ar.Params(**bad)


def test_drawing_never_imports_tensorflow():
    code = ("import sys, reportgen.techniques.adversarial_robustness.figures, "
            "reportgen.techniques.adversarial_robustness; "
            "assert not any(m.split('.')[0] in ('tensorflow', 'keras') for m in sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_caption_names_the_scores_each_family_classifies_by():
    """The loss and the prediction rule in the words of the model's own scores: lengths for
    vector capsules, activations for EM and Self-Routing, probabilities for a CNN; the votes
    only where the vote attack runs."""
    from conftest import TINY_PARAMS
    from em_fixture import TINY_EM
    from family_nets import TINY_SELF_ROUTING, tiny_cnn

    from reportgen.capsnet.description import describe
    from reportgen.techniques.adversarial_robustness.figures import procedure
    from reportgen.settings.model_params import parse_model_params

    expected = {"capsnet": (TINY_PARAMS, "class-capsule lengths", "class-capsule length"),
                "em": (TINY_EM, "class-capsule activations", "class-capsule activation"),
                "self_routing": (TINY_SELF_ROUTING, "class-capsule activations",
                                 "class-capsule activation"),
                "cnn": (tiny_cnn("avg"), "class probabilities", "class probability")}
    for name, (raw, scores, largest) in expected.items():
        description = describe(parse_model_params(raw))
        params = ar.variants(description)[0]
        text = procedure(params, 10, description)
        assert f"softmax of the log {scores} with the true label" in text, name
        assert text.endswith(f"(the largest {largest})."), name
        assert ("through the votes" in text) == ar.has_votes(description), name
        assert ("vote attack" in ar.TECHNIQUE.title_of(params)) == ar.has_votes(description)
    # a compare or trend panel spans models: no variant, the plain title
    assert ar.TECHNIQUE.title_of(None) == "Adversarial robustness (FGSM, PGD)"
