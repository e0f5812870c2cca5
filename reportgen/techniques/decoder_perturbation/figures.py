"""The decoder's dimension-perturbation grid and its difference from the unperturbed
reconstruction (reportgen.techniques.decoder_perturbation)."""

from __future__ import annotations

import numpy as np

from reportgen.figures.colormaps import (COLOUR_LEVELS, DIVERGING, FONT_SIZE, apply_diverging, fmt,
                                         text_size)
from reportgen.figures.figure import Figure, RenderContext
from reportgen.figures.panel_kit import (GAP, MUTED, WHITE, Block, class_name, colorbar, compose,
                                         factor, grid, line_height, png_figure, rgb, side_by_side,
                                         upscale)


def _delta_label(d: float) -> str:
    text = fmt(d)
    return text if text.startswith("-") or text == "0" else "+" + text


def perturbation_difference(images: np.ndarray, deltas: np.ndarray):
    """(difference, vmax) of a perturbation grid: each reconstruction minus the unperturbed one
    (the δ = 0 column; every dimension's is the same image), on pixel values clipped to 0 … 1
    as shown and averaged over colour channels, (D, S, H, W); vmax = the largest |difference|
    of the whole grid (one symmetric scale). None when δ = 0 is not among the offsets."""
    deltas = np.asarray(deltas, dtype=np.float64).reshape(-1)
    zero = np.flatnonzero(deltas == 0.0)
    if zero.size == 0:
        return None
    shown = np.clip(np.asarray(images, dtype=np.float64), 0.0, 1.0)      # (D, S, H, W, C)
    base = shown[0, zero[0]]
    difference = (shown - base[None, None]).mean(axis=-1)
    vmax = float(np.max(np.abs(difference))) if difference.size else 0.0
    return difference, vmax


def _perturbation_sheet(tiles, deltas, dims, texts_colour=MUTED) -> Block:
    """A grid of tiles (D, S, h, w, 3) with δ above the columns and dimensions left of rows."""
    gutter = 2
    table = grid(tiles, gutter)
    th, tw = tiles.shape[2:4]
    size = FONT_SIZE
    lh = line_height(size)
    label_w = text_size(f"dim {dims - 1}", size)[0] + 8
    header = lh + 4
    array = np.full((header + table.shape[0], label_w + table.shape[1], 3), WHITE, dtype=np.uint8)
    array[header:, label_w:] = table
    texts = [(label_w + s * (tw + gutter) + tw / 2, 0, _delta_label(d), "center", texts_colour,
              size) for s, d in enumerate(deltas)]
    texts += [(label_w - 6, header + d * (th + gutter) + (th - lh) // 2, f"dim {d}", "right",
               None, size) for d in range(dims)]
    return Block(array, texts)


def render_decoder_perturbation(result, params, ctx: RenderContext) -> list[Figure]:
    """D rows (dimensions) x S columns (offsets δ) of reconstructions, and beside them each
    one's signed difference from the unperturbed reconstruction on one diverging scale."""
    images = np.asarray(result["images"], dtype=np.float64)               # (D, S, H, W, C)
    deltas = np.asarray(result["deltas"], dtype=np.float64).reshape(-1)
    target = int(np.asarray(result["target"]).reshape(()))
    name = class_name(ctx, target)
    dims, steps, height, width = images.shape[:4]
    # one pixel per pixel: 2 x 176 tiles upscaled were most of a step's site weight and drawing
    # time; the page can enlarge them (image-rendering: pixelated)
    scale = factor(max(height, width), 24)
    recon = _perturbation_sheet(upscale(rgb(images, COLOUR_LEVELS), scale), deltas, dims)
    found = perturbation_difference(images, deltas)
    offsets = ", ".join(_delta_label(d) for d in deltas)
    caption = (f"What each of the {dims} dimensions of the class {name} capsule changes in the "
               f"reconstruction. Details: "
               f"Decoder, dimension perturbation: δ ∈ {{{offsets}}} added to one of the {dims} "
               f"dimensions of the class {name} capsule at a time "
               f"(rows: dimension; columns: δ), other class capsules masked, then reconstructed "
               f"(pixel values clipped to 0 … 1, no normalisation).")
    if found is None:
        blocks = [recon]
        caption += " No difference image: δ = 0 (the unperturbed reconstruction) is not among the offsets."
    else:
        difference, vmax = found
        colours, vmax = apply_diverging(difference, vmax if vmax > 0 else 1.0)
        diff = _perturbation_sheet(upscale(colours, scale), deltas, dims)
        title_h = line_height() + 2
        labelled = []
        for label, block in (("reconstruction", recon), ("minus the unperturbed (delta 0)", diff)):
            array = np.full((title_h + block.array.shape[0], block.array.shape[1], 3), WHITE,
                            dtype=np.uint8)
            array[title_h:] = block.array
            texts = [(0, 0, label, "left", None)]
            texts += [(tx, ty + title_h, *rest) for tx, ty, *rest in block.texts]
            labelled.append(Block(array, texts))
        both = side_by_side(labelled)
        bar_w = min(240, diff.array.shape[1])
        bar = colorbar(DIVERGING, -vmax, vmax, "difference from the unperturbed reconstruction",
                        width=bar_w)
        row_w = max(both.array.shape[1], bar.array.shape[1])
        bar_row = np.full((bar.array.shape[0], row_w, 3), WHITE, dtype=np.uint8)
        # under the difference grid; as far right as fits when its label is wider
        x = max(0, min(labelled[0].array.shape[1] + 3 * GAP, row_w - bar.array.shape[1]))
        bar_row[:, x:x + bar.array.shape[1]] = bar.array
        blocks = [both, Block(bar_row, [(tx + x, ty, *rest) for tx, ty, *rest in bar.texts])]
        caption += (f" Right: each reconstruction minus the unperturbed one (δ = 0), pixel "
                    f"values as shown{' averaged over colour channels' if images.shape[-1] > 1 else ''}, "
                    f"{DIVERGING} (red brighter, blue darker), one scale for the whole grid: "
                    f"±{fmt(vmax)} = the largest absolute difference.")
    return [png_figure("decoder_perturbation.png", compose(blocks), caption)]
