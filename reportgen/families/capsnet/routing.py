"""Dynamic routing by agreement (Sabour et al. 2017, Procedure 1)."""

from __future__ import annotations

from keras import ops

from reportgen.capsnet.ops import squash


def dynamic_routing(votes, iterations: int, softmax_over: str = "classes"):
    """Route `votes` u_hat[j|i] of shape (batch, inputs, classes, dims) for `iterations` rounds.

    b_ij = 0; repeat: c_i = softmax_j(b_i); s_j = sum_i c_ij u_hat[j|i]; v_j = squash(s_j);
    b_ij += u_hat[j|i] . v_j.  Returns (v, c): class capsules (batch, classes, dims) and the
    coupling coefficients (batch, inputs, classes) that produced them (the last iteration's).
    `softmax_over="inputs"` normalises c over the input capsules i for each class j instead
    (as some public PyTorch CapsNets do); everything else is the same.
    """
    if softmax_over not in ("classes", "inputs"):
        raise ValueError(f"softmax_over must be 'classes' or 'inputs'. Received: {softmax_over!r}")
    axis = 2 if softmax_over == "classes" else 1
    # The first iteration's softmax of b_ij = 0 is uniform: a constant, which XLA would
    # otherwise fold at compile time, slowly.
    coupling = ops.ones_like(votes[..., 0]) / votes.shape[axis]
    logits = None
    for iteration in range(iterations):
        if iteration:
            coupling = ops.softmax(logits, axis=axis)
        s = ops.einsum("bij,bijd->bjd", coupling, votes)
        v = squash(s)
        if iteration < iterations - 1:
            agreement = ops.einsum("bijd,bjd->bij", votes, v)
            logits = agreement if logits is None else logits + agreement
    return v, coupling
