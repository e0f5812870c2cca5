"""MultiMNIST (Sabour, Frosst & Hinton 2017, section 6): two overlapping digits of different
classes on a 36x36 canvas, built offline from the 28x28 MNIST digits reportgen already loads.

As the paper's generator: each digit padded by 4 px to 36x36 and shifted by an integer in
-4 … 4 px per axis (uniform, independently for each digit and axis), added to a digit of a
*different* class from the same split, shifted independently, and clipped: min(1, a + b) (up to
0.5 apart from the pixel-wise maximum where strokes cross). Labels are the two classes, (N, 2),
the first digit's class first.

Sabour et al. made 1,000 images per MNIST digit (60M train / 10M test). Here the training split
holds `pairs_per_digit` rounds (`multimnist:K`, K from 1 to 1,000; `multimnist` is 10): in each
round every training digit is the first digit of one image, in a shuffled order, its partner
drawn uniformly among the digits of the other classes. The test split is always 10 rounds of the
test digits (10,000 images from the 1,000 bundled test digits), whatever K: the same held-out
pairs for every model. Round r is drawn from its own seed, so a split of K rounds starts with
those of fewer, and nothing is held in memory but the 28x28 digits: images, labels and each
image's two shifted digits (`Dataset.components(split, indices)`, the decoder's reconstruction
targets and the segmentation score's references) are rendered from the round's recipe when
training or an analysis asks for them.
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
PAIRS_PER_DIGIT = 10          # `multimnist`: rounds of the training split
MAX_PAIRS_PER_DIGIT = 1000    # Sabour et al.'s
TEST_PAIRS_PER_DIGIT = 10     # the held-out pairs, the same for every K
ROUNDS_KEPT = 32              # recipes of rounds kept in memory (each: N pairs, 48 bytes a pair)
_SPLITS = {"train": 1, "test": 2}


def parse_name(spec: str) -> int | None:
    """Pairs per digit of a data set name: 10 for "multimnist", K for "multimnist:K"; None for
    any other name. A K that is no whole number from 1 to 1,000 is refused in one line."""
    text = str(spec).strip().lower().replace("-", "_")
    name, colon, count = text.partition(":")
    if name != NAME:
        return None
    if not colon:
        return PAIRS_PER_DIGIT
    if not count.isdigit() or not 1 <= int(count) <= MAX_PAIRS_PER_DIGIT:
        raise ReportgenError(f"Data set {spec!r}: pairs per digit must be a whole number from 1 "
                             f"to {MAX_PAIRS_PER_DIGIT:,}.",
                             expected=f"multimnist (10 pairs per digit) or multimnist:K, "
                                      f"1 <= K <= {MAX_PAIRS_PER_DIGIT:,} (Sabour et al.: 1,000)",
                             received=repr(spec), fix="e.g. --data multimnist:1000")
    return int(count)


@dataclass(frozen=True, eq=False)
class Pairs:
    """The recipe of some images: which two digits make each and how each is shifted."""

    digits: np.ndarray        # (N, 2) int64 indices into the split's 28x28 digits
    shifts: np.ndarray        # (N, 2, 2) int64 (row, col) shift of each digit, -SHIFT … SHIFT

    def __len__(self) -> int:
        return len(self.digits)


def plan_round(labels: np.ndarray, rng: np.random.Generator) -> Pairs:
    """One round: every digit first once, in a random order; each partner uniform among the
    digits of the other classes (redrawn, all clashes at once, until none is left)."""
    labels = np.asarray(labels).reshape(-1)
    if len(np.unique(labels)) < 2:
        raise ReportgenError("MultiMNIST needs digits of at least two classes in each split.",
                             expected="labels of two or more classes",
                             received=f"{len(labels)} digits of classes {np.unique(labels).tolist()}")
    n = len(labels)
    first = rng.permutation(n)
    second = rng.integers(0, n, n)
    clash = np.flatnonzero(labels[second] == labels[first])
    while len(clash):
        second[clash] = rng.integers(0, n, len(clash))
        clash = clash[labels[second[clash]] == labels[first[clash]]]
    shifts = rng.integers(-SHIFT, SHIFT + 1, (n, 2, 2))
    return Pairs(digits=np.stack([first, second], -1).astype(np.int64),
                 shifts=shifts.astype(np.int64))


def render_sources(digits: np.ndarray, pairs: Pairs) -> np.ndarray:
    """(n, 2, 36, 36, C): the two digits of each pair, each padded and shifted alone."""
    digits = np.asarray(digits, np.float32)
    n, c = len(pairs), digits.shape[-1]
    pad = (CANVAS - SOURCE) // 2
    flat = digits[pairs.digits.reshape(-1)]                          # (2n, 28, 28, C)
    offsets = pairs.shifts.reshape(-1, 2) + pad                      # top-left corners, 0 … 8
    return place(flat, offsets, CANVAS).reshape(n, 2, CANVAS, CANVAS, c)


def overlay(sources: np.ndarray) -> np.ndarray:
    """(n, 36, 36, C): Sabour et al.'s image of two digits, min(1, a + b), from (n, 2, ...)."""
    return np.minimum(np.float32(1.0), sources[:, 0] + sources[:, 1])


@dataclass(frozen=True, eq=False)
class PairSplit:
    """One split's images as rounds of pairs over its 28x28 digits: image k is pair k % N of
    round k // N (N digits). Recipes are drawn per round from (seed, split, round)."""

    digits: np.ndarray        # (N, 28, 28, C), the base split's
    labels: np.ndarray        # (N,)
    rounds: int
    seed: int
    split: int                # 1 train, 2 test: the splits' seeds differ

    def __len__(self) -> int:
        return len(self.labels) * self.rounds

    @property
    def round_size(self) -> int:
        return len(self.labels)

    def round(self, r: int) -> Pairs:
        return _round(self, int(r))

    def pairs(self, indices: np.ndarray) -> Pairs:
        """The recipes of images `indices` (any order), each round drawn once."""
        indices = np.asarray(indices, np.int64).reshape(-1)
        if len(indices) and (indices.min() < 0 or indices.max() >= len(self)):
            raise IndexError(f"MultiMNIST image index out of range 0 … {len(self) - 1}")
        rounds, positions = np.divmod(indices, self.round_size)
        digits = np.empty((len(indices), 2), np.int64)
        shifts = np.empty((len(indices), 2, 2), np.int64)
        for r in np.unique(rounds):
            at = rounds == r
            plan = self.round(r)
            digits[at], shifts[at] = plan.digits[positions[at]], plan.shifts[positions[at]]
        return Pairs(digits=digits, shifts=shifts)

    def sources(self, indices) -> np.ndarray:
        return render_sources(self.digits, self.pairs(indices))

    def images(self, indices) -> np.ndarray:
        return overlay(self.sources(indices))

    def pair_labels(self, indices) -> np.ndarray:
        return np.asarray(self.labels, np.int64)[self.pairs(indices).digits]


@functools.lru_cache(maxsize=ROUNDS_KEPT)
def _round(split: PairSplit, r: int) -> Pairs:
    if not 0 <= r < split.rounds:
        raise IndexError(f"round {r} of {split.rounds}")
    return plan_round(split.labels, np.random.default_rng([split.seed, 36, split.split, r]))


class PairArray:
    """A split's images (n, 36, 36, C) float32 or labels (n, 2) int64, rendered on demand and
    indexed like a read-only NumPy array (an int, a slice or an index array). `subset(indices)`
    is a view of some of them; `np.asarray` renders them all (for small splits only)."""

    def __init__(self, split: PairSplit, kind: str, chosen: np.ndarray | None = None):
        self.split, self.kind, self.chosen = split, kind, chosen
        n = len(split) if chosen is None else len(chosen)
        if kind == "images":
            self.shape = (n, CANVAS, CANVAS, split.digits.shape[-1])
            self.dtype = np.dtype(np.float32)
        else:
            self.shape, self.dtype = (n, 2), np.dtype(np.int64)
        # images per round, for reading in round order (None for a subset)
        self.block = split.round_size if chosen is None else None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def _global(self, indices: np.ndarray) -> np.ndarray:
        return indices if self.chosen is None else self.chosen[indices]

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            index = int(key) + (len(self) if key < 0 else 0)
            if not 0 <= index < len(self):
                raise IndexError(f"index {key} out of range for {len(self)} MultiMNIST images")
            return self[np.array([index])][0]
        if isinstance(key, slice):
            indices = np.arange(len(self))[key]
        else:
            indices = np.asarray(key, np.int64).reshape(-1)
            if len(indices) and (indices.min() < -len(self) or indices.max() >= len(self)):
                raise IndexError(f"index out of range for {len(self)} MultiMNIST images")
            indices = np.where(indices < 0, indices + len(self), indices)
        chosen = self._global(indices)
        if self.kind == "images":
            return self.split.images(chosen)
        return self.split.pair_labels(chosen)

    def subset(self, indices) -> "PairArray":
        return PairArray(self.split, self.kind,
                         self._global(np.asarray(indices, np.int64).reshape(-1)))

    def __array__(self, dtype=None, copy=None):
        whole = self[:]
        return whole if dtype is None else whole.astype(dtype)


def take(array, indices):
    """`array[indices]` as a view for rendered data (PairArray.subset), a copy otherwise."""
    return array.subset(indices) if isinstance(array, PairArray) else array[indices]


@dataclass(frozen=True, eq=False)
class Recipe:
    """Both splits' pairs. A MultiMNIST Dataset holds it as `components`."""

    train: PairSplit
    test: PairSplit

    def __call__(self, split: str, indices=None) -> np.ndarray:
        """(n, 2, 36, 36, 1): each image's two digits, alone, where they lie in the image
        (the first label's digit first). `split` is "train" or "test"; `indices` picks
        images (all when None)."""
        if split not in _SPLITS:
            raise ReportgenError(f"Unknown MultiMNIST split {split!r}.",
                                 expected="'train' or 'test'", received=repr(split))
        pairs = self.train if split == "train" else self.test
        return pairs.sources(np.arange(len(pairs)) if indices is None else indices)


def derive(base, seed: int, pairs_per_digit: int = PAIRS_PER_DIGIT):
    """The MultiMNIST Dataset built from `base` (a reportgen.data.datasets.Dataset of 28x28
    grayscale digits, e.g. load_dataset("mnist")), with seeds derived from `seed`:
    `pairs_per_digit` rounds of training pairs, TEST_PAIRS_PER_DIGIT of test pairs. Its arrays
    render on demand (PairArray); its `components` renders each image's two digits. Cached."""
    return _derive(int(seed), base, int(pairs_per_digit))


@functools.lru_cache(maxsize=4)
def _derive(seed: int, base, per_digit: int):
    if tuple(base.x_train.shape[1:]) != (SOURCE, SOURCE, 1):
        raise ReportgenError(f"Dataset '{NAME}' is built from 28x28 grayscale digits.",
                             expected=f"'{BASE}' with images of shape (28, 28, 1)",
                             received=f"{tuple(base.x_train.shape[1:])}")
    train = PairSplit(base.x_train, np.asarray(base.y_train), per_digit, seed, _SPLITS["train"])
    test = PairSplit(base.x_test, np.asarray(base.y_test), TEST_PAIRS_PER_DIGIT, seed,
                     _SPLITS["test"])
    for split in (train, test):
        split.round(0)                 # a split it cannot pair is refused here, in one line
    name = NAME if per_digit == PAIRS_PER_DIGIT else f"{NAME}:{per_digit}"
    how = (f"MultiMNIST: {len(train):,} train / {len(test):,} test 36x36 images, each two "
           f"digits of different classes shifted by up to ±{SHIFT} px and added, min(1, a + b) "
           f"({per_digit} pairs per training digit, {TEST_PAIRS_PER_DIGIT} per test digit, "
           f"seed {seed}, rendered as used); from {base.source}")
    return dataclasses.replace(base, name=name, x_train=PairArray(train, "images"),
                               y_train=PairArray(train, "labels"),
                               x_test=PairArray(test, "images"),
                               y_test=PairArray(test, "labels"), source=how,
                               components=Recipe(train, test))
