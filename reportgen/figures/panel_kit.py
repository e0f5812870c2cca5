"""What the figures of one input have in common: the sheet they are composed on, its palette
and the overlays on the input.

A technique's figures (reportgen/techniques/<name>/figures.py) draw with the signature
`render_X(result, params, ctx) -> list[Figure]`: `result` holds ONE image's arrays (batch axis
removed), `params` is the technique's options dataclass (or None; attributes are read with
`get`, with defaults) and `ctx` the RenderContext (class names, input image, receptive
fields). No TensorFlow here, and no matplotlib on the hot path: PNGs are NumPy mosaics with
Pillow text (drawing dominates the batched build time). A figure of one input holds the data
and its labels and scale, no title: the page's card heading and the caption name it (and a
step draws thousands of them, so a title line was a tenth of the site).

This module is shared drawing code: the figures' keys hold a technique's own drawing module
(reportgen.engine.code_identity), not this one, so an edit here that changes pixels bumps
FIGURES_VERSION (reportgen/pages/assemble.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from reportgen.figures.colormaps import (COLOUR_LEVELS, FONT_SIZE, apply_colormap, colorbar_array,
                                         draw_texts, fmt, quantise, text_size)
from reportgen.figures.encode import png_bytes
from reportgen.figures.figure import Figure, RenderContext
from reportgen.figures.placement import place_grid_at_centres, stretch_grid
from reportgen.figures.print_size import MIN_PRINTED_PT, TEXT_WIDTH_PT, caption_room_pt

WHITE = 255
MARGIN = 8
GAP = 6
TITLE_SIZE = FONT_SIZE + 1
HIGHLIGHT = (217, 95, 2)          # predicted class
BAR = (128, 152, 186)             # other classes
DEAD = (220, 20, 20)              # dead-filter outline
GRID_LINE = (225, 225, 225)
AXIS = (90, 90, 90)
MUTED = (110, 110, 110)
# The widest sheet whose FONT_SIZE labels print at MIN_PRINTED_PT or more: the supplement sets a
# figure wider than its line at the line's width, shrinking every pixel
# (reportgen.figures.print_size). Mosaics wrap onto more rows rather than grow wider.
PRINT_WIDTH = int(FONT_SIZE * TEXT_WIDTH_PT / MIN_PRINTED_PT)        # 690 px
# ... and the tallest, under a caption of 800 characters (the page's height less the caption)
PRINT_HEIGHT = int(FONT_SIZE * caption_room_pt(800) / MIN_PRINTED_PT)  # 740 px
# An overlay mixes the input's gray with the colormap: every pair is a colour. At these levels
# (the input's grays under it, the overlay's values) a figure keeps within an exact 256-colour
# palette: no lossy quantiser, which cost half a step's drawing time.
BASE_LEVELS = 8
OVERLAY_LEVELS = 33


# --- the sheet ---------------------------------------------------------------------------------

def get(params, name, default):
    value = getattr(params, name, default) if params is not None else default
    return default if value is None else value


def class_name(ctx: RenderContext, index: int) -> str:
    names = ctx.class_names or ()
    return str(names[index]) if 0 <= index < len(names) else str(index)


def gray(image: np.ndarray) -> np.ndarray:
    """(H, W) float in [0, 1] of an (H, W) / (H, W, C) image (luminance for colour)."""
    img = np.asarray(image, dtype=np.float64)
    if img.ndim == 3:
        img = img[:, :, 0] if img.shape[2] == 1 else img[:, :, :3] @ np.array([0.299, 0.587, 0.114])
    return np.clip(np.nan_to_num(img), 0.0, 1.0)


def rgb(images: np.ndarray, levels: int | None = None) -> np.ndarray:
    """uint8 RGB (..., H, W, 3) of float images (..., H, W, C) in [0, 1] (C = 1 → gray).
    `levels`: pixel values rounded to that many levels first (a model's drawings, e.g.
    reconstructions, as colormapped values are; the input images keep their own pixels)."""
    img = np.asarray(images, dtype=np.float64)
    if levels is not None:
        img = quantise(np.nan_to_num(img), levels)
    if img.shape[-1] == 1:
        img = np.repeat(img, 3, axis=-1)
    elif img.shape[-1] > 3:
        img = img[..., :3]
    return (np.clip(np.nan_to_num(img), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def upscale(tiles: np.ndarray, factor: int) -> np.ndarray:
    """Nearest-neighbour upscale of (..., h, w, 3) by an integer factor."""
    if factor <= 1:
        return tiles
    return np.repeat(np.repeat(tiles, factor, axis=-3), factor, axis=-2)


def factor(size: int, target: int) -> int:
    return max(1, int(math.ceil(target / max(1, size))))


def tile_factor(ctx: RenderContext, size: int, target: int) -> int:
    """How many times to enlarge tiles of `size` pixels towards `target`; a filmstrip frame
    (ctx.thumbnail) keeps them at their natural size."""
    return 1 if ctx.thumbnail else factor(size, target)


def columns(count: int, max_cols: int) -> int:
    if count <= max_cols:
        return max(1, count)
    return int(math.ceil(count / math.ceil(count / max_cols)))


def grid(tiles: np.ndarray, gutter: int) -> np.ndarray:
    """(R, C, h, w, 3) uint8 → one (R*h + (R-1)*g, C*w + (C-1)*g, 3) image with white gutters."""
    rows, cols, h, w, ch = tiles.shape
    padded = np.full((rows, cols, h + gutter, w + gutter, ch), WHITE, dtype=np.uint8)
    padded[:, :, :h, :w] = tiles
    out = padded.transpose(0, 2, 1, 3, 4).reshape(rows * (h + gutter), cols * (w + gutter), ch)
    return out[:rows * (h + gutter) - gutter, :cols * (w + gutter) - gutter]


def line_height(size: int = FONT_SIZE) -> int:
    return text_size("Ag", size)[1]


@dataclass
class Block:
    """An image block of a sheet, with its text items at block-relative positions."""

    array: np.ndarray
    texts: list = field(default_factory=list)
    align: str = "left"


def text_block(lines, size: int = FONT_SIZE, color=None, align: str = "left") -> Block:
    lines = [lines] if isinstance(lines, str) else list(lines)
    lh = line_height(size)
    width = max(text_size(line, size)[0] for line in lines) + 2
    array = np.full((lh * len(lines), width, 3), WHITE, dtype=np.uint8)
    texts = [(0, i * lh, line, "left", color, size) for i, line in enumerate(lines)]
    return Block(array, texts, align)


def compose(blocks: list[Block], gap: int = GAP, margin: int = MARGIN) -> np.ndarray:
    """Stack blocks vertically on a white sheet with margins, then draw all texts at once."""
    inner = max(b.array.shape[1] for b in blocks)
    height = sum(b.array.shape[0] for b in blocks) + gap * (len(blocks) - 1) + 2 * margin
    canvas = np.full((height, inner + 2 * margin, 3), WHITE, dtype=np.uint8)
    texts = []
    y = margin
    for b in blocks:
        h, w = b.array.shape[:2]
        x = margin + ((inner - w) // 2 if b.align == "center" else 0)
        canvas[y:y + h, x:x + w] = b.array
        texts.extend((tx + x, ty + y, *rest) for tx, ty, *rest in b.texts)
        y += h + gap
    return draw_texts(canvas, texts)


def png_figure(name: str, canvas: np.ndarray, caption: str) -> Figure:
    return Figure(name=name, data=png_bytes(canvas), kind="png", caption=caption,
                  width=int(canvas.shape[1]), height=int(canvas.shape[0]))


def label_lines(label) -> list[tuple[str, tuple | None]]:
    """A label is a str (may contain newlines) or a list of str / (str, rgb) lines."""
    if label is None:
        return []
    if isinstance(label, str):
        return [(line, None) for line in label.split("\n")]
    return [(item, None) if isinstance(item, str) else (item[0], item[1]) for item in label]


def fitting_columns(count: int, cols: int, cell_width: int, gutter: int,
                    room: int = PRINT_WIDTH - 2 * MARGIN) -> int:
    """At most `cols` columns of cells `cell_width` wide (rows as even as `columns` makes them)
    in `room` pixels; at least one."""
    fit = max(1, (room + gutter) // (cell_width + gutter))
    return columns(count, min(cols, fit)) if fit < cols else cols


def mosaic(tiles: np.ndarray, cols: int, gutter: int = 2, above=None, below=None) -> Block:
    """Tiles (N, h, w, 3) uint8 in rows of at most `cols`, each with optional label lines
    above/below; fewer columns where `cols` would be wider than PRINT_WIDTH."""
    n, h, w = tiles.shape[:3]
    above = [label_lines(a) for a in above] if above is not None else [[] for _ in range(n)]
    below = [label_lines(b) for b in below] if below is not None else [[] for _ in range(n)]
    lh = line_height()
    n_above = max((len(a) for a in above), default=0)
    n_below = max((len(b) for b in below), default=0)
    top = n_above * lh + (2 if n_above else 0)
    bottom = n_below * lh + (2 if n_below else 0)
    widest = max([text_size(t)[0] for lines in above + below for t, _ in lines] or [0])
    cell_w = max(w, widest + 4)
    cols = fitting_columns(n, cols, cell_w, gutter)
    rows = int(math.ceil(n / cols))
    cells = np.full((rows * cols, top + h + bottom, cell_w, 3), WHITE, dtype=np.uint8)
    x0 = (cell_w - w) // 2
    cells[:n, top:top + h, x0:x0 + w] = tiles
    array = grid(cells.reshape(rows, cols, *cells.shape[1:]), gutter)
    texts = []
    for i in range(n):
        r, c = divmod(i, cols)
        cx = c * (cell_w + gutter) + cell_w / 2
        y = r * (top + h + bottom + gutter)
        for j, (t, color) in enumerate(above[i]):
            texts.append((cx, y + j * lh, t, "center", color))
        for j, (t, color) in enumerate(below[i]):
            texts.append((cx, y + top + h + 2 + j * lh, t, "center", color))
    return Block(array, texts, "left")


def side_by_side(blocks: list[Block], gap: int = 3 * GAP) -> Block:
    """Blocks in one row, tops aligned, texts moved with their block."""
    height = max(b.array.shape[0] for b in blocks)
    width = sum(b.array.shape[1] for b in blocks) + gap * (len(blocks) - 1)
    array = np.full((height, width, 3), WHITE, dtype=np.uint8)
    texts, x = [], 0
    for b in blocks:
        h, w = b.array.shape[:2]
        array[:h, x:x + w] = b.array
        texts.extend((tx + x, ty, *rest) for tx, ty, *rest in b.texts)
        x += w + gap
    return Block(array, texts)


def colorbar(name, vmin, vmax, label, width=200, levels=COLOUR_LEVELS) -> Block:
    return Block(colorbar_array(name, vmin, vmax, label, width=width, levels=levels), [],
                  "center")


def title(text: str) -> Block:
    return text_block(text, size=TITLE_SIZE)


def outline(tiles: np.ndarray, which: np.ndarray, colour, thickness: int) -> None:
    """Draw a frame of `thickness` px inside the tiles selected by the bool mask `which`."""
    if not which.any():
        return
    t = thickness
    sel = tiles[which]
    sel[:, :t, :] = colour
    sel[:, -t:, :] = colour
    sel[:, :, :t] = colour
    sel[:, :, -t:] = colour
    tiles[which] = sel


def length_label(value: float) -> str:
    """A capsule length with at least 3 significant digits: 0.734, 0.0123, 0.000456 (lengths
    near zero early in training stay comparable instead of all reading 0.000)."""
    v = float(value)
    if v == 0.0 or not np.isfinite(v):
        return "0" if v == 0.0 else str(v)
    if abs(v) < 1e-4:
        return f"{v:.2e}"
    decimals = max(3, 2 - int(np.floor(np.log10(abs(v)))))
    return f"{v:.{decimals}f}"


# --- overlays on the input (primary heatmaps, RPV, Grad-CAM++) --------------------------------

def input_hw(ctx: RenderContext, grid_hw, rf) -> tuple[int, int]:
    if ctx.image is not None:
        return int(ctx.image.shape[0]), int(ctx.image.shape[1])
    if rf is not None:
        start, size, stride = rf
        return tuple(int(start + (g - 1) * stride + size) for g in grid_hw)
    return int(grid_hw[0]), int(grid_hw[1])


def normalise(grids: np.ndarray, normalization: str, quantity: str = "value",
               value_range=None):
    """(values in [0, 1], vmin, vmax, colour-bar label, caption phrase) for (N, gh, gw) grids;
    `value_range` (vmin, vmax): a scale fixed by the caller (per-layer normalisation only)."""
    g = np.asarray(grids, dtype=np.float64)
    finite = g[np.isfinite(g)]
    if value_range is not None and normalization == "per_layer":
        vmax = float(value_range[1]) if value_range[1] > 0 else 1.0
        return (g / vmax, 0.0, vmax, f"{quantity} (scale shared by all steps)",
                f"one scale shared by all steps shown: 0 … {fmt(vmax)}")
    if normalization == "absolute":
        return np.clip(g, 0.0, 1.0), 0.0, 1.0, f"{quantity} (absolute)", \
            "absolute (values as is, 0 … 1)"
    if normalization == "per_map":
        peak = np.nanmax(np.where(np.isfinite(g), g, np.nan), axis=(1, 2), initial=0.0)
        peak = np.where(peak > 0, peak, 1.0)[:, None, None]
        return (g / peak, 0.0, 1.0, f"{quantity} / each panel's maximum",
                "per map (each panel divided by its own maximum)")
    vmax = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    return (g / vmax, 0.0, vmax, f"{quantity} (scale shared by all panels)",
            f"per layer (one scale shared by all panels of this image: 0 … {fmt(vmax)})")


def overlay_tiles(grids: np.ndarray, ctx: RenderContext, rf, cmap: str, alpha: float,
                   target: int = 56):
    """uint8 tiles (N, H*s, W*s, 3): the gray input with each placed grid as a colour overlay.
    `grids` are already normalised to [0, 1]. Returns (tiles, placement caption phrase)."""
    n, gh, gw = grids.shape
    height, width = input_hw(ctx, (gh, gw), rf)
    stack = np.moveaxis(grids, 0, -1)                                   # (gh, gw, N)
    if rf is not None:
        placed = place_grid_at_centres(stack, (height, width), rf)
        start, size, stride = rf
        first = f"{start}+{stride}p" if start else f"{stride}p"
        centre = start + (size - 1) / 2
        where = (f"placed by receptive field: cell p sees input rows/columns {first} … "
                 f"{first}+{size - 1} and is drawn as a {stride}x{stride} tile at its centre "
                 f"{fmt(centre)}+{stride}p; the uncoloured border is seen only by the edges of "
                 f"receptive fields")
    else:
        placed = stretch_grid(stack, (height, width))
        where = "stretched evenly over the input (receptive field unknown)"
    placed = np.moveaxis(placed, -1, 0)                                 # (N, H, W)
    base = quantise(gray(ctx.image), BASE_LEVELS) if ctx.image is not None \
        else np.full((height, width), 0.5)
    base = (base * 255.0)[None, :, :, None]
    colour = apply_colormap(placed, cmap, levels=OVERLAY_LEVELS).astype(np.float64)
    seen = np.isfinite(placed)[..., None]
    mixed = np.where(seen, (1.0 - alpha) * base + alpha * colour, base)
    tiles = (mixed + 0.5).astype(np.uint8)
    return upscale(tiles, tile_factor(ctx, max(height, width), target)), where


def overlay_figure(quantity, grids, labels, ctx, rf, params, cmap_default="viridis"):
    normalization = str(get(params, "normalization", "per_layer"))
    cmap = str(get(params, "colormap", cmap_default))
    alpha = float(get(params, "alpha", 0.5))
    values, vmin, vmax, bar_label, norm_phrase = normalise(grids, normalization, quantity,
                                                            ctx.value_range)
    tiles, where = overlay_tiles(values, ctx, rf, cmap, alpha)
    cols = columns(len(tiles), 8)
    tiled = mosaic(tiles, cols, gutter=4, above=labels)
    bar = colorbar(cmap, vmin, vmax, bar_label, width=min(240, tiled.array.shape[1]),
                    levels=OVERLAY_LEVELS)
    canvas = compose([tiled, bar])
    return canvas, where, norm_phrase, cmap, alpha


def last_rf(ctx: RenderContext):
    """The primary-capsule grid's receptive field (from the model's description when given)."""
    field = ctx.receptive_field()
    if field is not None:
        return field.rows
    return tuple(ctx.receptive_fields[-1]) if ctx.receptive_fields else None
