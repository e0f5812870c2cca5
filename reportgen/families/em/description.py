"""Geometry of matrix capsules on grids (Hinton, Sabour & Frosst 2018), without TensorFlow: the
coordinate addition of the class capsules (reportgen.families.em.layers). The description itself
and the parameter count are the EM family's declaration (reportgen.families.em); the kernel
windows of a ConvCaps layer are shared (reportgen.capsnet.conv_windows).

Every grid layer's receptive field is the previous one's through its kernel and stride, so the
ConvCaps grids are placed on the input like any conv grid.
"""

from __future__ import annotations

from reportgen.capsnet.description import CapsuleLayer, ModelDescription


def coordinates(description: ModelDescription, layer: CapsuleLayer) -> tuple[tuple, tuple]:
    """Coordinate addition (Hinton et al. 2018): the (row, column) of the centre of each grid
    cell's receptive field, scaled to [0, 1] by the input's height and width (minus one)."""
    height, width = description.input_shape[:2]
    rows = tuple(layer.receptive_field.centre(r, 0)[0] / max(height - 1, 1)
                 for r in range(layer.grid[0]))
    cols = tuple(layer.receptive_field.centre(0, c)[1] / max(width - 1, 1)
                 for c in range(layer.grid[1]))
    return rows, cols
