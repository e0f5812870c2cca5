"""NumPy references for two labels per image (MultiMNIST): written from the definitions, one
example and one class at a time."""

from __future__ import annotations

import math

import numpy as np


def pair_margin_loss(labels, lengths, m_plus=0.9, m_minus=0.1, down_weight=0.5):
    """Sabour et al. 2017 eq. 4 with T_k = 1 for both labels of each example."""
    out = []
    for pair, row in zip(labels, np.asarray(lengths, np.float64)):
        total = 0.0
        for k, length in enumerate(row):
            if k in set(int(c) for c in pair):
                total += max(0.0, m_plus - length) ** 2
            else:
                total += down_weight * max(0.0, length - m_minus) ** 2
        out.append(total)
    return np.array(out)


def pair_binary_crossentropy(labels, logits):
    """-sum_k [t_k log s(z_k) + (1 - t_k) log(1 - s(z_k))], s the logistic sigmoid."""
    out = []
    for pair, row in zip(labels, np.asarray(logits, np.float64)):
        total = 0.0
        for k, z in enumerate(row):
            p = 1.0 / (1.0 + math.exp(-z))
            total -= math.log(p) if k in set(int(c) for c in pair) else math.log(1.0 - p)
        out.append(total)
    return np.array(out)


def top2_correct(labels, scores):
    """1 where the two largest scores (ties: lower index first) are the two labels."""
    out = []
    for pair, row in zip(labels, np.asarray(scores)):
        order = sorted(range(len(row)), key=lambda k: (-row[k], k))
        out.append(float(set(order[:2]) == set(int(c) for c in pair)))
    return np.array(out)


def iou(a, b):
    """|a and b| / |a or b| of two boolean masks (1 when both are empty)."""
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    union = np.sum(a | b)
    return 1.0 if union == 0 else float(np.sum(a & b)) / float(union)
