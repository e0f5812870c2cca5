"""How many labels an image carries: one class (MNIST, CIFAR-10, ...) or a pair of classes
(MultiMNIST, two overlapping digits). A model trained on one kind cannot learn from the other,
so the mismatch is refused in one line before training starts."""

from __future__ import annotations

import numpy as np

from reportgen.data import multimnist
from reportgen.errors import ReportgenError

SINGLE, PAIR = 1, 2
_WORDS = {SINGLE: "one class per image", PAIR: "two classes per image (overlapping digits)"}
_SHAPES = {SINGLE: "(N,)", PAIR: "(N, 2)"}


def label_arity(labels: np.ndarray) -> int:
    """1 for labels (N,), 2 for labels (N, 2); anything else is not a label array reportgen
    trains on."""
    shape = tuple(np.shape(labels))
    if len(shape) == 1:
        return SINGLE
    if len(shape) == 2 and shape[1] == PAIR:
        return PAIR
    raise ReportgenError("Labels must be one class or a pair of classes per image.",
                         expected="an array of shape (N,) or (N, 2)", received=f"shape {shape}")


def check_label_arity(dataset, model_name: str, model_arity: int) -> None:
    """Raise a one-line ReportgenError when `dataset` (a reportgen Dataset) carries another
    number of labels per image than model `model_name` (`model_arity`: 1 or 2) predicts."""
    data_arity = label_arity(dataset.y_train)
    if data_arity == model_arity:
        return
    if model_arity == PAIR:
        fix = (f"train {model_name} with --data multimnist (or set its dataset to multimnist in "
               f"params.toml), or pick a single-label model for '{dataset.name}'")
        examples = "such as multimnist"
    else:
        fix = (f"give {model_name} a single-label data set (e.g. --data mnist), or train a "
               f"MULTIMNIST_* model on '{dataset.name}'")
        examples = "such as mnist"
    raise ReportgenError(
        f"Dataset '{dataset.name}' has {_WORDS[data_arity]} but model {model_name} predicts "
        f"{_WORDS[model_arity]}",
        expected=f"a data set with {_WORDS[model_arity]}, {examples} (labels of shape "
                 f"{_SHAPES[model_arity]})",
        received=f"labels of shape {tuple(np.shape(dataset.y_train))}",
        fix=fix)


# Data sets whose images carry a pair of classes; every other data set, built-in or the user's,
# carries one.
PAIRED_DATASETS = (multimnist.NAME,)


def model_label_arity(params) -> int:
    """How many classes model `params` (a ModelParams) names per image: a pair when its
    params.toml's `dataset` is a data set of paired labels (MultiMNIST), else one."""
    name = str(getattr(params, "dataset", "") or "").strip().lower().replace("-", "_")
    return PAIR if name.partition(":")[0] in PAIRED_DATASETS else SINGLE
