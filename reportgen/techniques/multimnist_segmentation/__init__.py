"""MultiMNIST over the test pairs (Sabour, Frosst & Hinton 2017, section 6; Gu 2022, Ch.5
section 3.2): top-2 accuracy (both labels among the two highest class scores) against chance,
1 / C(K, 2) = 1/45, and a segmentation score, the IoU of each reconstruction (the decoder masked
to one true class, thresholded at half the ink) with that class's source digit alone
(reportgen.techniques.multimnist_segmentation.numbers), beside its reference: each class's
typical training digit drawn at the canvas centre, what a decoder knowing the class but nothing
else of the image draws. Published top-2 accuracies (context, not our result): CapsNet
95% (Sabour) / 95.18%, No-R 95.49%, ConvNet-FC with large kernels 97.11% (Gu).

Like the affNIST-like benchmark, it draws its own test pairs (a seeded sample stratified by
the first digit's class) from the model's data set, whose recipe renders each pair's two source
digits (`Dataset.components`); models without a decoder get the accuracy alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.errors import ReportgenError
from reportgen.results import intervals as iv
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import check_positive, decode, masked_inputs, rounded_number

NAME = "multimnist_segmentation"
EXAMPLES = 4


@dataclass(frozen=True)
class Params:
    images: int = 500           # test pairs (a stratified sample)
    seed: int = 0               # the sample's seed (the pairs are the data set's own)

    def __post_init__(self):
        check_positive(NAME, "images", self.images)


def variants(description) -> list[Params]:
    """One, for every model of two classes per image (Technique.labels leaves out the rest)."""
    return [Params()]


def pair_sample(dataset: str, images: int, seed: int):
    """(images (N, H, W, C), labels (N, 2), sources (N, 2, H, W, C), the data set) of `images`
    test pairs of the two-label data set `dataset`."""
    from reportgen.data.datasets import load_dataset
    from reportgen.probe.evaluation import stratified_sample

    data = load_dataset(dataset)
    if data.components is None or np.ndim(data.y_test) != 2:
        raise ReportgenError("The MultiMNIST analysis needs a data set of overlaid digit pairs.",
                             expected="multimnist", received=repr(dataset),
                             fix="Train the model on multimnist (see README).")
    index = stratified_sample(np.asarray(data.y_test)[:, 0], images, seed=seed)
    return (np.asarray(data.x_test[index], np.float32), np.asarray(data.y_test[index], np.int64),
            data.components("test", index), data)


def compute(evaluation, params: Params | None = None) -> dict[str, np.ndarray]:
    """top2_accuracy (), top2_chance (), segmentation_iou () (NaN without a decoder),
    segmentation_reference () (numbers.class_prototypes' IoU), correct
    (N,), iou / iou_reference (N, 2), labels / top2 (N, 2), and EXAMPLES example pairs:
    example_images,
    example_labels, example_top2, example_reconstructions and
    example_predicted_reconstructions (E, 2, H, W, C)."""
    from reportgen.capsnet.compiled import encoder_outputs
    from reportgen.techniques.multimnist_segmentation.numbers import (class_prototypes,
                                                                      prototype_iou,
                                                                      segmentation_iou, top2_chance)

    params = params or Params()
    net = evaluation.net
    x, labels, sources, data = pair_sample(net.params.dataset, params.images, params.seed)
    classes = net.description.classes
    vectors, scores = encoder_outputs(net, x)
    top2 = np.argsort(-scores, axis=1, kind="stable")[:, :2]      # ties: lower class first
    correct = np.sort(top2, axis=1) == np.sort(labels, axis=1)
    correct = correct.all(axis=1)
    shown = np.arange(min(EXAMPLES, len(x)))
    decodes = "decoder" in net.description.features     # a class-conditional decoder

    def reconstruct(rows: np.ndarray, which: np.ndarray) -> np.ndarray:
        """(n, 2, H, W, C): the decoder masked to each image's two classes `which` (n, 2)."""
        return np.stack([decode(net, masked_inputs(vectors[rows, which[:, j]], which[:, j],
                                                   classes)) for j in range(2)], axis=1)

    # the reference: each class's typical training digit drawn at the centre, knowing the
    # class but nothing else of the image
    train = data.components.train
    reference = prototype_iou(class_prototypes(train.digits, train.labels, classes,
                                               x.shape[1:3]), labels, sources)
    if decodes:
        truth = reconstruct(np.arange(len(x)), labels)
        iou = segmentation_iou(truth, sources)
        examples = truth[shown]
        predicted = reconstruct(shown, top2[shown])
    else:
        iou = np.full((len(x), 2), np.nan)
        examples = predicted = np.zeros((len(shown), 2, *x.shape[1:]), np.float32)
    return {"top2_accuracy": np.float64(correct.mean() if len(x) else np.nan),
            "top2_chance": np.float64(top2_chance(classes)),
            "segmentation_iou": np.float64(np.mean(iou) if decodes and len(x) else np.nan),
            "segmentation_reference": np.float64(np.mean(reference) if len(x) else np.nan),
            "correct": correct.astype(np.float32), "iou": iou, "iou_reference": reference,
            "labels": labels, "top2": top2,
            "example_images": x[shown], "example_labels": labels[shown],
            "example_top2": top2[shown], "example_reconstructions": examples,
            "example_predicted_reconstructions": predicted}


def summarize(arrays, params: Params | None = None) -> dict:
    """images, top2_accuracy, top2_chance, segmentation_iou (None without a decoder),
    segmentation_reference; under summary["intervals"] the Wilson interval of the top-2
    accuracy, BCa bootstraps over the pairs of each pair's mean IoU (of its two digits) and its
    reference's, and their paired difference. The chance level is exact: no interval."""
    summary = {"images": int(np.asarray(arrays["correct"]).size),
               "top2_accuracy": rounded_number(np.asarray(arrays["top2_accuracy"])),
               "top2_chance": rounded_number(np.asarray(arrays["top2_chance"])),
               "segmentation_iou": rounded_number(np.asarray(arrays["segmentation_iou"])),
               "segmentation_reference": rounded_number(
                   np.asarray(arrays["segmentation_reference"]))}
    correct = np.asarray(arrays["correct"]) > 0.5
    if not correct.size:
        return summary
    iv.attach(summary, "top2_accuracy", iv.proportion(correct))
    reference = np.asarray(arrays["iou_reference"], np.float64).mean(1)       # (N,) per pair
    if summary["segmentation_reference"] is None:
        return summary
    if summary["segmentation_iou"] is None:
        iv.attach(summary, "segmentation_reference", iv.bootstrap_mean(reference))
        return summary
    iou = np.asarray(arrays["iou"], np.float64).mean(1)
    # both scores and their paired difference on the same pairs: one resampling
    scored, against, gain = iv.bootstrap_means(np.column_stack([iou, reference,
                                                                iou - reference]))
    iv.attach(summary, "segmentation_iou", scored)
    iv.attach(summary, "segmentation_reference", against)
    iv.attach_difference(summary, "segmentation_iou", "segmentation_reference", gain)
    return summary


TECHNIQUE = Technique(
    name=NAME,
    citations=cite('sabour2017dynamic', 'gu2022explainability'),
    title="MultiMNIST segmentation: top-2 accuracy and IoU",
    layer="model",
    scope="dataset",
    needs=frozenset(),
    applies_to=frozenset(),
    params_type=Params,
    version=2,
    compute=compute,
    render=lazy("reportgen.techniques.multimnist_segmentation.figures", "render_examples", Params),
    variants=variants,
    summarize=summarize,
    render_compare=lazy("reportgen.techniques.multimnist_segmentation.figures",
                        "render_compare", Params),
    labels=(2,),
    description="Over MultiMNIST test pairs (two overlapping digits of different classes): the "
                "share whose two highest class scores are the two labels (top-2 accuracy; "
                "chance 1/45), and how well the decoder, run once per true class, separates "
                "the digits: the IoU of each reconstruction, thresholded at 0.5, with its "
                "source digit alone, beside what a decoder knowing only the classes scores by "
                "drawing each class's typical digit at the centre (Sabour et al. 2017 section "
                "6, Fig. 5; published top-2: CapsNet 95–95.18%, No-R 95.49%, ConvNet-FC "
                "97.11%).",
)
