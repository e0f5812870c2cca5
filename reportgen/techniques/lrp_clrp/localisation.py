"""Localisation scores of relevance maps against known object masks, and the patch ablation at
a map's maximum. Model-free NumPy: maps (B, H, W), masks boolean (B, H, W); the ablation takes
the class score as a callable.

- Pointing game (Zhang, Lin, Brandt, Shen & Sclaroff, "Top-down neural attention by excitation
  backprop", ECCV 2016): a hit when the map's maximum falls in the class's mask
  (or within `tolerance` pixels of it; Zhang et al. use 15 px on ImageNet-sized images). A
  constant map points nowhere: a miss. Several maxima: the first in row-major order.
- Energy-thresholded pointing (Gu, Yang & Tresp, ACCV 2018, section 5.3, as read here): keep
  the fewest highest pixels holding `energy` of the map's positive relevance, and score the
  share of the kept pixels that lie in the mask (the plain game looks at one pixel only).
- Relevance mass accuracy (Arras, Osman & Samek 2022, "CLEVR-XAI", eq. 6): the share of the
  positive relevance that lies inside the mask; NaN for a map without positive relevance.
- Patch ablation (Gu, Yang & Tresp 2018, section 5.3): the size x size patch centred on the
  map's maximum is replaced by the data-set mean image's pixels; the score is the drop of the
  class score. Its baseline is the same patch at a random position. A patch centred near the
  border is shifted inside the image, so every ablation changes size x size pixels.
"""

from __future__ import annotations

import numpy as np


def _maps(maps) -> np.ndarray:
    maps = np.asarray(maps, np.float64)
    if maps.ndim != 3:
        raise ValueError(f"maps must be (B, H, W). Received shape {maps.shape}")
    return maps


def _masks(masks, shape) -> np.ndarray:
    masks = np.asarray(masks)
    if masks.dtype != bool:
        raise ValueError(f"masks must be boolean. Received dtype {masks.dtype}")
    if masks.shape != tuple(shape):
        raise ValueError(f"masks must have the maps' shape {tuple(shape)}. Received "
                         f"{masks.shape}")
    return masks


def maximum_position(maps) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, cols, pointed) of each map's maximum (the first in row-major order); `pointed`
    is False for a constant map (no maximum to point with)."""
    maps = _maps(maps)
    flat = maps.reshape(len(maps), -1)
    index = np.argmax(flat, axis=1)
    rows, cols = np.divmod(index, maps.shape[2])
    pointed = flat.max(axis=1) > flat.min(axis=1) if flat.shape[1] else np.zeros(len(maps), bool)
    return rows, cols, pointed


def _disk(radius: int) -> np.ndarray:
    offsets = np.arange(-radius, radius + 1)
    return offsets[:, None] ** 2 + offsets[None, :] ** 2 <= radius ** 2


def pointing_game(maps, masks, tolerance: int = 0) -> np.ndarray:
    """(B,) 1.0 for a hit (the maximum in the mask, or within `tolerance` pixels of it), 0.0
    for a miss; NaN for an empty mask."""
    maps = _maps(maps)
    masks = _masks(masks, maps.shape)
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0. Received: {tolerance}")
    if tolerance:
        from scipy import ndimage

        masks = ndimage.binary_dilation(masks, structure=_disk(int(tolerance))[None])
    rows, cols, pointed = maximum_position(maps)
    hits = masks[np.arange(len(maps)), rows, cols] & pointed
    return np.where(masks.reshape(len(masks), -1).any(axis=1), hits.astype(np.float64), np.nan)


def energy_kept(maps, energy: float) -> np.ndarray:
    """(B, H, W) boolean: the fewest highest pixels whose positive relevance sums to at least
    `energy` (in (0, 1]) of the map's; none for a map without positive relevance."""
    maps = _maps(maps)
    if not 0.0 < energy <= 1.0:
        raise ValueError(f"energy must be in (0, 1]. Received: {energy}")
    positive = np.maximum(maps, 0.0).reshape(len(maps), -1)
    order = np.argsort(-positive, axis=1, kind="stable")
    ranked = np.take_along_axis(positive, order, axis=1)
    total = ranked.sum(axis=1, keepdims=True)
    before = np.cumsum(ranked, axis=1) - ranked          # the relevance above each pixel
    keep_ranked = (before < energy * total) & (ranked > 0)
    kept = np.zeros_like(keep_ranked)
    np.put_along_axis(kept, order, keep_ranked, axis=1)
    return kept.reshape(maps.shape)


def energy_pointing(maps, masks, energy: float = 0.5) -> np.ndarray:
    """(B,) the share of the energy-thresholded pixels (`energy_kept`) inside the mask; NaN
    for a map without positive relevance or an empty mask."""
    maps = _maps(maps)
    masks = _masks(masks, maps.shape)
    kept = energy_kept(maps, energy).reshape(len(maps), -1)
    inside = (kept & masks.reshape(len(masks), -1)).sum(axis=1)
    count = kept.sum(axis=1)
    ok = (count > 0) & masks.reshape(len(masks), -1).any(axis=1)
    return np.where(ok, inside / np.where(count > 0, count, 1), np.nan)


def relevance_mass_accuracy(maps, masks) -> np.ndarray:
    """(B,) positive relevance inside the mask / all positive relevance (Arras et al. 2022);
    NaN where the map has no positive relevance."""
    maps = _maps(maps)
    masks = _masks(masks, maps.shape)
    positive = np.maximum(maps, 0.0).reshape(len(maps), -1)
    total = positive.sum(axis=1)
    inside = (positive * masks.reshape(len(masks), -1)).sum(axis=1)
    return np.where(total > 0, inside / np.where(total > 0, total, 1.0), np.nan)


# --- patch ablation -----------------------------------------------------------------------------

def patch_masks(rows, cols, shape_hw, size: int) -> np.ndarray:
    """(B, H, W) boolean size x size patches centred on (rows, cols), shifted inside the
    image where they would cross its border (a patch larger than the image covers it)."""
    height, width = shape_hw
    rows, cols = np.asarray(rows, np.int64), np.asarray(cols, np.int64)
    if size < 1:
        raise ValueError(f"patch size must be >= 1. Received: {size}")
    top = np.clip(rows - size // 2, 0, max(height - size, 0))
    left = np.clip(cols - size // 2, 0, max(width - size, 0))
    y = np.arange(height)[None, :, None]
    x = np.arange(width)[None, None, :]
    return ((y >= top[:, None, None]) & (y < top[:, None, None] + size)
            & (x >= left[:, None, None]) & (x < left[:, None, None] + size))


def ablate(images, masks, fill) -> np.ndarray:
    """Images (B, H, W, C) with the pixels of masks (B, H, W) taken from `fill` (H, W, C), the
    data-set mean image (or any image of that shape)."""
    images = np.asarray(images)
    fill = np.broadcast_to(np.asarray(fill, images.dtype), images.shape[1:])
    return np.where(np.asarray(masks)[..., None], fill[None], images)


def random_positions(count: int, shape_hw, rng: np.random.Generator):
    """(rows, cols) uniformly random pixel positions."""
    return rng.integers(0, shape_hw[0], count), rng.integers(0, shape_hw[1], count)


def ablation_drop(score, images, maps, targets, fill, size: int = 9,
                  rng: np.random.Generator | None = None) -> dict[str, np.ndarray]:
    """The drop of the class score when the size x size patch at each map's maximum is
    replaced by `fill`: {"drop": (B,), "random_drop": (B,) the same patch at a random position
    (when `rng` is given), "pointed": (B,) bool (False: a constant map, whose 'maximum' is the
    first pixel)}. score(images (B, H, W, C)) -> (B, classes)."""
    images = np.asarray(images)
    targets = np.asarray(targets, np.int64)
    rows_index = np.arange(len(images))
    clean = np.asarray(score(images), np.float64)[rows_index, targets]
    rows, cols, pointed = maximum_position(maps)
    hw = images.shape[1:3]
    ablated = ablate(images, patch_masks(rows, cols, hw, size), fill)
    out = {"drop": clean - np.asarray(score(ablated), np.float64)[rows_index, targets],
           "pointed": pointed}
    if rng is not None:
        random_rows, random_cols = random_positions(len(images), hw, rng)
        shuffled = ablate(images, patch_masks(random_rows, random_cols, hw, size), fill)
        out["random_drop"] = clean - np.asarray(score(shuffled), np.float64)[rows_index, targets]
    return out
