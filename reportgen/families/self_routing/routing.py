"""Self-routing (Hahn, Pyeon & Kim, NeurIPS 2019): the routing as a NumPy function and in
keras.ops (the layers of reportgen.families.self_routing.layers route with the latter).

No iterations: each child capsule i (pose u_i of C values, activation a_i in (0, 1)) predicts
its own routing to the parent types j from its pose:

    vote            u_hat_j|i = W1_i u_i                 (W1_i: (B·D, C))
    routing logit   b_ij = (W2_i u_i)_j + beta_ij        (W2_i: (B, C); W2 = beta = 0 at first)
    coupling        c_ij = softmax_j(b_ij)               (over the parents, per child)
    activation      a_j = sum_i a_i c_ij / sum_i a_i
    pose            v_j = sum_i (a_i c_ij / sum_k a_k c_kj) u_hat_j|i        (no squash)
"""

from __future__ import annotations

import numpy as np
from keras import ops

# Floor of the sums divided by (sum_i a_i, sum_k a_k c_kj): 0/0 -> 0 for a window of padding.
TINY = 1e-30


def self_routing(votes, activations, logits):
    """Self-routing of children to parents, NumPy in and out (batch first).

    votes (B, children, parents, D) or None (activations only); activations (B, children);
    logits (B, children, parents) -> (activations (B, parents), poses (B, parents, D) or None,
    coupling (B, children, parents)).
    """
    logits = np.asarray(logits)
    a = np.asarray(activations)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    coupling = exp / exp.sum(axis=-1, keepdims=True)
    weighted = a[..., None] * coupling                                      # (B, N, P)
    parent = weighted.sum(axis=1) / np.maximum(a.sum(axis=1, keepdims=True), TINY)
    poses = None
    if votes is not None:
        share = weighted / np.maximum(weighted.sum(axis=1, keepdims=True), TINY)
        poses = np.einsum("bnp,bnpd->bpd", share, np.asarray(votes))
    return parent, poses, coupling


def self_routing_ops(votes, activations, logits):
    """`self_routing` in keras.ops, over any leading axes: votes (..., N, P, D) or None,
    activations (..., N), logits (..., N, P)."""
    coupling = ops.softmax(logits, axis=-1)
    weighted = ops.expand_dims(activations, -1) * coupling
    total = ops.maximum(ops.sum(activations, axis=-1, keepdims=True), TINY)
    parent = ops.sum(weighted, axis=-2) / total
    poses = None
    if votes is not None:
        share = weighted / ops.maximum(ops.sum(weighted, axis=-2, keepdims=True), TINY)
        poses = ops.sum(ops.expand_dims(share, -1) * votes, axis=-3)
    return parent, poses, coupling
