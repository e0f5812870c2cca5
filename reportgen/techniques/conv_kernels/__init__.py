"""Conv kernels: the learned filters of a conv layer at one training step (per checkpoint)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import check_conv_layer

@dataclass(frozen=True)
class Params:
    layer: str = "conv1"


def variants(description) -> list[Params]:
    """One per plain conv layer (every conv layer but the one forming the capsules)."""
    return [Params(layer=c.name) for c in description.plain_conv_layers]


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"kernels": (k, k, in_channels, filters)} the layer's weights (no batch axis)."""
    params = params or Params()
    net = batch.net
    check_conv_layer(net, "conv_kernels", params.layer)
    kernel = net.model.get_layer(params.layer).kernel
    return {"kernels": np.array(kernel.numpy(), dtype=np.float32)}


TECHNIQUE = Technique(
    name="conv_kernels",
    title="Conv kernels",
    layer="conv",
    scope="checkpoint",
    needs=frozenset(),
    applies_to=frozenset({"conv"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.techniques.conv_kernels.figures", "render_conv_kernels"),
    variants=variants,
    description="The weights of every filter of a convolutional layer at this training step; "
                "they do not depend on the input.",
)
