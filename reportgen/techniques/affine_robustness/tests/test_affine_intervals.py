"""The 95% intervals of the affine robustness summary: Wilson's for every accuracy (the
minimum's at its sweep value), the BCa bootstrap of each image's mean correctness over a
sweep for the means, the paired difference of a sweep's mean and the clean accuracy, and the
CSV's interval columns; checked against references computed here from the per-image
outcomes."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from reportgen.results import intervals as iv
from reportgen.sdk.testing import check_summary_csv
from reportgen.techniques import affine_robustness as ar

N, CLASSES = 300, 10


def same(got, expected) -> bool:
    """Two intervals equal to float rounding (the summary resamples its scores together)."""
    return (got.n, got.method) == (expected.n, expected.method) and \
        (got.value, got.low, got.high) == pytest.approx(
            (expected.value, expected.low, expected.high), rel=1e-9, abs=1e-12)


def wilson(successes: int, n: int) -> tuple[float, float]:
    ci = binomtest(successes, n).proportion_ci(method="wilson")
    return ci.low, ci.high


@pytest.fixture(scope="module")
def arrays():
    """Per-image outcomes of two sweeps whose accuracy falls off away from the identity."""
    rng = np.random.default_rng(4)
    labels = rng.integers(0, CLASSES, N)
    clean = rng.random(N) < 0.9
    out = {"labels": labels, "clean_correct": clean, "clean_accuracy": np.float64(clean.mean()),
           "class_counts": np.bincount(labels, minlength=CLASSES).astype(np.float64)}
    for factor, values in (("rotation", (-40.0, 0.0, 40.0)), ("scale", (0.8, 1.0, 1.2, 1.4))):
        chance = 0.9 - 0.4 * np.abs(np.linspace(-1, 1, len(values)))[:, None]
        right = rng.random((len(values), N)) < chance
        predicted = np.where(right, labels, (labels + 1) % CLASSES)
        out[f"values_{factor}"] = np.asarray(values)
        out[f"predicted_{factor}"] = predicted
        out[f"accuracy_{factor}"] = (predicted == labels).mean(1)
    return out


def test_every_accuracy_carries_its_wilson_interval(arrays):
    summary = ar.summarize(arrays)
    got = iv.interval_of(summary, "clean_accuracy")
    assert (got.low, got.high) == pytest.approx(wilson(int(arrays["clean_correct"].sum()), N))
    assert got.method == iv.WILSON and got.n == N
    for factor in ("rotation", "scale"):
        hits = (arrays[f"predicted_{factor}"] == arrays["labels"]).sum(1)
        for s, k in enumerate(hits):
            one = iv.interval_of(summary, f"{factor}_accuracy", s)
            assert one.value == k / N and (one.low, one.high) == pytest.approx(wilson(int(k), N))
        lowest = iv.interval_of(summary, f"{factor}_min_accuracy")
        assert lowest.value == hits.min() / N
        assert (lowest.low, lowest.high) == pytest.approx(wilson(int(hits.min()), N))


def test_the_means_are_bootstrapped_over_images_and_paired_with_the_clean_accuracy(arrays):
    summary = ar.summarize(arrays)
    clean = arrays["clean_correct"].astype(float)
    per_factor = []
    for factor in ("rotation", "scale"):
        predicted = arrays[f"predicted_{factor}"]
        # each image's share of the sweep it survives, counted one image at a time
        swept = np.array([np.mean([predicted[s, i] == arrays["labels"][i]
                                   for s in range(len(predicted))]) for i in range(N)])
        per_factor.append(swept)
        mean = iv.interval_of(summary, f"{factor}_mean_accuracy")
        assert same(mean, iv.bootstrap_mean(swept)) and mean.low < mean.value < mean.high
        assert mean.value == pytest.approx(arrays[f"accuracy_{factor}"].mean())
        gap = iv.difference_of(summary, f"{factor}_mean_accuracy", "clean_accuracy")
        assert same(gap, iv.paired_difference(swept, clean))
        assert gap.value == pytest.approx(summary[f"{factor}_mean_accuracy"]
                                          - summary["clean_accuracy"])
        assert gap.high < 0           # accuracy falls 0.9 -> ~0.6 under the sweep: told apart
    overall = iv.interval_of(summary, "mean_accuracy")
    assert same(overall, iv.bootstrap_mean(np.mean(per_factor, 0)))


def test_the_csv_has_the_interval_columns(arrays):
    summary = ar.summarize(arrays)
    rows = check_summary_csv(summary)
    assert rows["clean_accuracy"]["method"] == "Wilson"
    assert len(rows["rotation_accuracy"]["low"].split()) == 3
    assert rows["images"]["low"] == ""
    assert float(rows["scale_mean_accuracy - clean_accuracy"]["value"]) == pytest.approx(
        summary["scale_mean_accuracy"] - summary["clean_accuracy"])


def test_a_result_without_per_image_outcomes_keeps_its_scores():
    """Arrays stored before the per-image outcomes (no labels): the scores, no intervals."""
    old = {"clean_accuracy": np.float64(0.5), "class_counts": np.ones(4),
           "values_rotation": np.zeros(1), "accuracy_rotation": np.array([0.25]),
           "predicted_rotation": np.zeros((1, 4), np.int64)}
    summary = ar.summarize(old)
    assert summary["rotation_mean_accuracy"] == 0.25 and "intervals" not in summary
