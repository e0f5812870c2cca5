"""The 95% intervals of the adversarial robustness summary: Wilson's for every accuracy and
rate over the images it counts (success and undetected: the originally correct; detected:
the successful), and per eps the paired differences votes - capsules and capsules - clean,
against references computed here from per-image outcomes."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from reportgen.results import intervals as iv
from reportgen.sdk.testing import check_summary_csv
from reportgen.techniques import adversarial_robustness as adv
from reportgen.techniques.adversarial_robustness.numbers import metric_key

N = 500
PARAMS = adv.Params(epsilons=(0.0, 0.1, 0.3), histogram_epsilon=0.1)


def same(got, expected) -> bool:
    """Two intervals equal to float rounding (the summary resamples its scores together)."""
    return (got.n, got.method) == (expected.n, expected.method) and \
        (got.value, got.low, got.high) == pytest.approx(
            (expected.value, expected.low, expected.high), rel=1e-9, abs=1e-12)


def wilson(outcome) -> tuple[float, float]:
    ci = binomtest(int(np.sum(outcome)), int(np.size(outcome))).proportion_ci(method="wilson")
    return ci.low, ci.high


@pytest.fixture(scope="module")
def arrays():
    """Robust accuracy falling with eps, faster through the votes; a detector that flags
    half of the adversarials."""
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 10, N)
    correct = rng.random(N) < 0.95
    clean_predicted = np.where(correct, labels, (labels + 1) % 10)
    eps = PARAMS.epsilons
    shape = (2, 2, len(eps))
    predicted = np.zeros(shape + (N,), np.int64)
    flagged = rng.random(shape + (N,)) < 0.5
    keep = {"capsules": (1.0, 0.7, 0.4), "votes": (1.0, 0.4, 0.1)}
    for t, target in enumerate(PARAMS.targets):
        for a in range(2):
            for e in range(len(eps)):
                kept = correct & (rng.random(N) < keep[target][e]) if eps[e] else correct
                predicted[t, a, e] = np.where(kept, labels, (labels + 2) % 10)
    right = predicted == labels
    success = ~right & correct
    count = correct.sum()
    return {"labels": labels, "clean_predicted": clean_predicted, "predicted": predicted,
            "flagged": flagged, "epsilons": np.asarray(eps, np.float32),
            "clean_accuracy": np.float32(correct.mean()), "has_decoder": np.int64(1),
            "clean_distances": rng.random(N).astype(np.float32), "threshold": np.float32(0.95),
            "accuracy": right.mean(-1), "success": success.sum(-1) / count,
            "undetected": (success & ~flagged).sum(-1) / count,
            "detected": (success & flagged).sum(-1) / np.maximum(success.sum(-1), 1)}


def test_every_rate_carries_wilson_over_the_images_it_counts(arrays):
    summary = adv.summarize(arrays, PARAMS)
    labels, correct = arrays["labels"], arrays["clean_predicted"] == arrays["labels"]
    assert (iv.interval_of(summary, "clean_accuracy").low,
            iv.interval_of(summary, "clean_accuracy").high) == pytest.approx(wilson(correct))
    checked = 0
    for t, target in enumerate(PARAMS.targets):
        for a, attack in enumerate(PARAMS.attacks):
            for e, eps in enumerate(PARAMS.epsilons):
                right = arrays["predicted"][t, a, e] == labels
                success = ~right & correct
                flagged = arrays["flagged"][t, a, e]
                for metric, outcome in (
                        ("accuracy", right), ("success", success[correct]),
                        ("undetected", (success & ~flagged)[correct]),
                        ("detected", flagged[success])):
                    key = metric_key(metric, target, attack, eps)
                    got = iv.interval_of(summary, key)
                    if not outcome.size:                 # eps 0: nothing succeeded to detect
                        assert got is None
                        continue
                    assert got.n == outcome.size and got.method == iv.WILSON
                    if 3 < outcome.sum() < outcome.size - 3:     # Wilson without Brown's ends
                        assert (got.low, got.high) == pytest.approx(wilson(outcome))
                        checked += 1
                    assert got.low <= summary[key] <= got.high
    assert checked >= 30


def test_the_paired_differences_per_eps(arrays):
    summary = adv.summarize(arrays, PARAMS)
    labels = arrays["labels"]
    correct = (arrays["clean_predicted"] == labels).astype(float)
    pgd = PARAMS.attacks.index("pgd")
    for e, eps in enumerate(PARAMS.epsilons):
        capsules = (arrays["predicted"][0, pgd, e] == labels).astype(float)
        votes = (arrays["predicted"][1, pgd, e] == labels).astype(float)
        caps_key, votes_key = (metric_key("accuracy", t, "pgd", eps)
                               for t in ("capsules", "votes"))
        stronger = iv.difference_of(summary, votes_key, caps_key)
        assert same(stronger, iv.paired_difference(votes, capsules))
        assert stronger.value == pytest.approx(summary[votes_key] - summary[caps_key])
        drop = iv.difference_of(summary, caps_key, "clean_accuracy")
        assert same(drop, iv.paired_difference(capsules, correct))
        if eps:
            assert stronger.high < 0 and drop.high < 0
        else:                                            # eps 0 is the clean pass itself
            assert stronger.value == drop.value == 0
    check_summary_csv(summary)


def test_a_result_stored_before_the_flags_keeps_its_scores(arrays):
    old = {k: v for k, v in arrays.items() if k != "flagged"}
    summary = adv.summarize(old, PARAMS)
    assert "intervals" not in summary
    assert summary[metric_key("accuracy", "votes", "pgd", 0.3)] == pytest.approx(
        float(arrays["accuracy"][1, 1, 2]), abs=1e-6)


def test_the_summary_keeps_each_images_outcome_for_comparing_models(arrays):
    """Per image, right or wrong: clean and under each attack through the capsules (what
    Capsules vs CNNs pairs between models), of these labels in this order."""
    from reportgen.results import per_image

    summary = adv.summarize(arrays, PARAMS)
    labels = arrays["labels"]
    images, clean = per_image.outcomes_of(summary, "clean_accuracy")
    assert images == per_image.fingerprint(labels)
    assert np.array_equal(clean, arrays["clean_predicted"] == labels)
    for a, attack in enumerate(PARAMS.attacks):
        for e, eps in enumerate(PARAMS.epsilons):
            key = metric_key("accuracy", "capsules", attack, round(float(eps), 6))
            _, right = per_image.outcomes_of(summary, key)
            assert np.array_equal(right, arrays["predicted"][0, a, e] == labels)
            assert right.mean() == pytest.approx(summary[key])
    assert per_image.outcomes_of(summary, metric_key("accuracy", "votes", "pgd", 0.1)) is None
    rows = check_summary_csv(summary)
    assert not any(k.startswith(per_image.PER_IMAGE) for k in rows)


def test_the_accuracy_curves_are_drawn_in_their_wilson_bands(arrays):
    """The per-step chart: each attack's accuracy against eps in a band whose ends are its
    Wilson interval at every eps (SciPy's, here), the caption saying so."""
    from reportgen.figures.encode import new_figure
    from reportgen.techniques.adversarial_robustness import figures

    summary = adv.summarize(arrays, PARAMS)
    ax = new_figure(4, 3).subplots()
    eps = np.asarray(PARAMS.epsilons, np.float64)
    figures._curves(ax, eps, np.asarray(arrays["accuracy"], np.float64), PARAMS, summary)
    bands = ax.collections
    assert len(bands) == len(figures._combos(PARAMS))
    for polygon, (t, _, a, _) in zip(bands, figures._combos(PARAMS)):
        path = polygon.get_paths()[0].vertices
        for e, x in enumerate(eps):
            low, high = wilson(arrays["predicted"][t, a, e] == arrays["labels"])
            ends = path[np.isclose(path[:, 0], x), 1]
            assert (ends.min(), ends.max()) == pytest.approx((low, high), abs=1e-6)
