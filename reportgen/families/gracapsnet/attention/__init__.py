"""GraCapsNet's built-in explanation (Gu, Wu & Tresp, AAAI 2021; Gu 2022, Ch.4).

The graph pooling of GraCapsNet (reportgen.families.gracapsnet.layers) attends, per head l, over the
nodes of the primary-capsule grid: Att^l (nodes x classes), each class's column summing to 1.
The explanation of class y is E[:, y] with E = mean over heads of Att^l, reshaped to the grid:
where the prediction y comes from. The maps are placed on the input by the primary capsules'
receptive fields. Also shown: every head's Att^l of the predicted class.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.families.gracapsnet.attention.numbers import explanation_maps, head_maps
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy


@dataclass(frozen=True)
class Params:
    """No options."""


def variants(description) -> list[Params]:
    return [Params()]


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"maps": (B, classes, gh, gw) E per class, "head_maps": (B, heads, gh, gw) Att^l of the
    predicted class, "predicted": (B,)}."""
    grid = batch.net.description.primary_capsules.grid
    attention = np.asarray(batch["attention"], np.float32)
    predicted = np.asarray(batch["predicted"], np.int64)
    return {"maps": explanation_maps(attention, grid).astype(np.float32),
            "head_maps": head_maps(attention, grid, predicted).astype(np.float32),
            "predicted": predicted.astype(np.float32)}


TECHNIQUE = Technique(
    name="gracaps_attention",
    citations=cite('gu2021graph'),
    title="GraCapsNet attention (built-in explanation)",
    layer="class",
    scope="input",
    needs=frozenset({"attention", "predicted"}),
    applies_to=frozenset({"attention", "capsule_maps"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.families.gracapsnet.attention.figures", "render"),
    variants=variants,
    description="Where each class's evidence comes from in GraCapsNet (Gu, Wu & Tresp 2021): "
                "the multi-head graph pooling's attention over the primary-capsule grid, "
                "averaged over the heads (E = mean over heads of Att^l; each class's map sums "
                "to 1 over the grid), placed on the input by the primary capsules' receptive "
                "fields, with every head's map of the predicted class beside it.",
)
