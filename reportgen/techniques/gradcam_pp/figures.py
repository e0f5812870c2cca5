"""The Grad-CAM++ overlay (reportgen.techniques.gradcam_pp)."""

from __future__ import annotations

import numpy as np

from reportgen.figures.figure import Figure, RenderContext
from reportgen.figures.panel_kit import (BASE_LEVELS, OVERLAY_LEVELS, class_name, colorbar, compose,
                                         get, gray, input_hw, mosaic, overlay_tiles, png_figure,
                                         rgb, upscale)


def _gradient_words(ctx: RenderContext) -> str:
    """What the model's class gradients are taken of (reportgen.capsnet.model_words); "the
    class score" without a description."""
    from reportgen.capsnet import model_words

    return "the class score" if ctx.description is None else \
        model_words.gradient_words(ctx.description)


def _layer_rf(ctx: RenderContext, layer: str, grid_hw, input_hw):
    """The receptive field of `layer`; else the only one giving `grid_hw` on the input."""
    field = ctx.receptive_field(layer) if layer else None
    if field is not None:
        return field.rows
    names = list(ctx.conv_layer_names or ())
    fields = list(ctx.receptive_fields or ())
    if layer in names and names.index(layer) < len(fields):
        return tuple(fields[names.index(layer)])
    matches = [tuple(f) for f in fields
               if all((n - f[0] - f[1]) // f[2] + 1 == g for n, g in zip(input_hw, grid_hw))]
    return matches[0] if len(set(matches)) == 1 else None


def render_gradcam_pp(result, params, ctx: RenderContext) -> list[Figure]:
    """Grad-CAM++ map of a conv layer placed on the input by that layer's receptive field."""
    cam = np.asarray(result["map"], dtype=np.float64)                     # (h, w) in [0, 1]
    gh, gw = cam.shape
    layer = str(get(params, "layer", ""))
    image_hw = input_hw(ctx, (gh, gw), None) if ctx.image is not None else (gh, gw)
    rf = _layer_rf(ctx, layer, (gh, gw), image_hw) if ctx.image is not None else None
    cmap = str(get(params, "colormap", "viridis"))
    alpha = float(get(params, "alpha", 0.5))
    target = result.get("target", get(params, "target", get(params, "class_index", None)))
    for_class = ""
    if target is not None and np.asarray(target).size == 1 and int(np.asarray(target)) >= 0:
        for_class = f" for class {class_name(ctx, int(np.asarray(target)))}"
    overlay, where = overlay_tiles(np.clip(cam, 0.0, 1.0)[None], ctx, rf, cmap, alpha, target=84)
    panels = [overlay[0]]
    labels = [f"Grad-CAM++ on {layer or 'conv layer'}"]
    if ctx.image is not None:
        base = upscale(rgb(gray(ctx.image)[:, :, None], BASE_LEVELS),
                        overlay.shape[1] // ctx.image.shape[0])
        if base.shape == overlay[0].shape:
            panels.insert(0, base)
            labels.insert(0, "input (grayscale)")
    tiled = mosaic(np.stack(panels), len(panels), gutter=8, above=labels)
    blocks = [tiled, colorbar(cmap, 0.0, 1.0, "Grad-CAM++ (min-max per image)",
                                width=min(200, tiled.array.shape[1]), levels=OVERLAY_LEVELS)]
    caption = (f"Where the network looks for the class, from the gradients at layer "
               f"{layer or '(unnamed)'}. Details: "
               f"Grad-CAM++{for_class} from layer {layer or '(unnamed)'} ({gh}x{gw} map, gradients "
               f"of {_gradient_words(ctx)}), {where}, as a {cmap} overlay ({alpha:.0%} "
               f"opacity) on the grayscale input. Normalisation: min-max per image (0 … 1).")
    return [png_figure("gradcam_pp.png", compose(blocks), caption)]
