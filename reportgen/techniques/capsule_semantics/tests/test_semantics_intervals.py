"""The 95% intervals of the capsule semantics summary: the pooled compactness (the KL of the
image-averaged shares, no mean over images) by the bootstrap of its whole statistic, the
per-image compactness by the BCa bootstrap of its mean, against references computed here
from each image's shares."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.probe.affine import FACTORS
from reportgen.results import intervals as iv
from reportgen.sdk.testing import check_summary_csv
from reportgen.techniques import capsule_semantics as cs
from reportgen.techniques.capsule_semantics.numbers import dimension_shares, kl_to_uniform

B, Z, D = 60, 5, 8


@pytest.fixture(scope="module")
def arrays():
    """Per factor, each image's class vectors over Z values, changing mostly in one dimension
    for rotation and evenly elsewhere; one image of the scale factor does not move."""
    rng = np.random.default_rng(2)
    shares, scores = [], []
    for factor in FACTORS:
        spread = np.ones(D)
        if factor == "rotation":
            spread[0] = 4.0
        vectors = rng.normal(size=(B, Z, D)) * spread
        if factor == "scale":
            vectors[3] = 1.0
        share = dimension_shares(vectors)
        shares.append(share)
        scores.append(kl_to_uniform(share))
    shares, scores = np.asarray(shares), np.asarray(scores)
    return {"dim_variance": rng.uniform(0.1, 1.0, D), "predicted_counts": np.full(10, 10.0),
            "compactness_index": np.arange(B), "factor_values": np.zeros((len(FACTORS), Z)),
            "compactness": np.nanmean(scores, 1), "compactness_per_image": scores,
            "compactness_dim_share": np.nanmean(shares, 1),
            "compactness_image_share": shares.astype(np.float32)}


def _pooled(shares: np.ndarray) -> float:
    """KL(mean p ‖ uniform) over the images that have a p, written out."""
    p = shares[np.isfinite(shares).all(1)].mean(0)
    return float(np.sum(p * np.log(p * len(p))))


def test_pooled_and_per_image_compactness_carry_their_intervals(arrays):
    summary = cs.summarize(arrays)
    shares = np.asarray(arrays["compactness_image_share"], np.float64)
    for f, factor in enumerate(FACTORS):
        pooled = iv.interval_of(summary, f"compactness_{factor}")
        assert pooled.value == pytest.approx(_pooled(shares[f]))
        # scipy.stats.bootstrap of the statistic written out (the summary's is vectorised)
        reference = iv.bootstrap_statistic(shares[f], _pooled)
        assert (pooled.low, pooled.high, pooled.n) == pytest.approx(
            (reference.low, reference.high, reference.n), rel=1e-9)
        assert pooled.method == iv.BOOTSTRAP_STATISTIC and pooled.low < pooled.high
        per_image = iv.interval_of(summary, f"compactness_per_image_{factor}")
        valid = arrays["compactness_per_image"][f]
        valid = valid[np.isfinite(valid)]
        assert per_image == iv.bootstrap_mean(valid) and per_image.n == B - (factor == "scale")
    rotation = iv.interval_of(summary, "compactness_rotation")
    assert all(rotation.low > iv.interval_of(summary, f"compactness_{f}").high
               for f in FACTORS if f != "rotation")          # one dominant dimension
    both = iv.interval_of(summary, "compactness_mean")
    assert both.value == pytest.approx(np.mean([_pooled(s) for s in shares]))
    reference = iv.bootstrap_statistic(np.moveaxis(shares, 1, 0), lambda rows: np.mean(
        [_pooled(r) for r in np.moveaxis(rows, 1, 0)]))
    assert (both.low, both.high) == pytest.approx((reference.low, reference.high), rel=1e-9)
    per_image = np.asarray(arrays["compactness_per_image"])
    overall = iv.interval_of(summary, "compactness_per_image_mean")
    assert overall.value == pytest.approx(np.mean([np.nanmean(row) for row in per_image]))
    assert overall.low < overall.value < overall.high
    check_summary_csv(summary)


def test_the_compactness_bars_carry_their_intervals(arrays, monkeypatch):
    """The per-step compactness chart: an error bar on every factor's bar in both panels,
    the per-image panel's ends SciPy's BCa bootstrap of the per-image KL's mean (a reference
    computed here), the caption saying so."""
    from scipy.stats import bootstrap

    from reportgen.techniques.capsule_semantics import figures

    drawn = []
    real = figures.error_bars
    monkeypatch.setattr(figures, "error_bars", lambda ax, x, lows, highs: drawn.append(
        (np.asarray(lows), np.asarray(highs))) or real(ax, x, lows, highs))
    ctx = type("Ctx", (), {"model": "M", "step": "1-1", "class_names": tuple("0123456789"),
                           "description": None})()
    (figure, *_) = figures._compactness(arrays, cs.Params(), ctx)
    assert "Error bars: 95% intervals" in figure.caption
    per_image, pooled = drawn
    assert np.isfinite(pooled[0]).all() and (pooled[0] <= pooled[1]).all()
    scores = np.asarray(arrays["compactness_per_image"], np.float64)
    for f in (0, len(FACTORS) - 1):
        values = scores[f][np.isfinite(scores[f])]
        ci = bootstrap((values,), np.mean, n_resamples=iv.RESAMPLES, method="BCa",
                       random_state=np.random.default_rng(iv.SEED)).confidence_interval
        assert (per_image[0][f], per_image[1][f]) == pytest.approx((ci.low, ci.high), rel=1e-6)
