"""Geometry of matrix capsules on grids (Hinton, Sabour & Frosst 2018), without TensorFlow: what
the EM layers, the probe and the analyses share. The description itself and the parameter count
are the EM family's (reportgen.families.em).

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


def windows_between(layer, after):
    """The kernel windows through which convolutional capsule layer `after` sees `layer`'s
    grid (reportgen.capsnet.em_routing.ConvWindows), or None when `after` is not one."""
    if after.kernel_size is None or layer.grid is None:
        return None
    from reportgen.capsnet.em_routing import ConvWindows

    return ConvWindows(layer.grid, after.kernel_size[0], after.strides[0])
