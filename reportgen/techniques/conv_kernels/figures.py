"""The kernel mosaic of a conv layer (reportgen.techniques.conv_kernels)."""

from __future__ import annotations

import numpy as np

from reportgen.figures.colormaps import DIVERGING, apply_diverging, fmt
from reportgen.figures.figure import Figure, RenderContext
from reportgen.figures.panel_kit import (colorbar, columns, compose, factor, get, mosaic,
                                         png_figure, title, upscale)


def render_conv_kernels(result, params, ctx: RenderContext) -> list[Figure]:
    """Mosaic of a conv layer's kernels, diverging colours symmetric around zero."""
    kernels = np.asarray(result["kernels"], dtype=np.float64)             # (k, k, in, F)
    kh, kw, channels, count = kernels.shape
    mean = kernels.mean(axis=2) if channels > 1 else kernels[:, :, 0]
    rgb, vmax = apply_diverging(np.moveaxis(mean, -1, 0), name=DIVERGING)
    tiles = upscale(rgb, factor(max(kh, kw), 36))
    cols = columns(count, 16)
    tiled = mosaic(tiles, cols, gutter=2)
    layer = str(get(params, "layer", "")) or "conv layer"
    averaged = f", mean over its {channels} input channels" if channels > 1 else ""
    bar_label = "weight" + (f" (mean over {channels} input channels)" if channels > 1 else "")
    blocks = [title(f"Kernels of {layer} ({count} filters, {kh}x{kw}{averaged})"), tiled,
              colorbar(DIVERGING, -vmax, vmax, bar_label, width=min(240, tiled.array.shape[1]))]
    caption = (f"The learned weights of each {layer} filter: red positive, blue negative. "
               f"Details: "
               f"Conv kernels of {layer}: {count} filters of {kh}x{kw}{averaged}; {DIVERGING} "
               f"colours symmetric around zero (negative blue, zero white, positive red), one "
               f"scale for the layer: ±{fmt(vmax)} = the largest absolute weight shown.")
    return [png_figure("kernels.png", compose(blocks), caption)]
