"""The Routing Path Visualization overlays (reportgen.techniques.rpv)."""

from __future__ import annotations

import numpy as np

from reportgen.capsnet.description import one_hop_of_lengths
from reportgen.figures.figure import Figure, RenderContext
from reportgen.figures.panel_kit import class_name, get, last_rf, overlay_figure, png_figure


def render_rpv(result, params, ctx: RenderContext) -> list[Figure]:
    """Routing Path Visualization: one placed overlay per class."""
    maps = np.asarray(result["maps"], dtype=np.float64)                   # (K, gh, gw)
    classes, gh, gw = maps.shape
    method = str(get(params, "method", "modified"))
    description = ctx.description
    # the model's own routing weights' letter (c_ij of dynamic routing)
    c = description.routed_layers[-1].routing.symbol \
        if description is not None and description.routed_layers else "c"
    formula = f"l_i ({c}_ij l_j)^2" if method == "original" else f"l_i {c}_ij l_j"
    through = ""
    if description is not None and description.routed_layers \
            and not one_hop_of_lengths(description):
        # routing weights w (EM: assignments R) and activations a, hop by hop
        w = description.routed_layers[-1].routing.symbol
        formula = f"a_i prod ({w} a)^2" if method == "original" else f"a_i prod {w} a"
        through = (" summed over the paths through every convolutional capsule layer, one "
                   f"factor {w} a per hop,")
    labels = [class_name(ctx, k) for k in range(classes)]
    canvas, where, norm, cmap, alpha = overlay_figure("path strength m", maps, labels, ctx,
                                                       last_rf(ctx), params)
    caption = (f"Which parts of the image send their evidence to each class through routing "
               f"({method} method). Details: "
               f"Routing Path Visualization, {method} method (path strength m = {formula},"
               f"{through} mean "
               f"over all primary capsules at each of the {gh}x{gw} grid locations), one panel "
               f"per class, {where}, as a {cmap} overlay ({alpha:.0%} opacity) on the grayscale "
               f"input. Normalisation: {norm}.")
    return [png_figure("rpv.png", canvas, caption)]
