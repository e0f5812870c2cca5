"""NumPy oracles for the capsule equations of Sabour et al. 2017, written from the
equations with explicit loops where that is clearer, independent of reportgen's code."""

from __future__ import annotations

import numpy as np


def squash(s: np.ndarray) -> np.ndarray:
    """v = (|s|^2 / (1 + |s|^2)) * s / |s| along the last axis; 0 for s = 0."""
    s = np.asarray(s, np.float64)
    norm = np.linalg.norm(s, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        v = norm ** 2 / (1.0 + norm ** 2) * s / norm
    return np.where(norm > 0, v, 0.0)


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def dynamic_routing(votes: np.ndarray, iterations: int):
    """Procedure 1 of Sabour et al. for votes u_hat (B, N, K, D), one example at a time.

    Returns (v (B, K, D), c (B, N, K)) with c the coupling coefficients of the last iteration.
    """
    votes = np.asarray(votes, np.float64)
    batch, inputs, classes, _ = votes.shape
    v_all, c_all = [], []
    for b in range(batch):
        u = votes[b]
        logits = np.zeros((inputs, classes))
        for r in range(iterations):
            c = softmax(logits, axis=1)
            s = np.stack([sum(c[i, j] * u[i, j] for i in range(inputs)) for j in range(classes)])
            v = squash(s)
            if r < iterations - 1:
                logits = logits + np.einsum("ijd,jd->ij", u, v)
        v_all.append(v)
        c_all.append(c)
    return np.stack(v_all), np.stack(c_all)


def votes(primary: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """u_hat[j|i] = W[i, j] u_i for primary (B, N, d_in) and kernel (N, K, D, d_in)."""
    return np.einsum("ijdk,bik->bijd", np.asarray(kernel, np.float64),
                     np.asarray(primary, np.float64))


def margin_loss(one_hot: np.ndarray, lengths: np.ndarray, m_plus=0.9, m_minus=0.1,
                down_weight=0.5) -> np.ndarray:
    """sum_k T_k max(0, m+ - |v_k|)^2 + down_weight (1 - T_k) max(0, |v_k| - m-)^2, per example."""
    total = np.zeros(len(lengths))
    for b in range(len(lengths)):
        for k in range(lengths.shape[1]):
            t, length = one_hot[b, k], lengths[b, k]
            total[b] += t * max(0.0, m_plus - length) ** 2
            total[b] += down_weight * (1 - t) * max(0.0, length - m_minus) ** 2
    return total


def reconstruction_loss(images: np.ndarray, reconstructions: np.ndarray, weight: float):
    """weight x mean squared pixel error per example."""
    diff = np.asarray(images, np.float64) - np.asarray(reconstructions, np.float64)
    return weight * np.array([np.mean(d ** 2) for d in diff])
