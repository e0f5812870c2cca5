"""NumPy oracles for the analyses: Routing Path Visualization and Grad-CAM++."""

from __future__ import annotations

import numpy as np


def rpv(primary_capsules: np.ndarray, coupling: np.ndarray, class_capsules: np.ndarray,
        grid_shape: tuple[int, int], types: int, method: str) -> np.ndarray:
    """Maps (B, K, gh, gw): mean over capsule types of l_i c_ij l_j (modified) or
    l_i (c_ij l_j)^2 (original), looping over capsules; capsule i = (row*gw + col)*types + type.
    """
    gh, gw = grid_shape
    batch, inputs, classes = coupling.shape
    l_i = np.linalg.norm(np.asarray(primary_capsules, np.float64), axis=-1)   # (B, N)
    l_j = np.linalg.norm(np.asarray(class_capsules, np.float64), axis=-1)     # (B, K)
    out = np.zeros((batch, classes, gh, gw))
    for i in range(inputs):
        cell, _type = divmod(i, types)
        row, col = divmod(cell, gw)
        for j in range(classes):
            c = coupling[:, i, j].astype(np.float64)
            if method == "modified":
                m = l_i[:, i] * c * l_j[:, j]
            else:
                m = l_i[:, i] * (c * l_j[:, j]) ** 2
            out[:, j, row, col] += m / types
    return out


def gradcam_plus_plus(features: np.ndarray, grads: np.ndarray, score: float) -> np.ndarray:
    """Grad-CAM++ (Chattopadhay et al. 2018, eq. 19 with the exponential score) for ONE image:
    features and grads (h, w, F), score the class score S. Returns the raw relu'd map (h, w)."""
    a = np.asarray(features, np.float64)
    g = np.asarray(grads, np.float64) * np.exp(score)          # dY/dA with Y = exp(S)
    h, w, filters = a.shape
    cam = np.zeros((h, w))
    for k in range(filters):
        g2 = g[..., k] ** 2 / np.exp(score)                     # exp(S) (dS/dA)^2
        g3 = g[..., k] ** 3 / np.exp(score) ** 2                # exp(S) (dS/dA)^3
        denominator = 2 * g2 + a[..., k].sum() * g3
        alpha = np.where(g2 != 0, g2 / np.where(denominator != 0, denominator, 1), 0.0)
        if alpha.sum() != 0:
            alpha = alpha / alpha.sum()
        weight = np.sum(alpha * np.maximum(g[..., k], 0))
        cam += weight * a[..., k]
    return np.maximum(cam, 0)


def minmax(maps: np.ndarray) -> np.ndarray:
    """relu, then min-max per map (leading axis) to [0, 1]; constant maps become 0."""
    out = np.zeros(maps.shape)
    for n, m in enumerate(np.maximum(maps, 0)):
        span = m.max() - m.min()
        if span > 0:
            out[n] = (m - m.min()) / span
    return out
