"""Accuracy on the affNIST-like test set: Gu 2022's affine benchmark (Ch.5).

A model trained on 40x40 expanded data (digits at random positions: `mnist40`,
`fashion_mnist40`) is tested on the test images of its base dataset padded to 40x40 and moved by
random affine maps within the affNIST ranges (reportgen.data.affine_benchmark: rotation ±20°,
shear ±45°, scale 0.8–1.2 per axis, translation ±8 px, seeded). The clean accuracy beside it is
the shared evaluation set's (the expanded test images), and the affNIST-like images are the
same digits transformed, so both accuracies count the same images. Gu's Table 1 (context, not our result):
CapsNet 79%, Aff-CapsNet 93.21%, ConvNet-Avg 94.11%, ConvNet-FC 66%, every model stopped at
≈ 99.22% on MNIST (see `reportgen train --until-accuracy`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.errors import ReportgenError
from reportgen.results import intervals as iv
from reportgen.results import per_image
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import check_positive, rounded_number

NAME = "affnist_benchmark"
CANVAS = (40, 40)
EXAMPLES = 8


@dataclass(frozen=True)
class Params:
    images: int = 0             # 0: the evaluation set's digits, transformed; else a subset
    seed: int = 0               # the sample's seed (the split and the transforms are fixed)

    def __post_init__(self):
        if self.images:
            check_positive(NAME, "images", self.images)


def variants(description) -> list[Params]:
    return [Params()]


def unsuited(description) -> str | None:
    """Models of the benchmark's 40x40 grayscale input only."""
    shape = tuple(description.input_shape)
    if shape == (*CANVAS, 1):
        return None
    return (f"its input is {shape[0]}x{shape[1]}x{shape[2]}, not the affine benchmark's "
            f"{CANVAS[0]}x{CANVAS[1]} grayscale digits")


def affine_test_set(dataset: str, seed: int):
    """(images, labels, source) of the affNIST-like test split for a model trained on
    `dataset` (an expanded 40x40 set, or the affNIST-like set itself)."""
    from reportgen.data.affine_benchmark import BASE_OF_AFFINE, DERIVED
    from reportgen.data.datasets import load_dataset

    key = str(dataset).strip().lower().replace("-", "_")
    if key not in DERIVED:
        raise ReportgenError(f"The affNIST-like benchmark needs a model trained on one of "
                             f"{', '.join(DERIVED)}.", received=repr(dataset),
                             fix="Train on mnist40 (or fashion_mnist40); see README.")
    data = load_dataset(BASE_OF_AFFINE[DERIVED[key].base])
    return data.x_test, data.y_test, data.source


def compute(evaluation, params: Params | None = None) -> dict[str, np.ndarray]:
    """affnist_accuracy (), clean_accuracy (), class_accuracy (K,), labels / predicted (N,),
    clean_correct (N_eval,) bool (the evaluation set's: with images=0 the same digits
    untransformed, so the two accuracies pair),
    example_images (E, H, W, C), example_labels / example_predicted (E,)."""
    from reportgen.capsnet.compiled import encoder_scores
    from reportgen.data.held_out import evaluation_indices
    from reportgen.probe.evaluation import stratified_sample

    params = params or Params()
    net = evaluation.net
    x, y, _ = affine_test_set(net.params.dataset, params.seed)
    # the affNIST-like versions of the evaluation set's own digits (the affine test split is
    # index for index the expanded one's), so that clean and affNIST-like accuracy count the
    # same digits
    index = stratified_sample(y, params.images, seed=params.seed) if params.images else \
        evaluation_indices(y, len(evaluation))
    if not params.images and not np.array_equal(np.asarray(y)[index],
                                                 np.asarray(evaluation.labels)):
        raise ReportgenError("The affNIST-like benchmark cannot find the evaluation set's "
                             "digits in its test split.",
                             expected="the evaluation set drawn from the held-out split",
                             received=f"{len(evaluation)} images of other labels",
                             fix="Pass images=N to benchmark a subset of its own.")
    images, labels = np.asarray(x[index], np.float32), np.asarray(y[index], np.int64)
    predicted = encoder_scores(net, images).argmax(1)
    correct = predicted == labels
    classes = net.description.classes
    counts = np.bincount(labels, minlength=classes)
    hits = np.bincount(labels[correct], minlength=classes)
    clean = np.asarray(evaluation.tensors("predicted")["predicted"]) == \
        np.asarray(evaluation.labels)
    shown = np.arange(min(EXAMPLES, len(images)))
    with np.errstate(invalid="ignore", divide="ignore"):
        class_accuracy = np.where(counts > 0, hits / np.maximum(counts, 1), np.nan)
    return {"affnist_accuracy": np.float64(correct.mean() if len(correct) else np.nan),
            "clean_accuracy": np.float64(clean.mean() if len(clean) else np.nan),
            "class_accuracy": class_accuracy, "labels": labels,
            "predicted": predicted.astype(np.int64),
            "clean_correct": clean,
            "example_images": images[shown],
            "example_labels": labels[shown], "example_predicted": predicted[shown]}


def summarize(arrays, params: Params | None = None) -> dict:
    """images, affnist_accuracy, clean_accuracy, their gap (JSON-ready); the accuracies with
    their Wilson intervals and, where both count the same digits, the paired difference
    affnist - clean (a BCa bootstrap over the digits) under summary["intervals"]."""
    affnist = rounded_number(np.asarray(arrays["affnist_accuracy"]))
    clean = rounded_number(np.asarray(arrays["clean_accuracy"]))
    summary = {"images": int(np.asarray(arrays["labels"]).size), "affnist_accuracy": affnist,
               "clean_accuracy": clean,
               "gap": rounded_number(clean - affnist) if None not in (clean, affnist) else None}
    labels = np.asarray(arrays["labels"])
    if labels.size:
        correct = np.asarray(arrays["predicted"]) == labels
        iv.attach(summary, "affnist_accuracy", iv.proportion(correct))
        # what another model's accuracy on the same digits is compared with, image by image
        per_image.attach_outcomes(summary, "affnist_accuracy", correct, labels)
        clean_correct = np.asarray(arrays.get("clean_correct", np.zeros(0)), bool)
        if clean_correct.size:
            iv.attach(summary, "clean_accuracy", iv.proportion(clean_correct))
            if clean_correct.shape == correct.shape:
                per_image.attach_outcomes(summary, "clean_accuracy", clean_correct, labels)
        # paired only where both count the same digits (images=0: the evaluation set's own)
        if not (params or Params()).images and clean_correct.shape == correct.shape:
            iv.attach_difference(summary, "affnist_accuracy", "clean_accuracy",
                                 iv.paired_difference(correct, clean_correct))
            iv.attach(summary, "gap", iv.paired_difference(clean_correct, correct))
    return summary


TECHNIQUE = Technique(
    name=NAME,
    citations=cite('gu2021capsule', 'gu2022explainability'),
    title="affNIST-like benchmark (Gu 2022)",
    layer="model",
    scope="dataset",
    needs=frozenset({"predicted"}),
    applies_to=frozenset(),
    params_type=Params,
    version=3,
    compute=compute,
    render=lazy("reportgen.techniques.affnist_benchmark.figures", "render", Params),
    variants=variants,
    unsuited=unsuited,
    summarize=summarize,
    render_compare=lazy("reportgen.techniques.affnist_benchmark.figures", "render_compare", Params),
    description="Accuracy of a model trained on 40x40 expanded digits (random positions) on "
                "affNIST-like test digits (padded to 40x40, then random rotation within 20°, "
                "shear within 45°, scale 0.8–1.2 per axis and translation within 8 px), beside "
                "its clean accuracy: Gu 2022's affine benchmark of capsule networks against "
                "CNNs (his Table 1: Aff-CapsNet 93.21%, CapsNet 79%, ConvNet-FC 66%).",
)
