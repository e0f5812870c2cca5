"""Primary-capsule heatmaps: per capsule type, the grid of primary-capsule lengths.

The arrays hold raw lengths; the normalisation option (per layer, per map, absolute) is applied
when drawing, and each grid cell is placed over the input region it sees (receptive field).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import check_option

NORMALIZATIONS = ("per_layer", "per_map", "absolute")


@dataclass(frozen=True)
class Params:
    # per_layer: one colour scale for all types of an image; per_map: each type's own min..max;
    # absolute: lengths as they are, on 0..1.
    normalization: str = "per_layer"

    def __post_init__(self):
        check_option("primary_heatmaps", "normalization", self.normalization, NORMALIZATIONS)


def variants(description) -> list[Params]:
    return [Params()]


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"lengths": (B, grid_h, grid_w, types)} raw primary-capsule lengths on the grid.

    Capsule i = (row * grid_w + col) * types + type (reportgen.capsnet.layers).
    """
    params = params or Params()
    check_option("primary_heatmaps", "normalization", params.normalization, NORMALIZATIONS)
    return {"lengths": np.asarray(batch["primary_lengths"], np.float32)}


TECHNIQUE = Technique(
    name="primary_heatmaps",
    title="Primary-capsule heatmaps",
    layer="primary",
    scope="input",
    needs=frozenset({"primary_lengths"}),
    applies_to=frozenset({"primary_capsules", "vector_capsules"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.figures.panels", "render_primary_heatmaps"),
    variants=variants,
    description="For each primary-capsule type, the grid of capsule lengths (how strongly the "
                "type's feature is present at each place) as a heatmap over the input. Each grid "
                "cell covers the input region it actually sees (its receptive field), not an "
                "even stretch of the grid over the whole image.",
)
