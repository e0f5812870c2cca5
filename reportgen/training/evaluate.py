"""Batched evaluation: class-capsule lengths for many images without `model.predict` overhead."""

from __future__ import annotations

import numpy as np


def class_lengths(net, images: np.ndarray, batch_size: int = 250) -> np.ndarray:
    """Class-capsule lengths (N, classes) for float32 images (N, H, W, C)."""
    out = []
    for start in range(0, len(images), batch_size):
        _, lengths = net.encoder(images[start:start + batch_size], training=False)
        out.append(np.asarray(lengths))
    if not out:
        return np.zeros((0, net.params.num_classes), np.float32)
    return np.concatenate(out)


def accuracy(net, images: np.ndarray, labels: np.ndarray, batch_size: int = 250) -> float:
    """Share of images whose longest class capsule is the true class."""
    if len(images) == 0:
        return float("nan")
    predicted = class_lengths(net, images, batch_size).argmax(axis=1)
    return float(np.mean(predicted == labels))
