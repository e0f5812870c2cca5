"""Predictions: the length of every class capsule, the network's class probabilities.

Lengths, not a softmax: each class capsule's length is its own probability (Sabour et al. 2017).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.techniques.base import Technique, lazy


@dataclass(frozen=True)
class Params:
    """No options."""


def variants(description) -> list[Params]:
    return [Params()]


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"lengths": (B, classes)} the class-capsule lengths."""
    return {"lengths": np.asarray(batch["lengths"], np.float32)}


TECHNIQUE = Technique(
    name="predictions",
    title="Predictions",
    layer="model",
    scope="input",
    needs=frozenset({"lengths"}),
    applies_to=frozenset({"class_capsules", "vector_capsules"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.figures.panels", "render_predictions"),
    variants=variants,
    description="The length of every class capsule, drawn as a bar chart. A class capsule's "
                "length is the network's probability that the class is present (Sabour et al. "
                "2017); lengths are not a softmax and need not sum to 1.",
)
