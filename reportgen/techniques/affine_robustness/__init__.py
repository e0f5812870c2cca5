"""Accuracy under affine transforms of the evaluation set.

One sweep per factor (rotation, x/y translation, scale, x/y shear): every evaluation image is
transformed with each value of the sweep (reportgen.probe.affine: bilinear, zero fill, image
centre as origin) and classified by the model's own rule (its highest class score:
reportgen.capsnet.model_words.prediction_words says which). The clean accuracy comes from
the EvalBatch's shared clean pass. Context, not a result of ours: on affNIST (MNIST digits
under random small affine transforms, trained on translated MNIST only) Sabour et al. 2017
report 79% for a CapsNet and 66% for a CNN of the same size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.console import progress
from reportgen.errors import ReportgenError
from reportgen.probe.affine import FACTORS, factor_batch
from reportgen.results import intervals as iv
from reportgen.techniques.affine_robustness.numbers import factors_in
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import check_positive, require_images

NAME = "affine_robustness"
VOTES_BUDGET_BYTES = 256 * 2 ** 20      # routing votes of one forward call stay under this


def _values(*values) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


@dataclass(frozen=True)
class Params:
    """The values of each sweep (an empty list skips that factor), and images per forward call."""

    rotation: tuple[float, ...] = _values(*range(-60, 61, 15))                 # degrees
    translation_x: tuple[float, ...] = _values(*range(-6, 7, 2))               # pixels
    translation_y: tuple[float, ...] = _values(*range(-6, 7, 2))
    scale: tuple[float, ...] = _values(*np.round(np.arange(0.6, 1.41, 0.1), 2))
    shear_x: tuple[float, ...] = _values(*np.round(np.arange(-0.6, 0.61, 0.15), 2))
    shear_y: tuple[float, ...] = _values(*np.round(np.arange(-0.6, 0.61, 0.15), 2))
    chunk: int = 200                    # at most; fewer for models with many primary capsules

    def __post_init__(self):
        for factor in FACTORS:
            raw = getattr(self, factor)
            try:
                values = tuple(float(v) for v in raw)
            except (TypeError, ValueError) as exc:
                raise ReportgenError(f"Invalid option '{factor}' for technique '{NAME}'.",
                                     expected="a list of numbers", received=repr(raw)) from exc
            if any(not np.isfinite(v) for v in values) or \
                    (factor == "scale" and any(v <= 0 for v in values)):
                raise ReportgenError(f"Invalid option '{factor}' for technique '{NAME}'.",
                                     expected="finite numbers (scales > 0)", received=repr(raw))
            object.__setattr__(self, factor, values)   # lists (TOML, JSON) -> hashable tuples
        check_positive(NAME, "chunk", self.chunk)

    def sweeps(self) -> dict[str, tuple[float, ...]]:
        return {f: getattr(self, f) for f in FACTORS if getattr(self, f)}


def variants(description) -> list[Params]:
    return [Params()]


def forward_chunk(net, requested: int) -> int:
    """Images per forward call: `requested`, fewer when the routing votes would exceed
    VOTES_BUDGET_BYTES (an MNIST_LPcaps image has 6.6 MB of votes)."""
    description = net.description
    if description.primary_capsules is None or description.class_capsules is None:
        return int(requested)               # a CNN: no votes
    per_image = (description.primary_capsules.capsules * description.classes
                 * description.class_capsules.pose_size * 4)
    return int(max(1, min(requested, VOTES_BUDGET_BYTES // max(per_image, 1))))


def sweep(net, images: np.ndarray, factor: str, values, chunk: int, bar=None):
    """Class capsules (S, N, K, D) and lengths (S, N, K) of `images` under each value of `factor`
    (a CNN: its class vectors as its encoder gives them, and its class probabilities).

    The S x N transformed images are made and classified `chunk` at a time (at most; see
    forward_chunk), each through the network's compiled encoder pass
    (reportgen.capsnet.compiled.encoder_outputs), so neither the transformed set nor its
    activations exist in full.
    """
    from reportgen.capsnet.compiled import encoder_outputs

    values = np.asarray(values, np.float64)
    chunk = forward_chunk(net, chunk)
    n, s = len(images), len(values)
    which_value = np.repeat(np.arange(s), n)
    which_image = np.tile(np.arange(n), s)
    capsules, lengths = [], []
    for start in range(0, n * s, chunk):
        part = slice(start, start + chunk)
        x = factor_batch(images[which_image[part]], factor, values[which_value[part]])
        vectors, scores = encoder_outputs(net, x)
        capsules.append(np.asarray(vectors))
        lengths.append(np.asarray(scores))
        if bar is not None:
            bar.update(len(x))
    if not capsules:
        vectors, scores = encoder_outputs(net, images[:0])
        return (np.zeros((s, n, *vectors.shape[1:]), np.float32),
                np.zeros((s, n, scores.shape[1]), np.float32))
    capsules = np.concatenate(capsules)
    return (capsules.reshape(s, n, *capsules.shape[1:]),
            np.concatenate(lengths).reshape(s, n, -1))


def _class_accuracy(correct: np.ndarray, labels: np.ndarray, classes: int) -> np.ndarray:
    """(..., K) accuracy per true class of correct (..., N); NaN for absent classes."""
    counts = np.bincount(labels, minlength=classes).astype(np.float64)
    hits = np.stack([correct[..., labels == k].sum(-1) for k in range(classes)], -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, hits / counts, np.nan)


def compute(evaluation, params: Params | None = None) -> dict[str, np.ndarray]:
    """Per factor: values_<f> (S,), accuracy_<f> (S,), class_accuracy_<f> (S, K),
    true_length_<f> (S,) mean length of the true class capsule, predicted_<f> (S, N) int;
    clean_accuracy (), clean_class_accuracy (K,), class_counts (K,); per image (the
    intervals over images): labels (N,), clean_correct (N,) bool."""
    params = params or Params()
    require_images(evaluation, NAME)
    net = evaluation.net
    images = np.asarray(evaluation.images, np.float32)
    labels = np.asarray(evaluation.labels, np.int64)
    classes = net.description.classes
    clean = np.asarray(evaluation.tensors("lengths")["lengths"]).argmax(1) == labels
    out = {"clean_accuracy": np.float64(clean.mean() if len(labels) else np.nan),
           "clean_class_accuracy": _class_accuracy(clean, labels, classes),
           "class_counts": np.bincount(labels, minlength=classes).astype(np.float64),
           "labels": labels, "clean_correct": clean}
    sweeps = params.sweeps()
    total = len(images) * sum(len(v) for v in sweeps.values())
    with progress(total, f"affine robustness ({len(images)} images × {total // max(len(images), 1)} "
                         "transforms)", unit="passes") as bar:
        for factor, values in sweeps.items():
            _, lengths = sweep(net, images, factor, values, params.chunk, bar)
            predicted = lengths.argmax(-1)                                        # (S, N)
            correct = predicted == labels
            out[f"values_{factor}"] = np.asarray(values, np.float64)
            out[f"accuracy_{factor}"] = correct.mean(1) if len(labels) else \
                np.full(len(values), np.nan)
            out[f"class_accuracy_{factor}"] = _class_accuracy(correct, labels, classes)
            out[f"true_length_{factor}"] = np.take_along_axis(
                lengths, labels[None, :, None], -1)[..., 0].mean(1) if len(labels) else \
                np.full(len(values), np.nan)
            out[f"predicted_{factor}"] = predicted.astype(np.int64)
    return out


def summarize(arrays, params: Params | None = None) -> dict:
    """Clean accuracy and, per factor, the curve, its mean and its minimum (JSON-ready), each
    with its 95% interval over the images (summary["intervals"]): Wilson for the accuracies
    (the minimum: the accuracy at the sweep value where it is lowest), a BCa bootstrap of each
    image's mean correctness over the sweep for the means, and the paired difference of a
    factor's mean accuracy and the clean accuracy (the same images)."""
    clean = float(np.asarray(arrays["clean_accuracy"]))
    summary = {"images": int(np.asarray(arrays["class_counts"]).sum()),
               "clean_accuracy": clean if np.isfinite(clean) else None}
    # per-image outcomes (results computed before they were stored have none)
    labels = arrays.get("labels") if hasattr(arrays, "get") else None
    per_image = labels is not None and np.asarray(labels).size > 0
    if per_image:
        labels = np.asarray(labels, np.int64)
        clean_correct = np.asarray(arrays["clean_correct"], bool)
        iv.attach(summary, "clean_accuracy", iv.proportion(clean_correct))
    means, image_means = [], []
    for factor in factors_in(arrays):
        accuracy = np.asarray(arrays[f"accuracy_{factor}"], np.float64)
        summary[f"{factor}_values"] = [float(v) for v in arrays[f"values_{factor}"]]
        summary[f"{factor}_accuracy"] = [float(v) for v in accuracy]
        summary[f"{factor}_mean_accuracy"] = float(accuracy.mean())
        summary[f"{factor}_min_accuracy"] = float(accuracy.min())
        means.append(float(accuracy.mean()))
        if per_image:
            correct = np.asarray(arrays[f"predicted_{factor}"]) == labels[None]     # (S, N)
            swept = correct.mean(0)                  # each image's accuracy over the sweep
            image_means.append(swept)
            curve = [iv.proportion(row) for row in correct]
            iv.attach(summary, f"{factor}_accuracy", curve)
            iv.attach(summary, f"{factor}_min_accuracy", curve[int(np.argmin(accuracy))])
    summary["mean_accuracy"] = float(np.mean(means)) if means else None
    if image_means:
        # every mean and paired difference over the same images: one resampling
        swept = np.stack(image_means, 1)                                      # (N, F)
        got = iv.bootstrap_means(np.column_stack([swept, swept - clean_correct[:, None],
                                                  swept.mean(1)]))
        for f, factor in enumerate(factors_in(arrays)):
            iv.attach(summary, f"{factor}_mean_accuracy", got[f])
            iv.attach_difference(summary, f"{factor}_mean_accuracy", "clean_accuracy",
                                 got[len(image_means) + f])
        iv.attach(summary, "mean_accuracy", got[-1])
    return summary


TECHNIQUE = Technique(
    name=NAME,
    citations=cite('sabour2017dynamic', 'gu2022explainability'),
    title="Affine robustness",
    layer="model",
    scope="dataset",
    needs=frozenset({"lengths"}),
    applies_to=frozenset(),
    params_type=Params,
    version=2,
    compute=compute,
    render=lazy("reportgen.techniques.affine_robustness.figures", "render", Params),
    variants=variants,
    summarize=summarize,
    render_trend=lazy("reportgen.techniques.affine_robustness.figures", "render_trend", Params),
    render_compare=lazy("reportgen.techniques.affine_robustness.figures", "render_compare", Params),
    description="Accuracy of the evaluation set under rotation, x/y translation, scale and x/y "
                "shear, one sweep per factor (bilinear resampling about the image centre, zero "
                "fill), with the clean accuracy marked: how far the capsule network's "
                "equivariance carries it (and a CNN's, for comparison). For context, Sabour et al. 2017 report 79% on affNIST "
                "for a CapsNet trained on translated MNIST, against 66% for a CNN of the same "
                "size.",
)
