"""The 95% intervals of the affNIST-like benchmark's summary: Wilson's for both accuracies and
the paired bootstrap of affNIST-like minus clean correctness over the same digits, against
references computed here."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from reportgen.results import intervals as iv
from reportgen.sdk.testing import check_summary_csv
from reportgen.techniques import affnist_benchmark as bench

N = 400


def _arrays(seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, N)
    clean = rng.random(N) < 0.97
    moved = clean & (rng.random(N) < 0.8)          # the transform loses a fifth of them
    predicted = np.where(moved, labels, (labels + 3) % 10)
    return {"labels": labels, "predicted": predicted, "clean_correct": clean,
            "affnist_accuracy": np.float64(moved.mean()),
            "clean_accuracy": np.float64(clean.mean())}


def test_both_accuracies_carry_wilson_and_their_gap_is_paired():
    arrays = _arrays()
    summary = bench.summarize(arrays)
    correct = arrays["predicted"] == arrays["labels"]
    for key, outcome in (("affnist_accuracy", correct), ("clean_accuracy",
                                                         arrays["clean_correct"])):
        got = iv.interval_of(summary, key)
        ci = binomtest(int(outcome.sum()), N).proportion_ci(method="wilson")
        assert (got.low, got.high) == pytest.approx((ci.low, ci.high))
        assert got.method == iv.WILSON and got.n == N
    gap = iv.difference_of(summary, "affnist_accuracy", "clean_accuracy")
    expected = iv.paired_difference(correct.astype(float),
                                    arrays["clean_correct"].astype(float))
    assert gap == expected and gap.low <= gap.value <= gap.high < 0
    assert gap.value == pytest.approx(summary["affnist_accuracy"] - summary["clean_accuracy"])
    assert iv.interval_of(summary, "gap").value == pytest.approx(-gap.value)
    check_summary_csv(summary)


def test_a_subset_of_other_digits_is_not_paired():
    """images=N benchmarks digits of its own: the clean accuracy counts other images."""
    arrays = _arrays()
    summary = bench.summarize(arrays, bench.Params(images=N))
    assert iv.interval_of(summary, "clean_accuracy") is not None
    assert iv.difference_of(summary, "affnist_accuracy", "clean_accuracy") is None
    assert "gap" not in summary["intervals"]


def test_the_summary_keeps_each_digits_outcome_for_comparing_models():
    """Right or wrong per digit, affNIST-like and clean (what Capsules vs CNNs pairs between
    models), of these labels in this order; not in the CSV, which lists scores."""
    from reportgen.results import per_image

    arrays = _arrays(4)
    summary = bench.summarize(arrays)
    images, moved = per_image.outcomes_of(summary, "affnist_accuracy")
    assert images == per_image.fingerprint(arrays["labels"])
    assert np.array_equal(moved, arrays["predicted"] == arrays["labels"])
    assert np.array_equal(per_image.outcomes_of(summary, "clean_accuracy")[1],
                          arrays["clean_correct"])
    assert not any(k.startswith(per_image.PER_IMAGE) for k in check_summary_csv(summary))
