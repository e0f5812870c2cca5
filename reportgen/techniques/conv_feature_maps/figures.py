"""The feature-map mosaic of a conv layer (reportgen.techniques.conv_feature_maps)."""

from __future__ import annotations

import numpy as np

from reportgen.figures.colormaps import apply_colormap, fmt
from reportgen.figures.figure import Figure, RenderContext
from reportgen.figures.panel_kit import (DEAD, colorbar, columns, compose, get, mosaic, outline,
                                         png_figure, tile_factor, upscale)


def render_conv_feature_maps(result, params, ctx: RenderContext) -> list[Figure]:
    """Mosaic of every filter's activation map of one conv layer on one shared scale; dead
    filters (all zero) outlined in red."""
    maps = np.asarray(result["maps"], dtype=np.float64)                   # (h, w, F)
    h, w, count = maps.shape
    dead = np.asarray(result.get("dead", np.zeros(count)), dtype=bool).reshape(-1)
    if dead.shape[0] != count:
        dead = np.zeros(count, dtype=bool)
    layer = str(get(params, "layer", ""))
    cmap = str(get(params, "colormap", "viridis"))
    finite = maps[np.isfinite(maps)]
    vmin = min(0.0, float(finite.min())) if finite.size else 0.0
    vmax = float(finite.max()) if finite.size else 0.0
    if ctx.value_range is not None:                   # one scale for several steps
        vmin, vmax = (float(v) for v in ctx.value_range)
    if vmax <= vmin:
        vmax = vmin + 1.0
    values = (np.moveaxis(maps, -1, 0) - vmin) / (vmax - vmin)            # (F, h, w)
    # maps of 20 x 20 and more at one pixel per activation (a step draws 2 x 16 of these
    # mosaics per input; the page can zoom), smaller ones enlarged to about that size
    tiles = upscale(apply_colormap(values, cmap), tile_factor(ctx, max(h, w), 20))
    outline(tiles, dead, DEAD, 2 if min(tiles.shape[1:3]) >= 12 else 1)
    cols = columns(count, 16)
    tiled = mosaic(tiles, cols, gutter=2)
    n_dead = int(dead.sum())
    name = layer or "conv layer"
    blocks = [tiled, colorbar(cmap, vmin, vmax, "activation (shared scale for the layer)",
                                width=min(240, tiled.array.shape[1]))]
    caption = (f"What each filter of {name} responds to in this image, brightest where it fires. "
               f"Details: "
               f"Conv feature maps of {name}: the {'post-ReLU ' if vmin >= 0 else ''}activation of "
               f"all {count} filters ({h}x{w} each, filter 0 top-left, row by row, {cols} per "
               f"row), "
               f"{cmap}; one shared scale for the layer, "
               + (f"{fmt(vmin)} … {fmt(vmax)} = the range over every step shown"
                  if ctx.value_range is not None else
                  f"0 … {fmt(vmax)} = the maximum over this layer for this image")
               + f". {n_dead} of {count} filters dead (all zero)"
               f"{', outlined in red' if n_dead else ''}.")
    return [png_figure("feature_maps.png", compose(blocks), caption)]
