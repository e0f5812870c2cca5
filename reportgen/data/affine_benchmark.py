"""The data of Gu 2022's affine benchmark (Ch.5; after Sabour et al. 2017's affNIST test), built
offline from any 28x28 grayscale dataset.

- "expanded" (`mnist40`, `fashion_mnist40`): every 28x28 image, train and test, placed at a
  seeded random position on a 40x40 black canvas (offsets 0 … 12 per axis, uniform); nothing
  else changes. The models are trained on it.
- "affNIST-like" (`affnist_like`, `fashion_affnist_like`): the training split as "expanded";
  the test split is the test images padded by 6 to 40x40 (centred) and then transformed by a
  seeded random affine map, per image independently and uniformly within the affNIST ranges:
  rotation within ±20°, shear within ±45° (x' = x + tan(angle) y), scale 0.8 … 1.2 per axis,
  translation within ±8 px per axis. affNIST itself (Tieleman 2013) cannot be fetched here.

The forward map of a source point p (x right, y down; origin the canvas centre) is
    p_out = R(rotation) Shear(tan(shear)) diag(scale_x, scale_y) p + (tx, ty)
resampled bilinearly with zero fill by reportgen.probe.affine.resample, a batch at a time.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from reportgen.errors import ReportgenError
from reportgen.data.warp import resample

CANVAS = 40
SOURCE = 28
# The affNIST ranges: degrees, degrees (shear angle), factor per axis, pixels per axis.
ROTATION = 20.0
SHEAR = 45.0
SCALE = (0.8, 1.2)
TRANSLATION = 8.0
CHUNK = 2000             # images per resampling call (bounds its float64 temporaries)


@dataclass(frozen=True)
class Derived:
    base: str             # the 28x28 dataset it is built from
    kind: str             # "expanded" or "affine"


DERIVED = {
    "mnist40": Derived("mnist", "expanded"),
    "fashion_mnist40": Derived("fashion_mnist", "expanded"),
    "affnist_like": Derived("mnist", "affine"),
    "fashion_affnist_like": Derived("fashion_mnist", "affine"),
}
BASE_OF_EXPANDED = {d.base: name for name, d in DERIVED.items() if d.kind == "expanded"}
BASE_OF_AFFINE = {d.base: name for name, d in DERIVED.items() if d.kind == "affine"}


def expand(images: np.ndarray, rng: np.random.Generator, canvas: int = CANVAS):
    """(images on the canvas (N, canvas, canvas, C), offsets (N, 2) as (row, col)): each image
    at a uniformly random integer offset, in one vectorised scatter."""
    images = np.asarray(images, np.float32)
    n, h, w, c = images.shape
    offsets = np.stack([rng.integers(0, canvas - h + 1, n), rng.integers(0, canvas - w + 1, n)],
                       -1)
    return place(images, offsets, canvas), offsets


def place(images: np.ndarray, offsets: np.ndarray, canvas: int) -> np.ndarray:
    """(N, canvas, canvas, C): image i with its top-left pixel at offsets[i] = (row, col) on a
    black canvas, in one vectorised scatter (every offset must keep the image whole)."""
    images = np.asarray(images, np.float32)
    n, h, w, c = images.shape
    out = np.zeros((n, canvas, canvas, c), np.float32)
    rows = offsets[:, 0, None] + np.arange(h)                        # (N, h)
    cols = offsets[:, 1, None] + np.arange(w)                        # (N, w)
    out[np.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]] = images
    return out


def pad_centred(images: np.ndarray, canvas: int = CANVAS) -> np.ndarray:
    """(N, canvas, canvas, C): the images in the middle of a black canvas (28 -> 40: 6 a side)."""
    images = np.asarray(images, np.float32)
    n, h, w, c = images.shape
    top, left = (canvas - h) // 2, (canvas - w) // 2
    out = np.zeros((n, canvas, canvas, c), np.float32)
    out[:, top:top + h, left:left + w] = images
    return out


def sample_affine(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """n draws of the affNIST parameters, each uniform in its range (degrees, factors, px)."""
    return {"rotation": rng.uniform(-ROTATION, ROTATION, n),
            "shear": rng.uniform(-SHEAR, SHEAR, n),
            "scale_x": rng.uniform(*SCALE, n), "scale_y": rng.uniform(*SCALE, n),
            "tx": rng.uniform(-TRANSLATION, TRANSLATION, n),
            "ty": rng.uniform(-TRANSLATION, TRANSLATION, n)}


def affine_maps(parameters: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(n, 2, 2) forward matrices acting on (x, y) and (n, 2) translations of `parameters`."""
    theta = np.deg2rad(np.asarray(parameters["rotation"], np.float64))
    shear = np.tan(np.deg2rad(np.asarray(parameters["shear"], np.float64)))
    n = len(theta)
    cos, sin = np.cos(theta), np.sin(theta)
    # Counter-clockwise on screen (y points down), as reportgen.probe.affine.
    rotation = np.stack([np.stack([cos, sin], -1), np.stack([-sin, cos], -1)], -2)
    shearing = np.stack([np.stack([np.ones(n), shear], -1),
                         np.stack([np.zeros(n), np.ones(n)], -1)], -2)
    scaling = np.zeros((n, 2, 2))
    scaling[:, 0, 0] = parameters["scale_x"]
    scaling[:, 1, 1] = parameters["scale_y"]
    translations = np.stack([parameters["tx"], parameters["ty"]], -1).astype(np.float64)
    return rotation @ shearing @ scaling, translations


def affnist_like(images: np.ndarray, rng: np.random.Generator, canvas: int = CANVAS):
    """(transformed images (N, canvas, canvas, C), parameters): pad, then one random affine map
    per image (see the module docstring), resampled CHUNK images at a time."""
    padded = pad_centred(images, canvas)
    parameters = sample_affine(len(padded), rng)
    matrices, translations = affine_maps(parameters)
    out = np.zeros_like(padded)
    for start in range(0, len(padded), CHUNK):
        part = slice(start, start + CHUNK)
        out[part] = resample(padded[part], matrices[part], translations[part])
    return np.clip(out, 0.0, 1.0), parameters


def derive(name: str, base, seed: int):
    """The dataset `name` (a DERIVED key) built from `base` (a reportgen.data.datasets.Dataset
    of 28x28 grayscale images), with seeds derived from `seed`. Cached per (name, seed, base)."""
    return _derive(name, int(seed), base)


@functools.lru_cache(maxsize=4)
def _derive(name: str, seed: int, base):
    spec = DERIVED[name]
    if tuple(base.x_train.shape[1:]) != (SOURCE, SOURCE, 1):
        raise ReportgenError(f"Dataset '{name}' is built from 28x28 grayscale images.",
                             expected=f"'{spec.base}' with images of shape (28, 28, 1)",
                             received=f"{tuple(base.x_train.shape[1:])}")
    x_train, _ = expand(base.x_train, np.random.default_rng([seed, 40, 1]))
    if spec.kind == "expanded":
        x_test, _ = expand(base.x_test, np.random.default_rng([seed, 40, 2]))
        how = (f"each image at a random position on a 40x40 canvas (seed {seed}); "
               f"from {base.source}")
    else:
        x_test, _ = affnist_like(base.x_test, np.random.default_rng([seed, 40, 3]))
        how = (f"train: each image at a random position on a 40x40 canvas; test: padded to "
               f"40x40, then rotation within ±{ROTATION:g}°, shear within ±{SHEAR:g}°, scale "
               f"{SCALE[0]:g}–{SCALE[1]:g} per axis, translation within ±{TRANSLATION:g} px "
               f"(affNIST-like, seed {seed}); from {base.source}")
    for array in (x_train, x_test):
        array.setflags(write=False)
    return dataclasses.replace(base, name=name, x_train=x_train, x_test=x_test, source=how)
