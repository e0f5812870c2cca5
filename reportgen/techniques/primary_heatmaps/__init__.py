"""Capsule heatmaps: per capsule type, the grid of capsule activations of a capsule layer.

Activations are the capsule lengths of vector capsules (Sabour et al. 2017) or the logistic
activations of matrix capsules (Hinton et al. 2018). One variant per capsule layer on a grid:
the primary capsules (option layer "" = the model's primary capsule layer) and, for matrix
capsules, every convolutional capsule layer. The arrays hold raw values; the normalisation
option (per layer, per map, absolute) is applied when drawing, and each grid cell is placed over
the input region it sees through every layer before it (the description's receptive field).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.base import model_description
from reportgen.techniques.compute import OMIT_DEFAULT, check_option

NORMALIZATIONS = ("per_layer", "per_map", "absolute")


@dataclass(frozen=True)
class Params:
    # per_layer: one colour scale for all types of an image; per_map: each type's own min..max;
    # absolute: lengths as they are, on 0..1.
    normalization: str = "per_layer"
    # The capsule layer on a grid: "" = the primary capsules.
    layer: str = field(default="", metadata=OMIT_DEFAULT)

    def __post_init__(self):
        check_option("primary_heatmaps", "normalization", self.normalization, NORMALIZATIONS)


def variants(description) -> list[Params]:
    """The primary capsules, then every other capsule layer on a grid (ConvCaps) of more than
    one cell: a 1x1 grid is no map."""
    primary = description.primary_capsules
    return [Params()] + [Params(layer=c.name) for c in description.capsule_layers
                         if c.grid is not None and c.name != primary.name
                         and c.grid[0] * c.grid[1] > 1]


def layer_name(model, params: Params) -> str:
    """The capsule layer a variant shows (`model`: a CapsNet or its ModelDescription)."""
    description = model_description(model)
    grids = [c.name for c in description.capsule_layers if c.grid is not None]
    name = params.layer or description.primary_capsules.name
    check_option("primary_heatmaps", "layer", name, grids)
    return name


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"lengths": (B, grid_h, grid_w, types)} the layer's raw capsule activations on the grid
    (the key keeps its first name: capsule lengths, or logistic activations).

    Capsule i = (row * grid_w + col) * types + type (reportgen.capsnet.layers).
    """
    params = params or Params()
    check_option("primary_heatmaps", "normalization", params.normalization, NORMALIZATIONS)
    name = layer_name(batch.net, params)
    return {"lengths": np.asarray(batch[f"activations:{name}"], np.float32)}


TITLE = "Primary-capsule heatmaps"


def page_layer(params) -> str:
    """Convolutional capsule layers (matrix capsules) have their own layer page."""
    return "convcaps" if params is not None and params.layer else "primary"


def title_for(params) -> str:
    return "ConvCaps heatmaps" if params is not None and params.layer else TITLE


TECHNIQUE = Technique(
    name="primary_heatmaps",
    citations=cite('sabour2017dynamic'),
    title=TITLE,
    layer="primary",
    scope="input",
    needs=frozenset({"activations:<capsules>"}),
    applies_to=frozenset({"capsule_maps", "grid_activations"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.techniques.primary_heatmaps.figures", "render_primary_heatmaps"),
    variants=variants,
    page_layer=page_layer,
    title_for=title_for,
    description="For each primary-capsule type, the grid of capsule activations (how strongly "
                "the type's feature is present at each place: a vector capsule's length) as a "
                "heatmap over the input. Each grid "
                "cell covers the input region it actually sees (its receptive field), not an "
                "even stretch of the grid over the whole image. Matrix capsules show their "
                "logistic activations, for the primary and every convolutional capsule layer, "
                "each placed by its receptive field through every layer before it.",
)
