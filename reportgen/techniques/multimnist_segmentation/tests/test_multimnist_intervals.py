"""The 95% intervals of the MultiMNIST summary: Wilson's for the top-2 accuracy, the BCa
bootstrap over pairs of each pair's mean IoU and its reference's, and their paired
difference, against references computed here; the chance level is exact and has none."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from reportgen.results import intervals as iv
from reportgen.sdk.testing import check_summary_csv
from reportgen.techniques.multimnist_segmentation import summarize

N = 250


def same(got, expected) -> bool:
    """Two intervals equal to float rounding (the summary resamples its scores together)."""
    return (got.n, got.method) == (expected.n, expected.method) and \
        (got.value, got.low, got.high) == pytest.approx(
            (expected.value, expected.low, expected.high), rel=1e-9, abs=1e-12)


def _arrays(decoder: bool = True) -> dict:
    rng = np.random.default_rng(8)
    correct = (rng.random(N) < 0.85).astype(np.float32)
    reference = rng.uniform(0.2, 0.5, (N, 2))
    iou = np.clip(reference + rng.normal(0.2, 0.1, (N, 2)), 0, 1) if decoder else \
        np.full((N, 2), np.nan)
    return {"correct": correct, "iou": iou, "iou_reference": reference,
            "top2_accuracy": np.float64(correct.mean()), "top2_chance": np.float64(1 / 45),
            "segmentation_iou": np.float64(np.mean(iou)),
            "segmentation_reference": np.float64(reference.mean())}


def test_scores_carry_their_intervals():
    arrays = _arrays()
    summary = summarize(arrays)
    top2 = iv.interval_of(summary, "top2_accuracy")
    ci = binomtest(int(arrays["correct"].sum()), N).proportion_ci(method="wilson")
    assert (top2.low, top2.high) == pytest.approx((ci.low, ci.high)) and top2.n == N
    per_pair = {name: np.array([(a + b) / 2 for a, b in arrays[key]])
                for name, key in (("segmentation_iou", "iou"),
                                  ("segmentation_reference", "iou_reference"))}
    for name, values in per_pair.items():
        got = iv.interval_of(summary, name)
        assert same(got, iv.bootstrap_mean(values)) and got.low < got.value < got.high
        assert got.value == pytest.approx(float(arrays[name]))
    gain = iv.difference_of(summary, "segmentation_iou", "segmentation_reference")
    assert same(gain, iv.paired_difference(per_pair["segmentation_iou"],
                                           per_pair["segmentation_reference"]))
    assert gain.low > 0.15                   # the decoder beats the prototype by ~0.2
    assert "top2_chance" not in summary["intervals"]
    check_summary_csv(summary)


def test_without_a_decoder_only_the_accuracy_and_reference():
    summary = summarize(_arrays(decoder=False))
    assert summary["segmentation_iou"] is None
    assert set(summary["intervals"]) == {"top2_accuracy", "segmentation_reference"}
