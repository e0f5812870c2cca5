"""NumPy oracle of GraCapsNet's graph pooling (Gu, Wu & Tresp, AAAI 2021), written from the
equations with explicit loops over heads and images, independent of reportgen's code.

    u'_i  = W_i u_i                                  (each primary capsule, shared by classes)
    X^l   = the u'_i of head l, nodes in grid order  (nodes x dims)
    A_pq  = exp(-|p - q|^2 / (2 sigma^2))            (grid positions p = (row, col))
    Att^l = softmax over the nodes of A X^l W        (nodes x classes)
    S^l   = Att^l^T X^l                              (classes x dims)
    V     = squash(mean over heads of S^l)
    E     = mean over heads of Att^l                 (the built-in explanation)
"""

from __future__ import annotations

import numpy as np

from reference.capsules import softmax, squash


def adjacency(grid, sigma):
    positions = [(r, c) for r in range(grid[0]) for c in range(grid[1])]
    a = np.zeros((len(positions), len(positions)))
    for p, (r1, c1) in enumerate(positions):
        for q, (r2, c2) in enumerate(positions):
            a[p, q] = np.exp(-((r1 - r2) ** 2 + (c1 - c2) ** 2) / (2.0 * sigma ** 2))
    return a


def graph_pooling(primary, projection, pooling, heads, grid, sigma):
    """primary (B, N, d) with capsule i = node * heads + head; projection (N, D, d); pooling
    (D, K). Returns (V (B, K, D), attention (B, heads, nodes, K), E (B, nodes, K))."""
    primary = np.asarray(primary, np.float64)
    batch, capsules, _ = primary.shape
    nodes = grid[0] * grid[1]
    a = adjacency(grid, sigma)
    v_all, att_all = [], []
    for b in range(batch):
        projected = np.stack([projection[i] @ primary[b, i] for i in range(capsules)])
        pooled, attention = [], []
        for head in range(heads):
            x = np.stack([projected[node * heads + head] for node in range(nodes)])
            att = softmax(a @ x @ pooling, axis=0)
            attention.append(att)
            pooled.append(att.T @ x)
        v_all.append(squash(np.mean(pooled, axis=0)))
        att_all.append(np.stack(attention))
    attention = np.stack(att_all)
    return np.stack(v_all), attention, attention.mean(axis=1)
