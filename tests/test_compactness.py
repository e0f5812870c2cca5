"""Compactness (Gu 2022, Ch.5): both aggregations over images against a plain-NumPy loop, their
chance levels (an isotropic random change), the summary keys (compactness_<factor> is the
aggregation of the order of Gu's Table 5) and Table 5 reading it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reportgen.probe.affine import FACTORS
from reportgen.techniques.capsule_semantics import numbers as rc
from reportgen.results.capsules_vs_cnns import ModelRecord, table5
from reportgen.results.findings import compactness_finding
from reportgen.techniques import capsule_semantics as cs


def _oracle(vectors):
    """(per-image KL averaged, KL of the image-averaged shares) with plain loops."""
    kls, shares = [], []
    for item in vectors:                                  # (Z, D)
        z, d = item.shape
        var = [sum((item[k, j] - sum(item[:, j]) / z) ** 2 for k in range(z)) / z
               for j in range(d)]
        total = sum(var)
        if total == 0:
            continue
        p = [v / total for v in var]
        shares.append(p)
        kls.append(sum(q * math.log(q * d) for q in p if q > 0))
    mean_p = [sum(p[j] for p in shares) / len(shares) for j in range(len(shares[0]))]
    pooled = sum(q * math.log(q * len(mean_p)) for q in mean_p if q > 0)
    return sum(kls) / len(kls), pooled


def _vectors(seed=0, images=7, steps=5, dims=6):
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(images, steps, dims)) * rng.uniform(0.1, 2.0, size=(1, 1, dims))
    vectors[3] = 0.5                                      # one image whose vector never moves
    return vectors


def test_both_aggregations_match_a_plain_loop():
    vectors = _vectors()
    per_image, pooled = _oracle(vectors)
    shares = rc.dimension_shares(vectors)
    assert np.isnan(shares[3]).all()
    # a vector that does not move, up to rounding, has no shares either
    still = np.repeat(np.random.default_rng(3).normal(size=(1, 1, 6)) / 3 + 0.1, 5, axis=1)
    assert np.isnan(rc.dimension_shares(still)).all()
    assert rc.per_image_compactness(shares) == pytest.approx(per_image, rel=1e-12)
    assert rc.pooled_compactness(shares) == pytest.approx(pooled, rel=1e-12)
    assert np.nanmean(cs.compactness_scores(vectors)) == pytest.approx(per_image, rel=1e-12)
    # the pooled score of the image-averaged shares (what compute stores) is the same
    assert rc.pooled_compactness(np.nanmean(shares, 0)) == pytest.approx(pooled, rel=1e-12)
    # Jensen: the KL is convex, so averaging the shares first never gives more
    assert pooled <= per_image


def test_chance_levels_separate_the_aggregations():
    """With 11 values per image (the analysis' default) an isotropic change already scores
    ~0.09 per image, while the pooled score of 100 images stays two orders lower."""
    chance = rc.chance_levels(100, 11, 16, runs=50)
    per_mean, per_high = chance["per_image"]
    pool_mean, pool_high = chance["pooled"]
    assert 0.05 < per_mean < per_high < 0.15
    assert 0 < pool_mean < pool_high < 0.003
    # seeded: the same numbers every time; more images lower the pooled chance level
    assert rc.chance_levels(100, 11, 16, runs=50) == chance
    assert rc.chance_levels(400, 11, 16, runs=50)["pooled"][0] < pool_mean
    # one dimension carrying all the change is far above either chance level
    one = np.zeros((100, 11, 16))
    one[:, :, 2] = np.linspace(-1, 1, 11)
    assert rc.pooled_compactness(rc.dimension_shares(one)) == pytest.approx(math.log(16))


def _arrays(vectors_per_factor):
    shares = [rc.dimension_shares(v) for v in vectors_per_factor]
    return {"dim_variance": np.ones(6), "predicted_counts": np.full(3, 4.0),
            "compactness": np.array([np.nanmean(rc.kl_to_uniform(s)) for s in shares]),
            "compactness_dim_share": np.array([np.nanmean(s, 0) for s in shares]),
            "compactness_index": np.arange(len(vectors_per_factor[0])),
            "factor_values": np.tile(np.linspace(-1, 1, vectors_per_factor[0].shape[1]),
                                     (len(FACTORS), 1))}


def test_summary_holds_both_with_their_chance_levels_and_table5_reads_gu_s():
    vectors = [_vectors(seed) for seed in range(len(FACTORS))]
    summary = cs.summarize(_arrays(vectors), None)
    for factor, v in zip(FACTORS, vectors):
        per_image, pooled = _oracle(v)
        assert summary[f"compactness_{factor}"] == pytest.approx(pooled, rel=1e-9)
        assert summary[f"compactness_per_image_{factor}"] == pytest.approx(per_image, rel=1e-9)
    assert summary[rc.CHANCE_POOLED] == pytest.approx(rc.chance_levels(7, 5, 6)["pooled"])
    assert summary[rc.CHANCE_PER_IMAGE] == pytest.approx(rc.chance_levels(7, 5, 6)["per_image"])
    record = ModelRecord("M", "CapsNet", 1, [{"step": "1-1", "val_accuracy": 0.995}],
                         {"1-1": {"capsule_semantics": summary}})
    row, = table5([record])
    assert row["compactness"] == pytest.approx(_oracle(vectors[0])[1], rel=1e-9)
    assert row["reference"] == 0.0031


def test_finding_claims_nothing_a_random_change_reaches():
    base = {rc.CHANCE_POOLED: [0.004, 0.006], rc.CHANCE_PER_IMAGE: [0.35, 0.45],
            "compactness_per_image_rotation": 0.29}
    weak = compactness_finding({**base, "compactness_rotation": 0.005},
                               untrained={"compactness_rotation": 0.0049,
                                          "compactness_per_image_rotation": 0.31})
    assert "no more concentrated than a random change" in weak.text
    assert "threshold: 0.006" in weak.text and "does not separate them" in weak.text
    assert weak.untrained == "untrained (0-0): 0.0049, per image 0.31"
    strong = compactness_finding({**base, "compactness_rotation": 0.0123})
    assert "more concentrated in few dimensions than a random change" in strong.text
    assert compactness_finding({"compactness_rotation": 0.01}) is None   # no chance level
