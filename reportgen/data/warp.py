"""Bilinear resampling of a batch of images under one affine map each, in plain NumPy: the
warp that reportgen.probe.affine's sweeps and the affNIST-like test set
(reportgen.data.affine_benchmark) share.

Coordinates: x = column, y = row (pointing down); the origin is the image centre
((W-1)/2, (H-1)/2) in pixel-index units. Every output pixel is mapped back into its source
image and interpolated from the four nearest pixels; samples outside the image read 0 (zero
fill, per neighbour, as TensorFlow's ImageProjectiveTransformV3 with fill_mode="constant").
"""

from __future__ import annotations

import numpy as np


def resample(images: np.ndarray, matrices: np.ndarray, translations: np.ndarray) -> np.ndarray:
    """`images` (B, H, W, C) under the forward maps p_out = A (p - centre) + centre + t, one
    (2, 2) matrix A (acting on (x, y)) and translation t per image: bilinear, zero fill."""
    images = np.asarray(images)
    b, h, w, c = images.shape
    matrices = np.asarray(matrices, np.float64)
    translations = np.asarray(translations, np.float64)
    det = matrices[:, 0, 0] * matrices[:, 1, 1] - matrices[:, 0, 1] * matrices[:, 1, 0]
    if np.any(np.abs(det) < 1e-12):
        raise ValueError("affine_batch: the transform is singular (scale 0 or "
                         "shear_x * shear_y = 1).")
    inverse = np.stack([np.stack([matrices[:, 1, 1], -matrices[:, 0, 1]], -1),
                        np.stack([-matrices[:, 1, 0], matrices[:, 0, 0]], -1)], -2) \
        / det[:, None, None]
    centre = np.array([(w - 1) / 2.0, (h - 1) / 2.0])
    ys, xs = np.mgrid[0:h, 0:w]
    grid = np.stack([xs.ravel(), ys.ravel()], -1).astype(np.float64)        # (HW, 2) as (x, y)
    # Source point of every output pixel: A^-1 (p_out - centre - t) + centre.
    shift = centre - np.einsum("bij,bj->bi", inverse, centre + translations)  # (B, 2)
    x = grid[:, 0] * inverse[:, None, 0, 0] + grid[:, 1] * inverse[:, None, 0, 1] \
        + shift[:, None, 0]                                                  # (B, HW)
    y = grid[:, 0] * inverse[:, None, 1, 0] + grid[:, 1] * inverse[:, None, 1, 1] \
        + shift[:, None, 1]
    x0, y0 = np.floor(x), np.floor(y)
    fx, fy = (x - x0).astype(np.float32), (y - y0).astype(np.float32)
    # Zero fill without masks: a 2-pixel zero border and corners clipped into it, so every
    # neighbour outside the image reads 0 (a corner left of -2 has both neighbours in it).
    pad = 2
    wp = w + 2 * pad
    x0 = np.clip(x0, -pad, w).astype(np.int64) + pad
    y0 = np.clip(y0, -pad, h).astype(np.int64) + pad
    padded = np.zeros((b, h + 2 * pad, wp, c), np.float32)
    padded[:, pad:pad + h, pad:pad + w] = images
    flat = padded.reshape(-1, c) if c > 1 else padded.reshape(-1)
    top_left = (np.arange(b) * ((h + 2 * pad) * wp))[:, None] + y0 * wp + x0   # (B, HW)
    if c > 1:
        fx, fy = fx[..., None], fy[..., None]
    top = flat[top_left] * (1 - fx) + flat[top_left + 1] * fx
    bottom = flat[top_left + wp] * (1 - fx) + flat[top_left + wp + 1] * fx
    out = top * (1 - fy) + bottom * fy
    return out.reshape(b, h, w, c).astype(np.float32)
