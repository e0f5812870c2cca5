"""How the draw panel turns a drawing into the network's input, in NumPy: the reference the
page's JavaScript (templates/assets/draw-panel.js, `centreInk`) mirrors step for step, so a test
can hold the two equal on the same ink.

MNIST's own normalisation of a handwritten digit (LeCun et al. 1998, "Gradient-based learning
applied to document recognition", Sec. III-A): the digit's bounding box is scaled, keeping its
aspect ratio, to fit a `box` x `box` field (20 x 20 for 28 x 28 inputs), the grey levels
coming from the area covered (anti-aliasing), and the field is placed in the input so that its
centre of mass lies at the input's centre. Ink is light-on-dark in [0, 1], as the digits the
model was trained on.
"""

from __future__ import annotations

import math

import numpy as np


def box_size(size: int) -> int:
    """The digit's field: 20 pixels of 28, in proportion for other input sizes."""
    return max(1, int(math.floor(size * 20 / 28 + 0.5)))


def area_weights(start: float, length: float, cells: int, pixels: int) -> np.ndarray:
    """(cells, pixels): how much of source pixel p (covering [p, p+1)) falls in output cell i,
    the cells dividing [start, start + length) evenly, as a fraction of a cell's width."""
    edges = start + length * np.arange(cells + 1) / cells
    low = np.maximum(edges[:-1, None], np.arange(pixels)[None, :])
    high = np.minimum(edges[1:, None], np.arange(pixels)[None, :] + 1.0)
    return np.clip(high - low, 0.0, None) * (cells / length)


def centre_drawing(ink: np.ndarray, size: int = 28) -> np.ndarray:
    """(size, size) float32 input from (H, W) ink in [0, 1]; all zeros when nothing is drawn."""
    ink = np.asarray(ink, np.float64)
    rows = np.flatnonzero(ink.max(axis=1) > 0)
    cols = np.flatnonzero(ink.max(axis=0) > 0)
    out = np.zeros((size, size), np.float64)
    if rows.size == 0:
        return out.astype(np.float32)
    top, bottom, left, right = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
    side = float(max(bottom - top, right - left))
    box = box_size(size)
    # the square of the longer side, centred on the bounding box (the aspect ratio is kept)
    y0 = (top + bottom) / 2 - side / 2
    x0 = (left + right) / 2 - side / 2
    # each cell: the mean of the ink it covers (pixels outside the drawing count as 0)
    field = (area_weights(y0, side, box, ink.shape[0]) @ ink
             @ area_weights(x0, side, box, ink.shape[1]).T)
    mass = field.sum()
    cy = (field.sum(axis=1) @ np.arange(box)) / mass
    cx = (field.sum(axis=0) @ np.arange(box)) / mass
    oy = int(min(max(math.floor((size - 1) / 2 - cy + 0.5), 0), size - box))
    ox = int(min(max(math.floor((size - 1) / 2 - cx + 0.5), 0), size - box))
    out[oy:oy + box, ox:ox + box] = field
    return np.clip(out, 0.0, 1.0).astype(np.float32)
