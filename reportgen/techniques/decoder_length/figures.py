"""The decoder's row of reconstructions by capsule length (reportgen.techniques.decoder_length)."""

from __future__ import annotations

import numpy as np

from reportgen.figures.colormaps import COLOUR_LEVELS, fmt
from reportgen.figures.figure import Figure, RenderContext
from reportgen.figures.panel_kit import (class_name, compose, factor, mosaic, png_figure, rgb,
                                         upscale)


def render_decoder_length(result, params, ctx: RenderContext) -> list[Figure]:
    """A row of reconstructions from the target capsule rescaled to lengths p."""
    images = np.asarray(result["images"], dtype=np.float64)               # (P, H, W, C)
    lengths = np.asarray(result["lengths"], dtype=np.float64).reshape(-1)
    target = int(np.asarray(result["target"]).reshape(()))
    name = class_name(ctx, target)
    height, width = images.shape[1:3]
    tiles = upscale(rgb(images, COLOUR_LEVELS), factor(max(height, width), 56))
    tiled = mosaic(tiles, len(tiles), gutter=3, below=[f"p={fmt(p)}" for p in lengths])
    blocks = [tiled]
    caption = (f"How the decoder draws class {name} as its capsule grows from length 0 to 1. "
               f"Details: "
               f"Decoder, capsule length: the class {name} capsule's vector rescaled to lengths "
               f"p = {fmt(lengths[0])} … {fmt(lengths[-1])} (x ← x·p/|x|), all other class "
               f"capsules masked, then reconstructed ({len(lengths)} images; pixel values "
               f"clipped to 0 … 1, no normalisation).")
    return [png_figure("decoder_length.png", compose(blocks), caption)]
