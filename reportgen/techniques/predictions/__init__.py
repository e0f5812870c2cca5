"""Predictions: every class's score, in the model's own terms (reportgen.capsnet.model_words).

Vector capsules: lengths, not a softmax; each class capsule's length is its own probability
(Sabour et al. 2017). Matrix capsules: logistic activations. A learnt readout: the logits it
reads out of the class capsules. A CNN (Gu 2022's baselines) shows its class probabilities
(softmax, or the sigmoid / length of its class units).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy, model_description


@dataclass(frozen=True)
class Params:
    """No options."""


def variants(description) -> list[Params]:
    return [Params()]


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"lengths": (B, classes)} the class-capsule lengths (what the model predicts by); a CNN
    also gives {"probabilities"}, the same numbers, so the drawing says what they are."""
    out = {"lengths": np.asarray(batch["lengths"], np.float32)}
    if model_description(batch.net).head.kind == "logits":
        out["probabilities"] = np.asarray(batch["probabilities"], np.float32)
    return out


TECHNIQUE = Technique(
    name="predictions",
    citations=cite('sabour2017dynamic'),
    title="Predictions",
    layer="model",
    scope="input",
    needs=frozenset({"lengths", "probabilities"}),
    applies_to=frozenset(),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.techniques.predictions.figures", "render_predictions"),
    variants=variants,
    description="Every class's score, drawn as a bar chart, in the model's own terms (the "
                "caption names them): a class capsule's length, the network's probability that "
                "the class is present (Sabour et al. 2017; lengths are not a softmax and need "
                "not sum to 1); a class capsule's logistic activation; the logit a learnt layer "
                "reads out of the class capsules; or a CNN's class probabilities.",
)
