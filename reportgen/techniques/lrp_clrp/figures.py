"""LRP beside CLRP1 and CLRP2 for an input's two top classes (reportgen.techniques.lrp_clrp)."""

from __future__ import annotations

import numpy as np

from reportgen.figures.colormaps import DIVERGING, apply_diverging
from reportgen.figures.figure import Figure, RenderContext
from reportgen.figures.panel_kit import (BASE_LEVELS, class_name, colorbar, compose, gray, mosaic,
                                         png_figure, rgb, text_block, tile_factor, upscale)
from reportgen.techniques.lrp_clrp.numbers import LABELS, UNSUPPORTED, VARIANTS, supported

TARGET = 84          # tile width (px) the maps are enlarged towards


def _number(value: float) -> str:
    return "n/a" if not np.isfinite(value) else f"{value:.2f}"


def render_lrp_clrp(result, params, ctx: RenderContext) -> list[Figure]:
    """Rows: the top class and the runner-up; columns: the input, LRP, CLRP1, CLRP2 (each map
    on its own symmetric scale: red = relevance for the class, blue = against)."""
    if not supported(result):
        sheet = compose([text_block([UNSUPPORTED[:80].rsplit(" ", 1)[0], "(see the caption)"])])
        return [png_figure("lrp_clrp.png", sheet,
                           f"No LRP map for this network. Details: {UNSUPPORTED}.")]
    maps = np.asarray(result["maps"], np.float64)                  # (2, 3, H, W)
    classes = np.asarray(result["classes"], np.int64)
    scores = np.asarray(result["scores"], np.float64)
    disc = np.asarray(result["discriminativeness"], np.float64)    # (3,)
    height, width = maps.shape[2:]
    scale = tile_factor(ctx, max(height, width), TARGET)
    image = ctx.image if ctx.image is not None else np.zeros((height, width, 1))
    base = upscale(rgb(gray(image)[:, :, None], BASE_LEVELS), scale)
    tiles, above = [], []
    for k in range(2):
        name = class_name(ctx, int(classes[k]))
        tiles.append(base)
        above.append(f"{'top' if k == 0 else '2nd'}: {name} ({scores[k]:.2f})")
        for v, variant in enumerate(VARIANTS):
            coloured, _ = apply_diverging(maps[k, v])
            tiles.append(upscale(coloured, scale))
            above.append(f"{LABELS[variant]}, {name}")
    sheet = mosaic(np.stack(tiles), 4, gutter=6, above=above)
    words = ", ".join(f"{LABELS[v]} {_number(disc[i])}" for i, v in enumerate(VARIANTS))
    blocks = [sheet, text_block(f"1 - cos of the two maps: {words}"),
              colorbar(DIVERGING, -1.0, 1.0, "relevance / max |relevance| of each map",
                       width=min(220, sheet.array.shape[1]))]
    first, second = (class_name(ctx, int(c)) for c in classes)
    caption = (f"Which pixels speak for class {first} and for the runner-up {second}: LRP "
               f"beside contrastive LRP; how different the two classes' maps are, 1 - cosine, "
               f"is {words}. Details: Layer-wise relevance propagation of each class's logit "
               f"(the number beside the class; z^beta rule on the first layer for inputs in "
               f"[0, 1], z+ on the higher layers, max pooling winner-takes-all; Bach et al. "
               f"2015, Montavon et al. 2017). CLRP1 = max(0, R_class - R_others): the dual "
               f"explains the other classes, seeded with S_y / (K - 1) each; CLRP2 = max(0, "
               f"R_class - R_negated): the dual is the class's last-layer weights negated (Gu, "
               f"Yang & Tresp 2018). Relevance summed over the channels; each map on its own "
               f"symmetric scale (red for the class, blue against it, white 0). 1 - cosine is "
               f"0 when the two classes' maps are the same up to scale and n/a when a map is "
               f"all zero.")
    return [png_figure("lrp_clrp.png", compose(blocks), caption)]
