"""Trainable-parameter count from ModelParams by arithmetic alone (no TensorFlow import): each
family counts its own (reportgen.settings.families).

Used by `reportgen models`, which must stay fast; a test checks it against the Keras model.
"""

from __future__ import annotations

from reportgen.capsnet.description import describe
from reportgen.settings.families import family_of


def primary_grid(params) -> tuple[int, int]:
    """(H, W) of the primary-capsule grid (the model's description computes it)."""
    return describe(params).primary_capsules.grid


def count_trainable_params(params) -> int:
    return family_of(params).count_params(params)
