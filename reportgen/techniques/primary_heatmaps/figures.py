"""The capsule-type heatmaps on the input (reportgen.techniques.primary_heatmaps)."""

from __future__ import annotations

import numpy as np

from reportgen.figures.figure import Figure, RenderContext
from reportgen.figures.panel_kit import get, last_rf, overlay_figure, png_figure


def _capsule_grid(ctx: RenderContext, layer: str):
    """(title words, quantity, receptive field rows) of capsule layer `layer` ("" = the primary
    capsules): matrix capsules (Hinton et al. 2018) show logistic activations, vector capsules
    their lengths."""
    description = ctx.description
    found = None
    if description is not None:
        name = layer or (description.primary_capsules.name
                         if description.primary_capsules is not None else "")
        found = next((c for c in description.capsule_layers if c.name == name), None)
    logistic = found is not None and found.activation == "logistic"
    words = "Primary-capsule" if not layer or (
        description is not None and found is description.primary_capsules) else f"{layer}"
    field = found.receptive_field.rows if found is not None and found.receptive_field \
        else (last_rf(ctx) if not layer else None)
    return words, "capsule activation" if logistic else "capsule length", field


def render_primary_heatmaps(result, params, ctx: RenderContext) -> list[Figure]:
    """One panel per capsule type: the layer's activation map (capsule lengths, or matrix
    capsules' logistic activations) placed on the gray input by receptive field, as a
    semi-transparent overlay; one shared scale unless per_map / absolute."""
    lengths = np.asarray(result["lengths"], dtype=np.float64)             # (gh, gw, T)
    gh, gw, types = lengths.shape
    grids = np.moveaxis(lengths, -1, 0)
    labels = [f"type {t}" for t in range(types)]
    words, quantity, field = _capsule_grid(ctx, str(get(params, "layer", "")))
    canvas, where, norm, cmap, alpha = overlay_figure(quantity, grids, labels, ctx, field,
                                                       params)
    caption = (f"Where each capsule type is active, drawn over the part of the image it sees. "
               f"Details: "
               f"{words} heatmaps: the {gh}x{gw} grid of {quantity}s of each of the "
               f"{types} capsule types, {where}, as a {cmap} overlay ({alpha:.0%} opacity) on the "
               f"grayscale input. Normalisation: {norm}.")
    return [png_figure("primary_heatmaps.png", canvas, caption)]
