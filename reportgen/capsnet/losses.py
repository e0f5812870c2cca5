"""Losses of Sabour et al. 2017 (margin loss on class-capsule lengths, weighted mean-squared
reconstruction) and of Hinton, Sabour & Frosst 2018 (spread loss on class activations)."""

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


def spread_loss(y_true, activations, margin):
    """Spread loss (Hinton, Sabour & Frosst 2018): per example
    sum over the wrong classes j of max(0, margin - (a_t - a_j))^2, with a_t the true class's
    activation. `y_true` one-hot (batch, classes); returns shape (batch,). The margin grows
    during training (reportgen.families.em.EMParams.margin)."""
    y_true = ops.cast(y_true, activations.dtype)
    target = ops.sum(y_true * activations, axis=-1, keepdims=True)
    gaps = ops.square(ops.maximum(0.0, margin - (target - activations)))
    return ops.sum((1.0 - y_true) * gaps, axis=-1)
