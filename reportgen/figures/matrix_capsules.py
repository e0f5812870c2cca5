"""Drawings for matrix capsules (Hinton, Sabour & Frosst 2018): each class capsule as its 4x4
pose matrix with its logistic activation."""

from __future__ import annotations

import numpy as np

from reportgen.capsnet.description import COORDINATE_ENTRIES, POSE
from reportgen.figures.colormaps import DIVERGING, apply_diverging, fmt
from reportgen.figures.figure import Figure, RenderContext
from reportgen.figures.panel_kit import (AXIS, HIGHLIGHT, MUTED, class_name, colorbar, columns,
                                         compose, mosaic, png_figure, side_by_side, upscale)

CELL = 14
# The entries coordinate addition adds to: a diverging map of other hues than DIVERGING, so
# their own scale is not read as the other entries'
COORDINATE_COLORMAP = "PRGn"


def is_matrix(ctx: RenderContext) -> bool:
    """Whether the model's class capsules are 4x4 pose matrices (from the description)."""
    description = ctx.description
    classes = None if description is None else description.class_capsules
    return classes is not None and classes.pose == "matrix4x4"


def coordinate_entries(ctx: RenderContext) -> tuple[int, ...]:
    """The flattened pose entries to which the class capsules' votes get their child's scaled
    position added (coordinate addition, Hinton et al. 2018); () without it."""
    classes = None if ctx.description is None else ctx.description.class_capsules
    return COORDINATE_ENTRIES if classes is not None and classes.coordinate_addition else ()


def pose_colours(poses: np.ndarray, coordinates: tuple[int, ...] = ()):
    """(uint8 RGB (K, 16, 3), vmax, coordinate vmax or None) of flattened poses (K, 16): the
    `coordinates` entries on their own symmetric COORDINATE_COLORMAP scale, the others on one
    symmetric DIVERGING scale; each scale's limit is the largest |entry| it shows.

    Coordinate addition puts each child's row and column (in [0, 1]) into two entries of every
    vote, so those two are often an order of magnitude larger than the rest: on a shared scale
    the other 14 entries would all look white."""
    poses = np.asarray(poses, np.float64)
    rest = np.ones(poses.shape[1], bool)
    rest[list(coordinates)] = False
    rgb = np.empty((*poses.shape, 3), np.uint8)
    rgb[:, rest], vmax = apply_diverging(poses[:, rest])
    coordinate_vmax = None
    if coordinates:
        rgb[:, ~rest], coordinate_vmax = apply_diverging(poses[:, ~rest],
                                                         name=COORDINATE_COLORMAP)
    return rgb, vmax, coordinate_vmax


def _frame_entries(tiles: np.ndarray, entries: tuple[int, ...]) -> None:
    """A 1-px dark frame around each of `entries` (flattened 4x4 indices) in every tile."""
    for entry in entries:
        row, col = divmod(entry, 4)
        top, left = row * CELL, col * CELL
        bottom, right = top + CELL, left + CELL
        tiles[:, top, left:right] = AXIS
        tiles[:, bottom - 1, left:right] = AXIS
        tiles[:, top:bottom, left] = AXIS
        tiles[:, top:bottom, right - 1] = AXIS


def render_class_poses(result, params, ctx: RenderContext) -> list[Figure]:
    """One 4x4 tile per class (the pose, row-major), on one diverging scale (the entries of
    coordinate addition framed, on their own scale); the class name and activation a above
    each tile, the predicted (most active) class framed."""
    from reportgen.capsnet import model_words

    description = ctx.description
    by_activation = description is None or model_words.readout(description) == "activation"
    symbol = "a" if by_activation else model_words.score_word(description)
    poses = np.asarray(result["capsules"], dtype=np.float64).reshape(-1, POSE)   # (K, 16)
    activations = np.asarray(result["lengths"], dtype=np.float64).reshape(-1)
    classes = poses.shape[0]
    predicted = int(np.argmax(activations))
    coordinates = coordinate_entries(ctx)
    rgb, vmax, coordinate_vmax = pose_colours(poses, coordinates)
    tiles = np.array(upscale(np.ascontiguousarray(rgb.reshape(classes, 4, 4, 3)), CELL))
    for k in range(classes):                         # thin grid lines between the 16 entries
        for i in range(1, 4):
            tiles[k, i * CELL, :] = 255
            tiles[k, :, i * CELL] = 255
    _frame_entries(tiles, coordinates)
    tiles[predicted, :2, :] = HIGHLIGHT
    tiles[predicted, -2:, :] = HIGHLIGHT
    tiles[predicted, :, :2] = HIGHLIGHT
    tiles[predicted, :, -2:] = HIGHLIGHT
    names = [class_name(ctx, k) for k in range(classes)]
    labels = [[(names[k], HIGHLIGHT if k == predicted else None),
               (f"{symbol} = {activations[k]:.3f}", HIGHLIGHT if k == predicted else MUTED)]
              for k in range(classes)]
    tiled = mosaic(tiles, columns(classes, 10), gutter=8, above=labels)
    width = min(200, tiled.array.shape[1])
    if coordinates:
        bars = side_by_side([
            colorbar(DIVERGING, -vmax, vmax, "the other 14 entries", width=width),
            colorbar(COORDINATE_COLORMAP, -coordinate_vmax, coordinate_vmax,
                      "entries (0,3), (1,3), framed", width=width)])
        bars.align = "center"
        scale = (f"the other 14 entries on one {DIVERGING} scale symmetric around zero, "
                 f"±{fmt(vmax)} = their largest absolute value for this image; entries (0, 3) "
                 f"and (1, 3), framed, on their own {COORDINATE_COLORMAP} scale, "
                 f"±{fmt(coordinate_vmax)}: coordinate addition adds each child's scaled row "
                 f"and column (in [0, 1]) to them in every vote (Hinton et al. 2018), which "
                 f"would set a shared scale and leave the other entries white")
    else:
        bars = colorbar(DIVERGING, -vmax, vmax, "pose entry", width=width)
        scale = (f"{DIVERGING} colours symmetric around zero, scale ±{fmt(vmax)} = the largest "
                 f"absolute entry for this image")
    if by_activation:
        lead, above = "the most active is the prediction", "its logistic activation a"
        framed = f"the most active class, {names[predicted]}, framed"
    else:
        lead = f"the prediction is {model_words.prediction_words(description)}"
        above = (f"its {symbol} (its class score, one of "
                 f"{model_words.score_words(description)})")
        framed = f"the predicted class, {names[predicted]}, framed"
    caption = (f"The 4x4 pose of every class capsule; {lead}. Details: "
               f"Class capsules: the 4x4 pose matrix of each of the {classes} class capsules "
               f"(rows and columns as in the matrix), {scale}; above each, {above}; "
               f"{framed}.")
    return [png_figure("class_capsules.png", compose([tiled, bars]), caption)]
