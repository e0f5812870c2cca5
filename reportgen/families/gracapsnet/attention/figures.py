"""Drawings of GraCapsNet's built-in explanation (reportgen.families.gracapsnet.attention): grid
maps placed on the input by receptive field, like Routing Path Visualization."""

from __future__ import annotations

import numpy as np

from reportgen.figures.figure import Figure, RenderContext
from reportgen.figures.panel_kit import (class_name, last_rf, overlay_figure, png_figure)


def render(result, params, ctx: RenderContext) -> list[Figure]:
    maps = np.asarray(result["maps"], dtype=np.float64)                   # (K, gh, gw)
    heads = np.asarray(result["head_maps"], dtype=np.float64)             # (L, gh, gw)
    predicted = int(np.asarray(result["predicted"]).reshape(-1)[0])
    classes, gh, gw = maps.shape
    labels = [class_name(ctx, k) for k in range(classes)]
    canvas, where, norm, cmap, alpha = overlay_figure("attention", maps, labels, ctx,
                                                       last_rf(ctx), params)
    caption = (f"Where GraCapsNet takes the evidence for each class from: its own attention over "
               f"the capsule grid. Details: "
               f"GraCapsNet's built-in explanation (Gu, Wu & Tresp 2021): for each class, the "
               f"graph-pooling attention over the {gh}x{gw} primary-capsule grid averaged over "
               f"the {len(heads)} heads (each class's map sums to 1 over the grid), one panel per "
               f"class, {where}, as a {cmap} overlay ({alpha:.0%} opacity) on the grayscale "
               f"input. Normalisation: {norm}.")
    figures = [png_figure("explanation.png", canvas, caption)]
    name = labels[predicted] if 0 <= predicted < classes else str(predicted)
    canvas, where, norm, cmap, alpha = overlay_figure(
        "attention", heads, [f"head {h}" for h in range(len(heads))], ctx, last_rf(ctx), params)
    caption = (f"Each attention head's map for the predicted class {name}. Details: "
               f"GraCapsNet attention Att^l of the predicted class {name} for each of the "
               f"{len(heads)} heads (one head per primary-capsule type), {where}, {cmap} overlay "
               f"({alpha:.0%} opacity). Normalisation: {norm}. Their mean is the class's panel "
               f"of the explanation.")
    figures.append(png_figure("heads.png", canvas, caption))
    return figures
