"""Losses of Sabour et al. 2017: margin loss on class-capsule lengths, weighted mean-squared reconstruction."""

from __future__ import annotations

from keras import ops


def margin_loss(y_true, lengths, m_plus: float = 0.9, m_minus: float = 0.1,
                down_weight: float = 0.5):
    """Per example: sum_k T_k max(0, m+ - |v_k|)^2 + down_weight (1 - T_k) max(0, |v_k| - m-)^2.

    `y_true` is one-hot (batch, classes); `lengths` are class-capsule lengths (batch, classes).
    Returns shape (batch,).
    """
    y_true = ops.cast(y_true, lengths.dtype)
    present = y_true * ops.square(ops.maximum(0.0, m_plus - lengths))
    absent = down_weight * (1.0 - y_true) * ops.square(ops.maximum(0.0, lengths - m_minus))
    return ops.sum(present + absent, axis=-1)


def reconstruction_loss(images, reconstructions, weight: float):
    """weight x mean squared pixel error per example, shape (batch,).

    weight = 0.392 reproduces the paper's 0.0005 x sum of squared errors over 784 pixels.
    """
    batch = ops.shape(images)[0]
    diff = ops.reshape(images, (batch, -1)) - ops.reshape(reconstructions, (batch, -1))
    return weight * ops.mean(ops.square(diff), axis=-1)
