"""NumPy oracle of Self-Routing (Hahn, Pyeon & Kim 2019), written from the equations, in float64,
one child and one parent at a time: slow and plain on purpose.

    c_ij = exp(b_ij) / sum_j' exp(b_ij')
    a_j = sum_i a_i c_ij / sum_i a_i
    v_j = sum_i (a_i c_ij / sum_k a_k c_kj) u_hat_j|i
and the convolutional layer: for every output position, the children are the k x k window of
the zero-padded grid (A types each), votes u_hat = W1[slot] u, logits b = W2[slot] u + beta[slot]
with slot = (ky * k + kx) * A + type.
"""

from __future__ import annotations

import math

import numpy as np


def self_routing(votes, activations, logits):
    """votes (B, N, P, D) or None, activations (B, N), logits (B, N, P) -> (a (B, P), v (B, P,
    D) or None, c (B, N, P)); a parent whose children all have activation 0 gets 0."""
    logits = np.asarray(logits, np.float64)
    acts = np.asarray(activations, np.float64)
    batch, children, parents = logits.shape
    coupling = np.zeros((batch, children, parents))
    a_out = np.zeros((batch, parents))
    poses = None if votes is None else np.zeros((batch, parents, np.shape(votes)[-1]))
    for b in range(batch):
        for i in range(children):
            top = max(logits[b, i])
            exps = [math.exp(logits[b, i, j] - top) for j in range(parents)]
            for j in range(parents):
                coupling[b, i, j] = exps[j] / sum(exps)
        total = sum(acts[b, i] for i in range(children))
        for j in range(parents):
            mass = sum(acts[b, i] * coupling[b, i, j] for i in range(children))
            a_out[b, j] = mass / total if total > 0 else 0.0
            if poses is not None and mass > 0:
                for i in range(children):
                    poses[b, j] += acts[b, i] * coupling[b, i, j] / mass * \
                        np.asarray(votes[b, i, j], np.float64)
    return a_out, poses, coupling


def conv_self_routing(poses, activations, w1, w2, beta, kernel, stride, padding):
    """poses (B, H, W, A, C), activations (B, H, W, A); w1 (S, C, P*D) or None, w2 (S, C, P),
    beta (S, P) for S = k*k*A slots -> (a (B, Ph, Pw, P), v (B, Ph, Pw, P, D) or None,
    window couplings {(b, p, q, y, x, type): (P,)} for every real child of every window)."""
    poses = np.asarray(poses, np.float64)
    activations = np.asarray(activations, np.float64)
    batch, height, width, types, dims_in = poses.shape
    parents = w2.shape[-1]
    ph = (height + 2 * padding - kernel) // stride + 1
    pw = (width + 2 * padding - kernel) // stride + 1
    dims = None if w1 is None else w1.shape[-1] // parents
    a_out = np.zeros((batch, ph, pw, parents))
    v_out = None if w1 is None else np.zeros((batch, ph, pw, parents, dims))
    couplings = {}
    for b in range(batch):
        for p in range(ph):
            for q in range(pw):
                votes, acts, logits, where = [], [], [], []
                for ky in range(kernel):
                    for kx in range(kernel):
                        y, x = p * stride + ky - padding, q * stride + kx - padding
                        inside = 0 <= y < height and 0 <= x < width
                        for t in range(types):
                            slot = (ky * kernel + kx) * types + t
                            u = poses[b, y, x, t] if inside else np.zeros(dims_in)
                            acts.append(activations[b, y, x, t] if inside else 0.0)
                            logits.append(u @ w2[slot] + beta[slot])
                            if w1 is not None:
                                votes.append((u @ w1[slot]).reshape(parents, dims))
                            where.append((y, x, t) if inside else None)
                a, v, c = self_routing(None if w1 is None else np.array(votes)[None],
                                       np.array(acts)[None], np.array(logits)[None])
                a_out[b, p, q] = a[0]
                if v_out is not None:
                    v_out[b, p, q] = v[0]
                for i, child in enumerate(where):
                    if child is not None:
                        couplings[(b, p, q, *child)] = c[0, i]
    return a_out, v_out, couplings
