"""Capsule operations (Sabour et al. 2017), written with keras.ops so they run on any Keras 3 backend.

Every capsule length of every model family (class-capsule lengths, the squash, the CNN
baselines' vector norms) is `safe_norm`: exact at every scale, 0 with a zero gradient at 0. An
epsilon under the square root, sqrt(|x|^2 + 1e-7), would put a floor of 3.2e-4 under every
length and hide the lengths of an untrained or collapsed network.
"""

from __future__ import annotations

from keras import ops

# The smallest normal float32: log(length) of an exactly zero capsule is log of this, not -inf.
SMALLEST_LENGTH = 1.1754944e-38


def safe_norm(x, axis: int = -1, keepdims: bool = False):
    """|x| along `axis`, exact to float32 rounding at any scale; 0 at x = 0 with gradient 0.

    Computed as m sqrt(sum((x / m)^2)) with m = max |x_i|, so that neither a tiny vector's
    squares underflow nor a huge one's overflow. At x = 0 both square roots see a placeholder 1
    (tf.where-style masking): the value is 0 and the gradient 0 instead of 0 x inf = NaN.
    """
    scale = ops.max(ops.abs(x), axis=axis, keepdims=True)
    nonzero = scale > 0
    safe_scale = ops.where(nonzero, scale, ops.ones_like(scale))
    squares = ops.sum(ops.square(x / safe_scale), axis=axis, keepdims=True)  # >= 1 when nonzero
    norm = ops.where(nonzero, safe_scale * ops.sqrt(ops.where(nonzero, squares, 1.0)), 0.0)
    return norm if keepdims else ops.squeeze(norm, axis=axis)


def squash(s, axis: int = -1):
    """v = (|s|^2 / (1 + |s|^2)) * s / |s| = s |s| / (1 + |s|^2)   (Sabour et al. 2017, eq. 1).

    Maps a vector's length n into n^2 / (1 + n^2) in [0, 1) while keeping its direction; s = 0
    gives v = 0. The factor n / (1 + n^2) is written as 1 / (n + 1/n) above n = 1, so that n^2
    overflows for no finite n, and never divides by n, so a tiny s keeps its length and
    direction exactly.
    """
    n = safe_norm(s, axis=axis, keepdims=True)
    small = n <= 1.0
    below = ops.where(small, n, 0.0)
    above = ops.where(small, 2.0, n)          # placeholders keep the unused branch finite
    factor = ops.where(small, below / (1.0 + below * below), 1.0 / (above + 1.0 / above))
    return factor * s


def capsule_length(v, axis: int = -1, epsilon: float = 0.0):
    """Euclidean length of each capsule vector (the class probability of a class capsule).
    `epsilon` > 0 computes sqrt(|v|^2 + epsilon) instead, as an imported model's source does
    (ModelParams' class_caps.length_epsilon)."""
    if epsilon:
        return ops.sqrt(ops.sum(ops.square(v), axis=axis) + epsilon)
    return safe_norm(v, axis=axis)


def log_length(lengths):
    """log of capsule lengths, SMALLEST_LENGTH standing in for an exactly zero one (whose log
    would be -inf and whose gradient NaN)."""
    return ops.log(ops.maximum(lengths, SMALLEST_LENGTH))
