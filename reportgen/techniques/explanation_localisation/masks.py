"""Digit masks of MultiMNIST pairs and the localisation scores of maps against them (model-free
NumPy). A pair's two source digits (`Dataset.components`, (N, 2, H, W, C)) give each digit's
mask: its ink above `threshold` (on the channel mean). Overlap: the pixels in both digits'
masks show both digits, so a map pointing there says nothing about which digit it explains;
"exclude" (the default) removes them from both masks, "both" keeps them in each.

Scores (reportgen.techniques.lrp_clrp.localisation): the pointing game (Zhang et al. 2016) and
relevance mass accuracy (Arras, Osman & Samek 2022, eq. 6), each against the explained class's
own digit and against the other digit. The uniform map's relevance mass accuracy is the mask's
share of the image; the module calls a constant map's pointing a miss, so the uniform
baseline's pointing score is instead the expected hit of a pixel drawn uniformly at random (a
map with one maximum at a random place): the same area share.
"""

from __future__ import annotations

import numpy as np

from reportgen.techniques.lrp_clrp.localisation import pointing_game, relevance_mass_accuracy

OVERLAPS = ("exclude", "both")
TARGETS = ("own", "other")     # the last axis of the scores: the explained digit, the other one


def digit_masks(sources, threshold: float = 0.5, overlap: str = "exclude") -> np.ndarray:
    """(N, 2, H, W) boolean: each source digit's ink above `threshold`, the pixels of both
    digits removed from both masks ("exclude") or kept in each ("both")."""
    if overlap not in OVERLAPS:
        raise ValueError(f"overlap must be one of {OVERLAPS}. Received: {overlap!r}")
    sources = np.asarray(sources, np.float64)
    if sources.ndim == 5:
        sources = sources.mean(axis=-1)
    if sources.ndim != 4 or sources.shape[1] != 2:
        raise ValueError(f"sources must be (N, 2, H, W[, C]). Received shape {sources.shape}")
    masks = sources > threshold
    if overlap == "exclude":
        shared = masks.all(axis=1, keepdims=True)
        masks = masks & ~shared
    return masks


def class_masks(masks) -> tuple[np.ndarray, np.ndarray]:
    """(own, other) (2N, H, W) of the explanations ordered pair by pair, its first digit's class
    then its second's (row 2i + k explains digit k of pair i)."""
    masks = np.asarray(masks, bool)
    own = masks.reshape(-1, *masks.shape[2:])
    other = masks[:, ::-1].reshape(-1, *masks.shape[2:])
    return own, other


def area_share(masks) -> np.ndarray:
    """(B,) each mask's share of the image's pixels."""
    masks = np.asarray(masks, bool)
    return masks.reshape(len(masks), -1).mean(axis=1)


def scores(maps, own, other) -> dict[str, np.ndarray]:
    """{"pointing", "mass"}: (B, 2) the pointing game and relevance mass accuracy of maps
    (B, H, W) against the own and the other digit's masks (NaN: an empty mask, a map without
    positive relevance)."""
    maps = np.nan_to_num(np.asarray(maps, np.float64), nan=0.0)
    return {"pointing": np.stack([pointing_game(maps, own), pointing_game(maps, other)], 1),
            "mass": np.stack([relevance_mass_accuracy(maps, own),
                              relevance_mass_accuracy(maps, other)], 1)}


def uniform_scores(own, other) -> dict[str, np.ndarray]:
    """The uniform map's: relevance mass accuracy = the mask's area share (exactly, from the
    module's function on a constant map); pointing = the expected hit of a uniformly random
    pixel, the same share (NaN for an empty mask, as the pointing game's)."""
    ones = np.ones(np.shape(own), np.float64)
    mass = np.stack([relevance_mass_accuracy(ones, own), relevance_mass_accuracy(ones, other)], 1)
    share = np.stack([area_share(own), area_share(other)], 1)
    return {"pointing": np.where(share > 0, share, np.nan), "mass": mass}
