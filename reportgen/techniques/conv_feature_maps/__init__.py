"""Conv feature maps: the post-ReLU activation of every filter of a conv layer.

Filters whose map is all zero for an image ("dead" for that input) are flagged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import check_conv_layer

# The primary-capsule conv is shown as capsules (primary_heatmaps), not as raw feature maps.
@dataclass(frozen=True)
class Params:
    layer: str = "conv1"


def variants(description) -> list[Params]:
    """One per plain conv layer (every conv layer but the one forming the capsules)."""
    return [Params(layer=c.name) for c in description.plain_conv_layers]


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"maps": (B, h, w, filters), "dead": (B, filters) 1.0 where a filter's map is all zero}."""
    params = params or Params()
    check_conv_layer(batch.net, "conv_feature_maps", params.layer)
    maps = np.asarray(batch[f"conv:{params.layer}"], np.float32)
    dead = np.all(maps == 0.0, axis=(1, 2)).astype(np.float32)
    return {"maps": maps, "dead": dead}


TECHNIQUE = Technique(
    name="conv_feature_maps",
    title="Conv feature maps",
    layer="conv",
    scope="input",
    needs=frozenset({"conv:<layer>"}),
    applies_to=frozenset({"conv"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.techniques.conv_feature_maps.figures", "render_conv_feature_maps"),
    variants=variants,
    description="The activation (after ReLU) of every filter of a convolutional layer for this "
                "input, one small image per filter. Filters whose map is entirely zero are dead "
                "for this input and flagged.",
)
