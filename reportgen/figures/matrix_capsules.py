"""Drawings for matrix capsules (Hinton, Sabour & Frosst 2018): each class capsule as its 4x4
pose matrix with its logistic activation."""

from __future__ import annotations

import numpy as np

from reportgen.figures.colormaps import DIVERGING, apply_diverging, fmt
from reportgen.figures.figure import Figure, RenderContext
from reportgen.figures.panels import (HIGHLIGHT, MUTED, _class_name, _colorbar, _columns,
                                      _compose, _mosaic, _png_figure, _upscale)

CELL = 14


def is_matrix(ctx: RenderContext) -> bool:
    """Whether the model's class capsules are 4x4 pose matrices (from the description)."""
    description = ctx.description
    classes = None if description is None else description.class_capsules
    return classes is not None and classes.pose == "matrix4x4"


def render_class_poses(result, params, ctx: RenderContext) -> list[Figure]:
    """One 4x4 tile per class (the pose, row-major), on one diverging scale; the class name and
    activation a above each tile, the predicted (most active) class framed."""
    poses = np.asarray(result["capsules"], dtype=np.float64)               # (K, 16)
    activations = np.asarray(result["lengths"], dtype=np.float64).reshape(-1)
    classes = poses.shape[0]
    predicted = int(np.argmax(activations))
    rgb, vmax = apply_diverging(poses.reshape(classes, 4, 4))              # (K, 4, 4, 3)
    tiles = np.array(_upscale(np.ascontiguousarray(rgb), CELL))
    for k in range(classes):                         # thin grid lines between the 16 entries
        for i in range(1, 4):
            tiles[k, i * CELL, :] = 255
            tiles[k, :, i * CELL] = 255
    tiles[predicted, :2, :] = HIGHLIGHT
    tiles[predicted, -2:, :] = HIGHLIGHT
    tiles[predicted, :, :2] = HIGHLIGHT
    tiles[predicted, :, -2:] = HIGHLIGHT
    names = [_class_name(ctx, k) for k in range(classes)]
    labels = [[(names[k], HIGHLIGHT if k == predicted else None),
               (f"a = {activations[k]:.3f}", HIGHLIGHT if k == predicted else MUTED)]
              for k in range(classes)]
    mosaic = _mosaic(tiles, _columns(classes, 10), gutter=8, above=labels)
    blocks = [mosaic, _colorbar(DIVERGING, -vmax, vmax, "pose entry",
                                width=min(200, mosaic.array.shape[1]))]
    caption = (f"The 4x4 pose of every class capsule; the most active is the prediction. Details: "
               f"Class capsules: the 4x4 pose matrix of each of the {classes} class capsules "
               f"(rows and columns as in the matrix), {DIVERGING} colours symmetric around zero, "
               f"scale ±{fmt(vmax)} = the largest absolute entry for this image; above each, "
               f"its logistic activation a; the most active class, {names[predicted]}, framed.")
    return [_png_figure("class_capsules.png", _compose(blocks), caption)]

