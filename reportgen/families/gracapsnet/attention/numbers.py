"""GraCapsNet attention results: the built-in explanation E of Gu, Wu & Tresp (AAAI 2021) from
the graph-pooling attention, in the array orders the technique and its drawings share."""

from __future__ import annotations

import numpy as np


def explanation_maps(attention: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    """E = mean over heads of Att^l, on the grid: attention (B, heads, nodes, classes) ->
    (B, classes, gh, gw). Each class's map sums to 1 over the nodes (every head's does)."""
    attention = np.asarray(attention, np.float64)
    mean = attention.mean(axis=1)                                        # (B, nodes, classes)
    return np.moveaxis(mean, -1, 1).reshape(len(attention), -1, *grid)


def head_maps(attention: np.ndarray, grid: tuple[int, int], classes: np.ndarray) -> np.ndarray:
    """Att^l of one class per image (the predicted one), every head: (B, heads, gh, gw)."""
    attention = np.asarray(attention, np.float64)
    chosen = attention[np.arange(len(attention)), :, :, np.asarray(classes, np.int64)]
    return chosen.reshape(len(attention), attention.shape[1], *grid)
