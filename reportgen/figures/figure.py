"""The data types between a technique's numbers and its drawings: Figure and RenderContext.

Techniques return Figures from `render` and receive a RenderContext; the drawing modules of
reportgen.figures build them. Both live here so that figures never import techniques.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from reportgen.errors import ReportgenError

if TYPE_CHECKING:
    from reportgen.capsnet.description import ModelDescription, ReceptiveField


@dataclass(frozen=True)
class Figure:
    """One drawn file of a result. `kind` is "png" (site) or "svg"/"pdf" (paper figure)."""

    name: str             # file-name-safe, unique within one result, e.g. "heatmaps.png"
    data: bytes
    kind: str = "png"
    caption: str = ""     # what it shows: technique, options, normalisation
    # layout size in CSS pixels (the page's img tags); a plot's PNG holds PIXEL_RATIO times as
    # many pixels each way (reportgen.figures.plots), an image mosaic's exactly these
    width: int = 0
    height: int = 0


@dataclass(frozen=True)
class RenderContext:
    """What a renderer may know besides the arrays: labels for captions and axes, the input
    image for overlays, and the model's description for the geometry of its grids.

    `receptive_fields` ((start, size, stride) along the rows, per conv layer) and
    `conv_layer_names` are filled from `description` when it is given; they can still be given
    directly (older callers, and tests of drawings without a model).
    """

    model: str
    step: str
    class_names: tuple[str, ...]
    input_label: str = ""                     # e.g. "test #12 (rot90)"; "" for checkpoint scope
    image: np.ndarray | None = None           # the input image (H, W, C) in [0, 1], for overlays
    receptive_fields: tuple[tuple[int, int, int], ...] = ()   # (start, size, stride) per conv layer
    conv_layer_names: tuple[str, ...] = ()
    description: ModelDescription | None = None
    # A colour scale (vmin, vmax) fixed by the caller, e.g. one scale shared by every step of
    # the training filmstrip (reportgen/figures/shared_scale.py); None: the figure's own.
    value_range: tuple[float, float] | None = None
    # A frame of the training filmstrip (a strip of every step): grids and overlays drawn at
    # their natural size, one pixel per cell or input pixel, where a step's own figure enlarges
    # them; the strip's frames are small beside each other and the site keeps one per step.
    thumbnail: bool = False
    # The classes the input is known to show (one, or two overlapping digits); () if unknown.
    true_classes: tuple[int, ...] = ()
    # Classes the model names per image: 2 for overlapping digits (MultiMNIST), whose two
    # highest scores are its prediction.
    labels_per_image: int = 1

    def __post_init__(self):
        if self.description is None:
            return
        convs = self.description.conv_layers
        if not self.receptive_fields:
            object.__setattr__(self, "receptive_fields",
                               tuple(c.receptive_field.rows for c in convs))
        if not self.conv_layer_names:
            object.__setattr__(self, "conv_layer_names", tuple(c.name for c in convs))

    def receptive_field(self, layer: str | None = None) -> ReceptiveField | None:
        """The receptive field of `layer`'s grid cells (the primary capsules' for None), from
        the description; None when unknown (no description, or a layer without a grid)."""
        if self.description is None:
            return None
        if layer is None:
            primary = self.description.primary_capsules
            return None if primary is None else primary.receptive_field
        try:
            return self.description.receptive_field(layer)
        except ReportgenError:   # an unknown layer: the caller falls back to a plain stretch
            return None
