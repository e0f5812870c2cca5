"""Capsule operations (Sabour et al. 2017), written with keras.ops so they run on any Keras 3 backend."""

from __future__ import annotations

from keras import ops

# Guards |s| = 0 in the squash and log(0) in lengths.
EPSILON = 1e-7


def squash(s, axis: int = -1):
    """v = (|s|^2 / (1 + |s|^2)) * s / |s|   (Sabour et al. 2017, eq. 1).

    Maps a vector's length into [0, 1) while keeping its direction; |s| = 0 gives v = 0.
    """
    squared_norm = ops.sum(ops.square(s), axis=axis, keepdims=True)
    scale = squared_norm / (1.0 + squared_norm) / ops.sqrt(squared_norm + EPSILON)
    return scale * s


def capsule_length(v, axis: int = -1):
    """Euclidean length of each capsule vector (the class probability of a class capsule)."""
    return ops.sqrt(ops.sum(ops.square(v), axis=axis) + EPSILON)
