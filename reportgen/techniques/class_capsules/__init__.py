"""Class capsules: every class capsule's pose and its activation — a vector and its length
(Sabour et al. 2017), or a 4x4 pose matrix and its logistic activation (Hinton et al. 2018)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.figures.encode import json_floats
from reportgen.results.references import cite
from reportgen.techniques.base import Technique


@dataclass(frozen=True)
class Params:
    """No options."""


def variants(description) -> list[Params]:
    return [Params()]


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"capsules": (B, classes, dims), "lengths": (B, classes)}: poses (matrices flattened
    row-major) and activations (the key keeps its first name)."""
    return {"capsules": np.asarray(batch["class_capsules"], np.float32),
            "lengths": np.asarray(batch["lengths"], np.float32)}


def _render(result, params, ctx):
    from reportgen.figures.matrix_capsules import is_matrix, render_class_poses
    from reportgen.techniques.class_capsules.figures import render_class_capsules

    draw = render_class_poses if is_matrix(ctx) else render_class_capsules
    return draw(result, params, ctx) + [_capsules_json(result)]


def capsule_numbers(result, params=None, ctx=None) -> dict:
    """The pose values themselves (K x D), their lengths and the predicted class: what the
    Decoder page's live decoder starts its sliders from (`Panel.numbers`), and a download."""
    # float32 as the network computed them, with their shortest digits (json_floats)
    capsules = np.asarray(result["capsules"], np.float32)
    lengths = np.asarray(result["lengths"], np.float32).reshape(-1)
    return {"capsules": json_floats(capsules), "lengths": json_floats(lengths),
            "predicted": int(np.argmax(lengths))}


def _capsules_json(result):
    import json

    from reportgen.figures.figure import Figure

    rows, dims = np.shape(result["capsules"])
    return Figure(name="class_capsules.json", kind="json",
                  data=json.dumps(capsule_numbers(result), separators=(",", ":")).encode()
                  + b"\n",
                  caption=f"Class capsules: {rows} x {dims} pose values and their lengths "
                          "(JSON).")


TECHNIQUE = Technique(
    name="class_capsules",
    citations=cite('sabour2017dynamic'),
    title="Class capsules",
    layer="class",
    scope="input",
    needs=frozenset({"class_capsules", "lengths"}),
    # class capsules with a pose: Self-Routing's have only an activation (the predictions
    # panel shows it), which this panel would draw as a 1-dimensional "pose"
    applies_to=frozenset({"class_capsules", "class_vectors"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=_render,
    numbers=capsule_numbers,
    variants=variants,
    description="The pose of every class capsule after its routing, with the class score the "
                "model reads from it: a vector capsule's length, the class probability (Sabour "
                "et al. 2017), whose decoder reconstructs the input from the predicted class's "
                "capsule; a 4x4 pose matrix with its logistic activation (Hinton et al. 2018); "
                "or the logit a learnt readout gives. The caption names the model's own.",
)
