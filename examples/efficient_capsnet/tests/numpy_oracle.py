"""Efficient-CapsNet's forward pass from its equations, in plain NumPy (float64, loops where the
paper has sums), independent of the package's keras.ops code: the test oracle.

Written from Mazzia, Salvetti & Chiaberge 2021 (eqs. 2-5) and from what the authors' code
computes (github.com/EscVM/Efficient-CapsNet, utils/layers.py: Squash, PrimaryCaps, FCCaps):
the squash's epsilons, the softmax over the classes, the bias added after it, W and b in
their layout W (classes, children, child dims, dims), b (classes, children, 1).
"""

from __future__ import annotations

import numpy as np


def squash(s: np.ndarray, eps: float = 1e-20) -> np.ndarray:
    """(1 - 1/(e^|s| + eps)) s / (|s| + eps) over the last axis (eq. 2)."""
    s = np.asarray(s, np.float64)
    n = np.sqrt((s ** 2).sum(-1, keepdims=True))
    return (1.0 - 1.0 / (np.exp(n) + eps)) * s / (n + eps)


def fc_caps(u: np.ndarray, W: np.ndarray, b: np.ndarray | None, eps: float = 1e-20):
    """Self-attention routing of primary capsules u (B, N, d) into K class capsules:
    -> (v (B, K, D), c (B, N, K), c + b (B, N, K)).

    Per image and class j: the votes U_j (N x D), u_hat[j|i] = u_i W_ij; the self-attention
    matrix A_j = U_j U_j^T / sqrt(D) (N x N), formed in full; a child's logit is its row sum;
    c_ij = softmax over j; s_j = sum_i (c_ij + b_ij) u_hat[j|i]; v_j = squash(s_j).
    """
    u, W = np.asarray(u, np.float64), np.asarray(W, np.float64)
    batch, n, _ = u.shape
    k, _, _, d = W.shape
    bias = np.zeros((k, n)) if b is None else np.asarray(b, np.float64).reshape(k, n)
    v = np.zeros((batch, k, d))
    c = np.zeros((batch, n, k))
    for image in range(batch):
        votes = np.zeros((k, n, d))
        logits = np.zeros((n, k))
        for j in range(k):
            for i in range(n):
                votes[j, i] = u[image, i] @ W[j, i]
            attention = votes[j] @ votes[j].T / np.sqrt(d)
            logits[:, j] = attention.sum(axis=1)
        for i in range(n):
            e = np.exp(logits[i] - logits[i].max())
            c[image, i] = e / e.sum()
        for j in range(k):
            s = ((c[image, :, j] + bias[j])[:, None] * votes[j]).sum(axis=0)
            v[image, j] = squash(s, eps)
    return v, c, c + bias.T[None]


def batch_norm(x, gamma, beta, mean, variance, epsilon: float = 1e-3):
    """Keras's BatchNormalization at inference, over the last axis."""
    return (np.asarray(x, np.float64) - mean) / np.sqrt(variance + epsilon) * gamma + beta


def grouped_conv(x, kernel, bias, stride: int = 1):
    """The authors' Conv2D(F, K, groups=F) over F channels, valid padding, as sums: channel c
    of the output is channel c of the input correlated with its own K x K kernel.
    x (B, H, W, F), kernel (K, K, F) -> (B, Ho, Wo, F)."""
    x = np.asarray(x, np.float64)
    kh, kw, channels = kernel.shape
    batch, height, width, _ = x.shape
    ho, wo = (height - kh) // stride + 1, (width - kw) // stride + 1
    out = np.zeros((batch, ho, wo, channels))
    for p in range(ho):
        for q in range(wo):
            window = x[:, p * stride:p * stride + kh, q * stride:q * stride + kw, :]
            out[:, p, q, :] = (window * kernel[None]).sum(axis=(1, 2)) + bias
    return out


def head(conv_out, bn, depthwise_kernel, depthwise_bias, types, dims, W, b, eps=1e-20):
    """From the last plain convolution's ReLU output to the class capsules and lengths:
    BatchNorm, the grouped convolution, capsules (row, column, type order), squash, FCCaps.
    Returns (primary capsules, class capsules, coupling, c + b, lengths)."""
    x = batch_norm(conv_out, *bn)
    maps = grouped_conv(x, depthwise_kernel, depthwise_bias)
    primary = squash(maps.reshape(len(maps), -1, dims), eps)
    v, c, weights = fc_caps(primary, W, b, eps)
    return primary, v, c, weights, np.sqrt((v ** 2).sum(-1))
