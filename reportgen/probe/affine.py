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

from reportgen.data.warp import resample


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
