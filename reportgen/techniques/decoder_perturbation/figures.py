"""The decoder's dimension-perturbation grid and its difference from the unperturbed
reconstruction (reportgen.techniques.decoder_perturbation)."""

from __future__ import annotations

import numpy as np

from reportgen.figures.colormaps import (COLOUR_LEVELS, DIVERGING, FONT_SIZE, apply_diverging, fmt,
                                         text_size)
from reportgen.figures.figure import Figure, RenderContext
from reportgen.figures.panel_kit import (MUTED, WHITE, Block, class_name, colorbar, compose,
                                         factor, grid, line_height, png_figure, rgb, upscale)


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
    """A grid of tiles (D, S, h, w, 3) with δ above the columns and dimensions left of rows;
    a column is as wide as its widest δ label, so neighbouring labels never run together."""
    gutter = 2
    size = FONT_SIZE
    th, tw = tiles.shape[2:4]
    labels = [_delta_label(d) for d in deltas]
    cell_w = max(tw, max(text_size(t, size)[0] for t in labels) + 6)
    cells = np.full((*tiles.shape[:2], th, cell_w, 3), WHITE, dtype=np.uint8)
    x0 = (cell_w - tw) // 2
    cells[:, :, :, x0:x0 + tw] = tiles
    table = grid(cells, gutter)
    lh = line_height(size)
    label_w = text_size(f"dim {dims - 1}", size)[0] + 8
    header = lh + 4
    array = np.full((header + table.shape[0], label_w + table.shape[1], 3), WHITE, dtype=np.uint8)
    array[header:, label_w:] = table
    texts = [(label_w + s * (cell_w + gutter) + cell_w / 2, 0, t, "center", texts_colour, size)
             for s, t in enumerate(labels)]
    texts += [(label_w - 6, header + d * (th + gutter) + (th - lh) // 2, f"dim {d}", "right",
               None, size) for d in range(dims)]
    return Block(array, texts)


def _titled(label: str, block: Block) -> Block:
    title_h = line_height() + 2
    array = np.full((title_h + block.array.shape[0], block.array.shape[1], 3), WHITE,
                    dtype=np.uint8)
    array[title_h:] = block.array
    return Block(array, [(0, 0, label, "left", None),
                         *((tx, ty + title_h, *rest) for tx, ty, *rest in block.texts)])


def render_decoder_perturbation(result, params, ctx: RenderContext) -> list[Figure]:
    """D rows (dimensions) x S columns (offsets δ) of reconstructions, and in a second figure
    each one's signed difference from the unperturbed reconstruction on one diverging scale.
    Two figures, not two grids abreast: side by side they were too wide for a page's labels to
    print at a legible size (reportgen.figures.print_size)."""
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
    how = (f"δ ∈ {{{offsets}}} added to one of the {dims} dimensions of the class {name} "
           f"capsule at a time (rows: dimension; columns: δ), other class capsules masked, then "
           f"reconstructed (pixel values clipped to 0 … 1")
    caption = (f"What each of the {dims} dimensions of the class {name} capsule changes in the "
               f"reconstruction. Details: Decoder, dimension perturbation: {how}, no "
               f"normalisation).")
    figures = [png_figure("decoder_perturbation.png",
                          compose([_titled("reconstruction", recon)]),
                          caption + ("" if found is not None else
                                     " No difference image: δ = 0 (the unperturbed "
                                     "reconstruction) is not among the offsets."))]
    if found is None:
        return figures
    difference, vmax = found
    colours, vmax = apply_diverging(difference, vmax if vmax > 0 else 1.0)
    diff = _titled("minus the unperturbed (delta 0)",
                   _perturbation_sheet(upscale(colours, scale), deltas, dims))
    bar = colorbar(DIVERGING, -vmax, vmax, "difference from the unperturbed reconstruction",
                   width=min(240, diff.array.shape[1]))
    channels = " averaged over colour channels" if images.shape[-1] > 1 else ""
    difference_caption = (
        f"How far each reconstruction of the dimension perturbation of the class {name} "
        f"capsule is from the unperturbed one. Details: Decoder, dimension perturbation: "
        f"{how}); each reconstruction minus the unperturbed one (δ = 0), pixel values as "
        f"shown{channels}, {DIVERGING} (red brighter, blue darker), one scale for the whole "
        f"grid: ±{fmt(vmax)} = the largest absolute difference.")
    figures.append(png_figure("decoder_perturbation_difference.png", compose([diff, bar]),
                              difference_caption))
    return figures
