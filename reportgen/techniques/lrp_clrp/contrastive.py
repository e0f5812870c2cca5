"""Contrastive LRP (CLRP; Gu, Yang & Tresp, ACCV 2018, section 4) and how class-discriminative
relevance maps are.

LRP maps of different classes look alike (the instance, not the class, is explained). CLRP
explains a class against a dual virtual class and keeps what only the target has:
    CLRP = max(0, R_target - R_dual)
- CLRP1: the dual is every other class: the last layer's weights without class j's, the
  target's score S_y redistributed uniformly over the K - 1 others (S_y / (K - 1) each);
- CLRP2: the dual is class j's own last-layer weights negated (-W_j), seeded with S_y.
Both duals go down the same rules as LRP (reportgen.techniques.lrp_clrp.rules). The contrast
itself (`contrast`) takes any two relevance maps of the same shape, so that it transfers to any
explanation: the target's map minus its dual's, clipped at 0.
"""

from __future__ import annotations

import numpy as np

from reportgen.techniques.lrp_clrp import rules as lrp_rules

VARIANTS = ("lrp", "clrp1", "clrp2")
MEASURES = ("cosine", "spearman")


def contrast(target_map, dual_map) -> np.ndarray:
    """max(0, target - dual), element by element (any map and its dual's)."""
    return np.maximum(np.asarray(target_map, np.float64) - np.asarray(dual_map, np.float64), 0.0)


def target_seed(scores: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(B, K) S_y on the target's logit, 0 elsewhere (LRP, and CLRP2's dual on -W)."""
    scores = np.asarray(scores, np.float64)
    rows = np.arange(len(targets))
    seed = np.zeros_like(scores)
    seed[rows, targets] = scores[rows, targets]
    return seed


def others_seed(scores: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(B, K) CLRP1's dual: S_y / (K - 1) on every class but the target's."""
    scores = np.asarray(scores, np.float64)
    rows = np.arange(len(targets))
    classes = scores.shape[1]
    if classes < 2:
        raise ValueError("CLRP1 contrasts a class with the others: it needs two classes or more")
    seed = np.repeat(scores[rows, targets][:, None] / (classes - 1), classes, axis=1)
    seed[rows, targets] = 0.0
    return seed


def pixel_map(relevance) -> np.ndarray:
    """(B, H, W) the relevance of each pixel: summed over its channels (conserves the sum)."""
    return np.asarray(relevance, np.float64).sum(axis=-1)


def relevance_maps(steps, images, targets, rules: lrp_rules.Rules = lrp_rules.Rules(),
                   dtype: str = "float32") -> dict[str, np.ndarray]:
    """(B, H, W) pixel maps of each image's target class: "lrp", "clrp1", "clrp2", the duals
    "dual1", "dual2", and "scores" (B, K) the logits."""
    targets = np.asarray(targets, np.int64)
    activations = lrp_rules.forward(steps, images, dtype)
    scores = activations[-1].numpy()
    relevance = lrp_rules.propagate(steps, activations, target_seed(scores, targets), rules)
    dual1 = lrp_rules.propagate(steps, activations, others_seed(scores, targets), rules)
    # CLRP2: the same network with the top layer's weights negated (its forward pass too, so
    # that whatever lies between that layer and the logits sees the dual's units)
    negated = lrp_rules.forward(steps, images, dtype, negate_top=True)
    dual2 = lrp_rules.propagate(steps, negated, target_seed(scores, targets), rules,
                                negate_top=True)
    maps = {"lrp": pixel_map(relevance), "dual1": pixel_map(dual1), "dual2": pixel_map(dual2)}
    maps["clrp1"] = contrast(maps["lrp"], maps["dual1"])
    maps["clrp2"] = contrast(maps["lrp"], maps["dual2"])
    maps["scores"] = scores.astype(np.float64)
    return maps


# --- class-discriminativeness -------------------------------------------------------------------

def _ranks(values: np.ndarray) -> np.ndarray:
    from scipy import stats

    return stats.rankdata(values, axis=-1)


def similarity(a, b, measure: str = "cosine") -> np.ndarray:
    """(B,) cosine or Spearman rank correlation of maps a and b (B, ...), flattened; NaN where
    either map is constant (Spearman) or all zero (cosine)."""
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}. Received: {measure!r}")
    a = np.asarray(a, np.float64).reshape(len(a), -1)
    b = np.asarray(b, np.float64).reshape(len(b), -1)
    if measure == "spearman":
        a, b = _ranks(a), _ranks(b)
        a = a - a.mean(axis=1, keepdims=True)
        b = b - b.mean(axis=1, keepdims=True)
    norms = np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    ok = norms > 0
    value = np.divide((a * b).sum(axis=1), np.where(ok, norms, 1.0))
    return np.where(ok, np.clip(value, -1.0, 1.0), np.nan)


def discriminativeness(map_first, map_second, measure: str = "cosine") -> np.ndarray:
    """(B,) 1 - similarity of two classes' maps of the same images: 0 when the maps are the
    same up to scale (nothing tells the classes apart), up to 2 when opposed; NaN where the
    similarity is undefined."""
    return 1.0 - similarity(map_first, map_second, measure)


def top_two(scores) -> np.ndarray:
    """(B, 2) the two highest-scoring classes of each row, best first."""
    order = np.argsort(-np.asarray(scores, np.float64), axis=1, kind="stable")
    return order[:, :2]
