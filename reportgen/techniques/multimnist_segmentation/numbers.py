"""MultiMNIST measures over stored arrays (NumPy): the chance level of top-2 accuracy and the
segmentation score, IoU of each thresholded reconstruction with its source digit (a score for
Sabour et al. 2017's Fig. 5 segmentation, which the paper shows but does not score), and that
score's reference: what a decoder that knows a digit's class but nothing else of the image
scores when it draws the class's typical digit at the canvas centre (`class_prototypes`)."""

from __future__ import annotations

import numpy as np

from reportgen.results.technique_numbers import top2_chance

# top2_chance: in reportgen/results/technique_numbers.py (the findings read it too).
SEGMENT_THRESHOLD = 0.5   # a pixel belongs to a digit when its value is above half the ink


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


def class_prototypes(digits: np.ndarray, labels: np.ndarray, classes: int,
                     canvas: tuple[int, int], threshold: float = SEGMENT_THRESHOLD) -> np.ndarray:
    """(classes, H, W, 1) of 0/1: each class's typical digit at the centre of the canvas, the
    mask a decoder knowing only the class would draw. The class's mean digit (over `digits`
    (N, h, w, 1) of `labels`), its most inked pixels as many as that class's digits have above
    `threshold` on average (a mean digit's own values rarely pass 0.5: thresholding it would
    draw less than a digit)."""
    digits = np.asarray(digits, np.float64)[..., 0]
    labels = np.asarray(labels).reshape(-1)
    h, w = digits.shape[1:]
    top, left = (canvas[0] - h) // 2, (canvas[1] - w) // 2
    out = np.zeros((classes, *canvas, 1), np.float32)
    for k in range(classes):
        own = digits[labels == k]
        if not len(own):
            continue
        area = int(round(float((own > threshold).sum(axis=(1, 2)).mean())))
        order = np.argsort(-own.mean(axis=0), axis=None, kind="stable")[:area]
        mask = np.zeros(h * w, np.float32)
        mask[order] = 1.0
        out[k, top:top + h, left:left + w, 0] = mask.reshape(h, w)
    return out


def prototype_iou(prototypes: np.ndarray, labels: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """(N, 2): `segmentation_iou` of each pair's class prototypes (`class_prototypes`, in the
    order of `labels` (N, 2)) with its source digits (N, 2, H, W, C)."""
    return segmentation_iou(np.asarray(prototypes)[np.asarray(labels, np.int64)], sources)
