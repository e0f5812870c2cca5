"""MultiMNIST measures over stored arrays (NumPy): the chance level of top-2 accuracy and the
segmentation score, IoU of each thresholded reconstruction with its source digit (the measure
the issue proposes for Sabour et al. 2017's Fig. 5 segmentation, which the paper shows but does
not score)."""

from __future__ import annotations

import numpy as np

SEGMENT_THRESHOLD = 0.5   # a pixel belongs to a digit when its value is above half the ink


def top2_chance(num_classes: int = 10) -> float:
    """Top-2 accuracy of a guess: one unordered pair of the C(K, 2) (1/45 for 10 classes)."""
    return 2.0 / (num_classes * (num_classes - 1))


def segmentation_iou(reconstructions: np.ndarray, sources: np.ndarray,
                     threshold: float = SEGMENT_THRESHOLD) -> np.ndarray:
    """IoU of {reconstruction > threshold} with {source > threshold}, one value per image.

    `sources` (..., H, W, C), e.g. (N, 2, 36, 36, 1) from a MultiMNIST Dataset's `components`;
    `reconstructions` hold as many pixels per image (flat decoder outputs are accepted). Returns
    shape (...,). Where neither mask has a pixel the score is 1 (nothing to segment, nothing
    drawn).
    """
    sources = np.asarray(sources)
    reconstructions = np.asarray(reconstructions).reshape(sources.shape)
    lead = sources.shape[:-3]
    drawn = (reconstructions > threshold).reshape(*lead, -1)
    truth = (sources > threshold).reshape(*lead, -1)
    intersection = np.logical_and(drawn, truth).sum(-1)
    union = np.logical_or(drawn, truth).sum(-1)
    return np.where(union > 0, intersection / np.maximum(union, 1), 1.0)
