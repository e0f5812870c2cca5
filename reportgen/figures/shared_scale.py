"""One colour scale for several steps (the training filmstrip): the value range of a stored
result, for the techniques whose figures map values to colours on a scale set by the data
(conv feature maps, primary-capsule heatmaps, Routing Path Visualization). Drawing every step
with the union of these ranges (RenderContext.value_range) makes the frames comparable; the
other techniques have fixed scales (Grad-CAM++ is min-max per image by definition) or no
colour scale, and keep their own figures.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

Range = tuple[float, float]


def _finite(values) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    return values[np.isfinite(values)]


def _activation_range(arrays, params) -> Range | None:
    """Conv feature maps: (min(0, smallest), largest) activation, as render_conv_feature_maps."""
    finite = _finite(arrays["maps"])
    if not finite.size:
        return None
    return min(0.0, float(finite.min())), float(finite.max())


def _overlay_range(key: str) -> Callable:
    """Overlays with per-layer normalisation: (0, largest value); per-map / absolute
    normalisation set their own scale, so nothing is shared."""
    def value_range(arrays, params) -> Range | None:
        if str(getattr(params, "normalization", "per_layer")) != "per_layer":
            return None
        finite = _finite(arrays[key])
        return (0.0, float(finite.max())) if finite.size and finite.max() > 0 else None
    return value_range


RANGES: dict[str, Callable] = {
    "conv_feature_maps": _activation_range,
    "primary_heatmaps": _overlay_range("lengths"),
    "rpv": _overlay_range("maps"),
}


def shared_range(technique: str, params, results) -> Range | None:
    """The union of the value ranges of `results` (stored arrays, one per step) of
    `technique`; None when the technique has no data-set scale or nothing to scale."""
    find = RANGES.get(technique)
    if find is None:
        return None
    ranges = [r for r in (find(arrays, params) for arrays in results) if r is not None]
    if not ranges:
        return None
    return min(r[0] for r in ranges), max(r[1] for r in ranges)
