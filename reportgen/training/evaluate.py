"""Batched evaluation: class-capsule lengths for many images without `model.predict` overhead."""

from __future__ import annotations

import numpy as np


def class_lengths(net, images: np.ndarray) -> np.ndarray:
    """Class-capsule lengths (N, classes) for float32 images (N, H, W, C) — the scores the
    model predicts by (matrix capsules: their activations), by the compiled encoder on fixed
    batch shapes (reportgen.capsnet.compiled)."""
    from reportgen.capsnet.compiled import encoder_scores

    return encoder_scores(net, images)


def accuracy(net, images: np.ndarray, labels: np.ndarray) -> float:
    """Share of images whose highest class score (the encoder's: a CapsNet's longest class
    capsule) is the true class."""
    if len(images) == 0:
        return float("nan")
    predicted = class_lengths(net, images).argmax(axis=1)
    return float(np.mean(predicted == labels))


def top2_accuracy(net, images: np.ndarray, labels: np.ndarray) -> float:
    """Share of two-digit images whose two highest class scores are their two labels (N, 2)
    (MultiMNIST, Sabour et al. 2017 section 6)."""
    if len(images) == 0:
        return float("nan")
    from reportgen.training.two_label import top2_correct

    scores = class_lengths(net, images)
    return float(np.mean(np.asarray(top2_correct(np.asarray(labels), scores))))
