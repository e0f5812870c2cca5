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


def parents_per_child(description, name: str):
    """(children,) how many parents each capsule of routed layer `name` can route to: every
    class for the class capsules; for a convolutional capsule layer, the output types of every
    position whose kernel covers the child (0 for an edge no window reaches). Children are
    numbered (row * W + column) * types + type. A kernel over a zero-padded grid (Self-Routing)
    is told by the receptive fields: the layer's starts `pad` cells of the grid before it
    earlier. NumPy only."""
    import numpy as np

    layers = description.capsule_layers
    index = [c.name for c in layers].index(name)
    layer, after = layers[index], layers[index + 1]
    if after.kernel_size is None:
        return np.full(layer.capsules, after.types, np.int64)
    counts = []
    for axis, (size, kernel, stride) in enumerate(zip(layer.grid, after.kernel_size,
                                                      after.strides)):
        pad = (layer.receptive_field.start[axis] - after.receptive_field.start[axis]) \
            // layer.receptive_field.stride[axis]
        parents = after.grid[axis]
        counts.append(np.array([sum(1 for p in range(parents)
                                    if 0 <= y + pad - p * stride < kernel)
                                for y in range(size)]))
    per_position = counts[0][:, None] * counts[1][None, :] * after.types
    return np.repeat(per_position.reshape(-1), layer.types).astype(np.int64)
