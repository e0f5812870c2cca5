"""Drawings of the routing-weight maps (reportgen.techniques.routing_weights): one small map per
parent type or class, each placed over the input by the children's receptive field exactly as
the capsule heatmaps are (reportgen.figures.panel_kit's overlays), on one colour scale shared by the
figure's maps; the predicted class framed. What the weights are is said in the model's own words
(its layer's RoutingWeights)."""

from __future__ import annotations

import numpy as np

from reportgen.figures.colormaps import fmt
from reportgen.figures.figure import Figure, RenderContext
from reportgen.figures.panel_kit import (HIGHLIGHT, OVERLAY_LEVELS, class_name, colorbar, columns,
                                         compose, mosaic, normalise, outline, overlay_tiles,
                                         png_figure)
from reportgen.techniques.routing_weights.numbers import (MAPS, PREDICTED, layer_and_parents,
                                                          layer_name, parents_are_classes,
                                                          positions_per_cell, sums_words)

CMAP = "viridis"
ALPHA = 0.5


def render(result, params, ctx: RenderContext) -> list[Figure]:
    """One panel per parent type (class, or capsule type of the next grid layer): the mean
    routing weight from each child grid cell, placed by receptive field; one shared scale."""
    maps = np.asarray(result[MAPS], dtype=np.float64)                    # (gh, gw, P)
    predicted = int(np.asarray(result[PREDICTED]).reshape(-1)[0])
    gh, gw, parents = maps.shape
    description = ctx.description
    name = layer_name(description, str(getattr(params, "layer", "") or ""))
    layer, after = layer_and_parents(description, name)
    routing = layer.routing
    w = routing.symbol
    classes = parents_are_classes(after)
    if classes:
        labels = [class_name(ctx, k) for k in range(parents)]
        marked = np.arange(parents) == predicted
        labels = [[(text, HIGHLIGHT)] if mark else text for text, mark in zip(labels, marked)]
    else:
        labels = [f"type {p}" for p in range(parents)]
        marked = np.zeros(parents, dtype=bool)
    values, vmin, vmax, bar_label, norm = normalise(np.moveaxis(maps, -1, 0), "per_layer",
                                                     f"mean {w}_ij")
    field = layer.receptive_field.rows if layer.receptive_field is not None else None
    tiles, where = overlay_tiles(values, ctx, field, CMAP, ALPHA)
    outline(tiles, marked, HIGHLIGHT, 2 if min(tiles.shape[1:3]) >= 24 else 1)
    tiled = mosaic(tiles, columns(len(tiles), 10), gutter=4, above=labels)
    bar = colorbar(CMAP, vmin, vmax, bar_label, width=min(240, tiled.array.shape[1]),
                    levels=OVERLAY_LEVELS)
    target = "class" if classes else f"{after.name} capsule type"
    seen = np.isfinite(maps).any(axis=-1)
    over = ""
    uniform = f" Uniform routing would give 1/{parents} = {fmt(1 / parents)} everywhere." \
        if classes and routing.sums_over == "parents" else ""
    if not classes:
        n = positions_per_cell(description, name)
        few, many = int(n[n > 0].min()), int(n.max())
        over = (f" and over the n {after.name} positions whose window sees the cell "
                f"(n = {few}" + (f" … {many}" if many > few else "") + ")")
        if routing.sums_over == "parents":
            uniform = (f" Uniform routing would give 1/({parents} n) at a cell, so cells seen "
                       f"by fewer windows read higher whatever the routing.") if many > few \
                else f" Uniform routing would give 1/{parents * many} everywhere."
    caption = (f"Where on the image the {routing.words} into each {target} come from: the mean "
               f"{w}_ij from the {layer.name} capsules at each place. Details: "
               f"Routing weights {w}_ij, the {routing.words}, from the {layer.types} capsule "
               f"types of {layer.name} ({gh}x{gw} grid) into "
               + (f"the {parents} class capsules" if classes else
                  f"the {parents} capsule types of {after.name} "
                  f"({after.grid[0]}x{after.grid[1]} grid)")
               + f"; {sums_words(layer, after)}. One panel per {target}: at each grid cell, the "
               f"mean {w}_ij over the cell's {layer.types} capsule types{over}, {where}, as a "
               f"{CMAP} overlay ({ALPHA:.0%} opacity) on the grayscale input.{uniform}"
               + ("" if seen.all() else " Cells no window sees are left uncoloured.")
               + (f" Predicted class {class_name(ctx, predicted)} framed." if classes else "")
               + f" Normalisation: {norm}.")
    return [png_figure("routing_weights.png", compose([tiled, bar]), caption)]
