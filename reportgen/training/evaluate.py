"""Batched evaluation: class-capsule lengths for many images without `model.predict` overhead."""

from __future__ import annotations

import numpy as np


def class_lengths(net, images: np.ndarray, batch_size: int = 250) -> np.ndarray:
    """Class-capsule lengths (N, classes) for float32 images (N, H, W, C) — the scores the
    model predicts by (matrix capsules: their activations)."""
    out = []
    encode = _compiled_encoder(net)
    for start in range(0, len(images), batch_size):
        _, lengths = encode(images[start:start + batch_size])
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


def top2_accuracy(net, images: np.ndarray, labels: np.ndarray, batch_size: int = 250) -> float:
    """Share of two-digit images whose two highest class scores are their two labels (N, 2)
    (MultiMNIST, Sabour et al. 2017 section 6)."""
    if len(images) == 0:
        return float("nan")
    from reportgen.training.two_label import top2_correct

    scores = class_lengths(net, images, batch_size)
    return float(np.mean(np.asarray(top2_correct(np.asarray(labels), scores))))


def _compiled_encoder(net):
    """net.encoder at evaluation; XLA-compiled (and kept on the network) for networks that ask
    for it (`jit_compile`, e.g. EM routing), where an eager call is several times slower."""
    if not net.jit_compile:
        return lambda x: net.encoder(x, training=False)
    compiled = net.compiled_encoder
    if compiled is None:
        import tensorflow as tf

        compiled = tf.function(lambda x: net.encoder(x, training=False), jit_compile=True,
                               reduce_retracing=True)
        net.compiled_encoder = compiled
    return compiled
