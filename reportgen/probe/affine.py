"""Batched affine transforms of images, in plain NumPy.

One inverse-mapping bilinear resampling for a whole batch: every output pixel is mapped back
into its source image and interpolated from the four nearest pixels; samples outside the image
read 0 (zero fill, per neighbour, as TensorFlow's ImageProjectiveTransformV3 with
fill_mode="constant"). Chosen over keras.ops.image.affine_transform so that the analyses that
share it (affine_robustness, capsule_semantics) need no TensorFlow for their inputs, every image
of a batch may have its own parameters, and the test against Pillow is direct.

Coordinates: x = column, y = row (pointing down); the origin is the image centre
((W-1)/2, (H-1)/2) in pixel-index units, i.e. Pillow's (W/2, H/2) in its continuous coordinates.
The forward map of a source point p to its place in the output is

    p_out = R(rotation) @ Shear(shear_x, shear_y) @ (scale * (p - centre)) + centre + (tx, ty)

with R rotating counter-clockwise on screen (as Pillow's Image.rotate) and
Shear = [[1, shear_x], [shear_y, 1]] (x' = x + shear_x * y). Positive tx moves the content right,
positive ty moves it down; scale > 1 enlarges it. The identity reproduces the input exactly.
"""

from __future__ import annotations

import numpy as np


def affine_matrices(n: int, rotation_deg=0.0, tx=0.0, ty=0.0, scale=1.0, shear_x=0.0,
                    shear_y=0.0) -> tuple[np.ndarray, np.ndarray]:
    """(n, 2, 2) forward matrices A and (n, 2) translations t of `affine_batch` (float64).

    Every parameter is a scalar or an array of n values (one per image).
    """
    def per_image(value, name):
        arr = np.broadcast_to(np.asarray(value, np.float64), (n,)) if np.ndim(value) <= 1 \
            else None
        if arr is None or not np.all(np.isfinite(arr)):
            raise ValueError(f"affine_batch: '{name}' must be a finite scalar or one value per "
                             f"image ({n}). Received: {value!r}")
        return arr

    theta = np.deg2rad(per_image(rotation_deg, "rotation_deg"))
    s = per_image(scale, "scale")
    shx, shy = per_image(shear_x, "shear_x"), per_image(shear_y, "shear_y")
    cos, sin = np.cos(theta), np.sin(theta)
    rotation = np.stack([np.stack([cos, sin], -1), np.stack([-sin, cos], -1)], -2)
    shear = np.stack([np.stack([np.ones(n), shx], -1), np.stack([shy, np.ones(n)], -1)], -2)
    matrices = rotation @ shear * s[:, None, None]
    translations = np.stack([per_image(tx, "tx"), per_image(ty, "ty")], -1)
    return matrices, translations


def affine_batch(images: np.ndarray, rotation_deg=0.0, tx=0.0, ty=0.0, scale=1.0, shear_x=0.0,
                 shear_y=0.0) -> np.ndarray:
    """Affine-transformed copies of `images` (B, H, W, C), float32, bilinear, zero fill.

    Each parameter is a scalar (the same for every image) or an array of B values. Angles in
    degrees (counter-clockwise), translations in pixels; see the module docstring for the
    convention.
    """
    images = np.asarray(images)
    if images.ndim != 4:
        raise ValueError(f"affine_batch expects images (B, H, W, C). Received shape "
                         f"{images.shape}")
    matrices, translations = affine_matrices(len(images), rotation_deg, tx, ty, scale, shear_x,
                                             shear_y)
    return resample(images, matrices, translations)


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


# The one-parameter families the analyses sweep: factor name -> affine_batch keyword, the
# parameter's identity value, and an axis label.
FACTORS = {
    "rotation": ("rotation_deg", 0.0, "rotation (degrees, counter-clockwise)"),
    "translation_x": ("tx", 0.0, "x-translation (pixels, right)"),
    "translation_y": ("ty", 0.0, "y-translation (pixels, down)"),
    "scale": ("scale", 1.0, "scale (factor)"),
    "shear_x": ("shear_x", 0.0, "x-shear (x' = x + s·y)"),
    "shear_y": ("shear_y", 0.0, "y-shear (y' = y + s·x)"),
}


def factor_batch(images: np.ndarray, factor: str, values) -> np.ndarray:
    """`affine_batch` with one factor (a FACTORS key) set per image to `values` (scalar or B)."""
    if factor not in FACTORS:
        raise ValueError(f"Unknown affine factor {factor!r}. Use one of {list(FACTORS)}")
    return affine_batch(images, **{FACTORS[factor][0]: values})
