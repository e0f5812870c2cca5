"""Capsule semantics results: the summary keys other modules read, the two aggregations of the
compactness score, their chance levels, and the published compactness reference.

Compactness (Gu 2022, Ch.5): for one image and one affine factor, the class vectors at the Z
values of the factor (Z, D) have per-dimension variances var_d; p_d = var_d / Σ var, and the
score is KL(p ‖ uniform) = Σ_d p_d log(p_d · D) (0: the change spreads evenly over the D
dimensions; log D: it stays in one). Over images it can be aggregated in two ways:

- per image: the KL of each image's p, averaged over images. With Z = 11 values a sample
  variance is itself noisy, so even a change spread evenly (isotropic) gives ~0.1–0.6 per image:
  this aggregation does not separate a trained network from an untrained one;
- pooled: the KL of p averaged over images (p̄_d = mean_i p_{i,d}). The per-image noise averages
  out, and the scores are of the order of Gu's Ch.5 Table 5 (0.0003–0.0325). This is the
  aggregation compared with his table (`compactness_<factor>` in the summary).

The chance level of each is what an isotropic random change (every dimension i.i.d. Gaussian,
the same Z values per image and the same number of images) gives: `chance_levels`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from reportgen.results.technique_numbers import CHANCE_PER_IMAGE, CHANCE_POOLED, PER_IMAGE, POOLED

# Summary keys (capsule_semantics.summarize; the live decoder's "±k σ" slider ranges read them,
# reportgen/pages/live.py):
IMAGES = "images"                  # evaluation images the per-dimension spread is taken over
DIMENSION_STD = "dimension_std"    # [D]: σ of each pose dimension of the predicted class capsule
DIMENSION_VARIANCE = "dim_variance"    # [D]: the same spread as a variance (σ²)
# compactness_<factor>, compactness_per_image_<factor>, compactness_chance_pooled / _per_image:
# in reportgen/results/technique_numbers.py (findings and baselines read them too).
CHANCE_RUNS = 200                  # simulated isotropic changes behind a chance level
ROUNDING = 1e-20                   # Σ var below this x the mean squared length: no change

REFERENCE = ("Gu 2022 (Ch.5 Table 5, MNIST, rotation) reports 0.0003 (ConvNet-R) to 0.0325 "
             "(ConvNet-CR-SF), CapsNet 0.0031: context, not our result")


def dimension_shares(vectors: np.ndarray) -> np.ndarray:
    """p_{i,d} = var_d / Σ var of each item of vectors (B, Z, D) over its Z values; (B, D),
    NaN for an item whose vector does not change (Σ var = 0)."""
    vectors = np.asarray(vectors, np.float64)
    var = vectors.var(axis=1)
    total = var.sum(-1, keepdims=True)
    # a variance at the level of rounding (a vector that does not move) is no change
    moved = total > ROUNDING * np.square(vectors).sum(-1).mean(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(moved, var / np.where(moved, total, 1.0), np.nan)


def kl_to_uniform(shares: np.ndarray) -> np.ndarray:
    """KL(p ‖ uniform) = Σ_d p_d log(p_d · D) over the last axis of shares (…, D); NaN where p
    is NaN."""
    p = np.asarray(shares, np.float64)
    dims = p.shape[-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0) * dims), 0.0)
    return np.where(np.isnan(p).any(-1), np.nan, terms.sum(-1))


def per_image_compactness(shares: np.ndarray) -> float:
    """The KL of each image's p (B, D), averaged over the images that have one."""
    scores = kl_to_uniform(shares)
    return float(np.nanmean(scores)) if np.isfinite(scores).any() else float("nan")


def pooled_compactness(shares: np.ndarray) -> float:
    """The KL of p averaged over the images that have one (B, D), or of p̄ (D,) itself."""
    p = np.asarray(shares, np.float64)
    if p.ndim == 2:
        valid = np.isfinite(p).all(-1)
        if not valid.any():
            return float("nan")
        p = p[valid].mean(0)
    return float(kl_to_uniform(p)) if np.isfinite(p).all() else float("nan")


def chance_levels(images: int, steps: int, dims: int, runs: int = CHANCE_RUNS,
                  seed: int = 0) -> dict[str, list[float]]:
    """{"per_image": [mean, 95th percentile], "pooled": [...]} of each aggregation over `runs`
    simulated isotropic changes: `images` items of `steps` values, every one of `dims`
    dimensions i.i.d. standard normal (seeded, so a summary is reproducible)."""
    return {name: list(levels)
            for name, levels in _chance_levels(images, steps, dims, runs, seed).items()}


@lru_cache(maxsize=16)
def _chance_levels(images: int, steps: int, dims: int, runs: int, seed: int) -> dict:
    """chance_levels, simulated once per shape (the summary and the figure both ask)."""
    rng = np.random.default_rng(seed)
    per_image, pooled = [], []
    for _ in range(runs):
        shares = dimension_shares(rng.standard_normal((max(images, 1), steps, dims)))
        per_image.append(per_image_compactness(shares))
        pooled.append(pooled_compactness(shares))
    return {name: (float(np.mean(v)), float(np.percentile(v, 95)))
            for name, v in (("per_image", per_image), ("pooled", pooled))}
