"""One render function per technique: one image's arrays in, `Figure`s (deterministic bytes) out.

Every function has the signature `render_X(result, params, ctx) -> list[Figure]`: `result` holds
ONE image's arrays (batch axis removed), `params` is the technique's options dataclass (or None;
attributes are read with defaults) and `ctx` the RenderContext (class names, input image,
receptive fields). No TensorFlow here, and no matplotlib on the hot path: PNGs are NumPy mosaics
with Pillow text (drawing dominates the batched build time). A figure of one input holds the
data and its labels and scale, no title: the page's card heading and the caption name it (and
a step draws thousands of them, so a title line was a tenth of the site).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

import numpy as np

from reportgen.capsnet.description import one_hop_of_lengths
from reportgen.figures.colormaps import (
    COLOUR_LEVELS, DIVERGING, FONT_SIZE, TEXT_COLOR, apply_colormap, apply_diverging, colorbar_array,
    draw_texts, fmt, quantise, text_size,
)
from reportgen.figures.encode import png_bytes
from reportgen.figures.placement import place_grid_at_centres, stretch_grid
from reportgen.figures.figure import Figure, RenderContext

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
# An overlay mixes the input's gray with the colormap: every pair is a colour. At these levels
# (the input's grays under it, the overlay's values) a figure keeps within an exact 256-colour
# palette: no lossy quantiser, which cost half a step's drawing time.
BASE_LEVELS = 8
OVERLAY_LEVELS = 33


# --- small helpers ------------------------------------------------------------------------------

def _get(params, name, default):
    value = getattr(params, name, default) if params is not None else default
    return default if value is None else value


def _class_name(ctx: RenderContext, index: int) -> str:
    names = ctx.class_names or ()
    return str(names[index]) if 0 <= index < len(names) else str(index)


def _gray(image: np.ndarray) -> np.ndarray:
    """(H, W) float in [0, 1] of an (H, W) / (H, W, C) image (luminance for colour)."""
    img = np.asarray(image, dtype=np.float64)
    if img.ndim == 3:
        img = img[:, :, 0] if img.shape[2] == 1 else img[:, :, :3] @ np.array([0.299, 0.587, 0.114])
    return np.clip(np.nan_to_num(img), 0.0, 1.0)


def _rgb(images: np.ndarray, levels: int | None = None) -> np.ndarray:
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


def _upscale(tiles: np.ndarray, factor: int) -> np.ndarray:
    """Nearest-neighbour upscale of (..., h, w, 3) by an integer factor."""
    if factor <= 1:
        return tiles
    return np.repeat(np.repeat(tiles, factor, axis=-3), factor, axis=-2)


def _factor(size: int, target: int) -> int:
    return max(1, int(math.ceil(target / max(1, size))))


def _tile_factor(ctx: RenderContext, size: int, target: int) -> int:
    """How many times to enlarge tiles of `size` pixels towards `target`; a filmstrip frame
    (ctx.thumbnail) keeps them at their natural size."""
    return 1 if ctx.thumbnail else _factor(size, target)


def _columns(count: int, max_cols: int) -> int:
    if count <= max_cols:
        return max(1, count)
    return int(math.ceil(count / math.ceil(count / max_cols)))


def _grid(tiles: np.ndarray, gutter: int) -> np.ndarray:
    """(R, C, h, w, 3) uint8 → one (R*h + (R-1)*g, C*w + (C-1)*g, 3) image with white gutters."""
    rows, cols, h, w, ch = tiles.shape
    padded = np.full((rows, cols, h + gutter, w + gutter, ch), WHITE, dtype=np.uint8)
    padded[:, :, :h, :w] = tiles
    out = padded.transpose(0, 2, 1, 3, 4).reshape(rows * (h + gutter), cols * (w + gutter), ch)
    return out[:rows * (h + gutter) - gutter, :cols * (w + gutter) - gutter]


def _line_height(size: int = FONT_SIZE) -> int:
    return text_size("Ag", size)[1]


@dataclass
class _Block:
    """An image block of a sheet, with its text items at block-relative positions."""

    array: np.ndarray
    texts: list = field(default_factory=list)
    align: str = "left"


def _text_block(lines, size: int = FONT_SIZE, color=None, align: str = "left") -> _Block:
    lines = [lines] if isinstance(lines, str) else list(lines)
    lh = _line_height(size)
    width = max(text_size(line, size)[0] for line in lines) + 2
    array = np.full((lh * len(lines), width, 3), WHITE, dtype=np.uint8)
    texts = [(0, i * lh, line, "left", color, size) for i, line in enumerate(lines)]
    return _Block(array, texts, align)


def _compose(blocks: list[_Block], gap: int = GAP, margin: int = MARGIN) -> np.ndarray:
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


def _png_figure(name: str, canvas: np.ndarray, caption: str) -> Figure:
    return Figure(name=name, data=png_bytes(canvas), kind="png", caption=caption,
                  width=int(canvas.shape[1]), height=int(canvas.shape[0]))


def _label_lines(label) -> list[tuple[str, tuple | None]]:
    """A label is a str (may contain newlines) or a list of str / (str, rgb) lines."""
    if label is None:
        return []
    if isinstance(label, str):
        return [(line, None) for line in label.split("\n")]
    return [(item, None) if isinstance(item, str) else (item[0], item[1]) for item in label]


def _mosaic(tiles: np.ndarray, cols: int, gutter: int = 2, above=None, below=None) -> _Block:
    """Tiles (N, h, w, 3) uint8 in rows of `cols`, each with optional label lines above/below."""
    n, h, w = tiles.shape[:3]
    above = [_label_lines(a) for a in above] if above is not None else [[] for _ in range(n)]
    below = [_label_lines(b) for b in below] if below is not None else [[] for _ in range(n)]
    lh = _line_height()
    n_above = max((len(a) for a in above), default=0)
    n_below = max((len(b) for b in below), default=0)
    top = n_above * lh + (2 if n_above else 0)
    bottom = n_below * lh + (2 if n_below else 0)
    widest = max([text_size(t)[0] for lines in above + below for t, _ in lines] or [0])
    cell_w = max(w, widest + 4)
    rows = int(math.ceil(n / cols))
    cells = np.full((rows * cols, top + h + bottom, cell_w, 3), WHITE, dtype=np.uint8)
    x0 = (cell_w - w) // 2
    cells[:n, top:top + h, x0:x0 + w] = tiles
    array = _grid(cells.reshape(rows, cols, *cells.shape[1:]), gutter)
    texts = []
    for i in range(n):
        r, c = divmod(i, cols)
        cx = c * (cell_w + gutter) + cell_w / 2
        y = r * (top + h + bottom + gutter)
        for j, (t, color) in enumerate(above[i]):
            texts.append((cx, y + j * lh, t, "center", color))
        for j, (t, color) in enumerate(below[i]):
            texts.append((cx, y + top + h + 2 + j * lh, t, "center", color))
    return _Block(array, texts, "left")


def _colorbar(name, vmin, vmax, label, width=200, levels=COLOUR_LEVELS) -> _Block:
    return _Block(colorbar_array(name, vmin, vmax, label, width=width, levels=levels), [],
                  "center")


def _title(text: str) -> _Block:
    return _text_block(text, size=TITLE_SIZE)


# --- overlays (primary heatmaps, RPV, Grad-CAM++) -----------------------------------------------

def _input_hw(ctx: RenderContext, grid_hw, rf) -> tuple[int, int]:
    if ctx.image is not None:
        return int(ctx.image.shape[0]), int(ctx.image.shape[1])
    if rf is not None:
        start, size, stride = rf
        return tuple(int(start + (g - 1) * stride + size) for g in grid_hw)
    return int(grid_hw[0]), int(grid_hw[1])


def _normalise(grids: np.ndarray, normalization: str, quantity: str = "value",
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


def _overlay_tiles(grids: np.ndarray, ctx: RenderContext, rf, cmap: str, alpha: float,
                   target: int = 56):
    """uint8 tiles (N, H*s, W*s, 3): the gray input with each placed grid as a colour overlay.
    `grids` are already normalised to [0, 1]. Returns (tiles, placement caption phrase)."""
    n, gh, gw = grids.shape
    height, width = _input_hw(ctx, (gh, gw), rf)
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
    base = quantise(_gray(ctx.image), BASE_LEVELS) if ctx.image is not None \
        else np.full((height, width), 0.5)
    base = (base * 255.0)[None, :, :, None]
    colour = apply_colormap(placed, cmap, levels=OVERLAY_LEVELS).astype(np.float64)
    seen = np.isfinite(placed)[..., None]
    mixed = np.where(seen, (1.0 - alpha) * base + alpha * colour, base)
    tiles = (mixed + 0.5).astype(np.uint8)
    return _upscale(tiles, _tile_factor(ctx, max(height, width), target)), where


def _overlay_figure(quantity, grids, labels, ctx, rf, params, cmap_default="viridis"):
    normalization = str(_get(params, "normalization", "per_layer"))
    cmap = str(_get(params, "colormap", cmap_default))
    alpha = float(_get(params, "alpha", 0.5))
    values, vmin, vmax, bar_label, norm_phrase = _normalise(grids, normalization, quantity,
                                                            ctx.value_range)
    tiles, where = _overlay_tiles(values, ctx, rf, cmap, alpha)
    cols = _columns(len(tiles), 8)
    mosaic = _mosaic(tiles, cols, gutter=4, above=labels)
    bar = _colorbar(cmap, vmin, vmax, bar_label, width=min(240, mosaic.array.shape[1]),
                    levels=OVERLAY_LEVELS)
    canvas = _compose([mosaic, bar])
    return canvas, where, norm_phrase, cmap, alpha


# --- 1. predictions -----------------------------------------------------------------------------

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


def _bar_layout(lengths, names):
    lh = _line_height()
    row_h = max(18, lh + 6)
    label_w = max(text_size(n)[0] for n in names) + 10
    plot_w = 260
    value_w = max(text_size(length_label(v))[0] for v in lengths) + 8
    top = _line_height(TITLE_SIZE) + 10
    axis_h = lh + 8
    width = MARGIN + label_w + plot_w + value_w + MARGIN
    height = top + row_h * len(lengths) + axis_h + MARGIN
    return dict(row_h=row_h, label_w=label_w, plot_w=plot_w, top=top, width=width,
                height=height, x0=MARGIN + label_w, bar_h=row_h - 6)


def _predictions_png(lengths, names, predicted: frozenset, title):
    lay = _bar_layout(lengths, names)
    canvas = np.full((lay["height"], lay["width"], 3), WHITE, dtype=np.uint8)
    x0, plot_w, top, row_h = lay["x0"], lay["plot_w"], lay["top"], lay["row_h"]
    bottom = top + row_h * len(lengths)
    ticks = (0.0, 0.25, 0.5, 0.75, 1.0)
    for t in ticks:
        x = x0 + int(round(t * (plot_w - 1)))
        canvas[top:bottom, x] = GRID_LINE
    texts = [(MARGIN, MARGIN // 2, title, "left", None, TITLE_SIZE)]
    for k, (value, name) in enumerate(zip(lengths, names)):
        y = top + k * row_h
        bar = int(round(np.clip(value, 0.0, 1.0) * (plot_w - 1)))
        colour = HIGHLIGHT if k in predicted else BAR
        if bar > 0:
            canvas[y + 3:y + 3 + lay["bar_h"], x0:x0 + bar] = colour
        text_y = y + (row_h - _line_height()) // 2
        texts.append((x0 - 6, text_y, name, "right", HIGHLIGHT if k in predicted else None))
        texts.append((x0 + bar + 4, text_y, length_label(value), "left",
                      HIGHLIGHT if k in predicted else MUTED))
    canvas[top:bottom, x0] = AXIS
    canvas[bottom, x0:x0 + plot_w] = AXIS
    for t in ticks:
        x = x0 + int(round(t * (plot_w - 1)))
        canvas[bottom:bottom + 3, x] = AXIS
        texts.append((x, bottom + 4, fmt(t), "center", MUTED))
    return draw_texts(canvas, texts)


def _predictions_svg(lengths, names, predicted: frozenset, title) -> bytes:
    """The same chart as SVG text, written directly (deterministic, no matplotlib)."""
    lay = _bar_layout(lengths, names)
    x0, plot_w, top, row_h = lay["x0"], lay["plot_w"], lay["top"], lay["row_h"]
    bottom = top + row_h * len(lengths)

    def rgb(c):
        return "#%02x%02x%02x" % tuple(c)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{lay["width"]}" '
           f'height="{lay["height"]}" viewBox="0 0 {lay["width"]} {lay["height"]}" '
           f'font-family="DejaVu Sans, Arial, sans-serif" font-size="{FONT_SIZE}">',
           f'<rect width="{lay["width"]}" height="{lay["height"]}" fill="#ffffff"/>',
           f'<text x="{MARGIN}" y="{MARGIN // 2 + TITLE_SIZE}" font-size="{TITLE_SIZE}" '
           f'fill="{rgb(TEXT_COLOR)}">{escape(title)}</text>']
    for t in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = x0 + t * (plot_w - 1) + 0.5
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" '
                   f'stroke="{rgb(GRID_LINE)}"/>')
        out.append(f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 3}" '
                   f'stroke="{rgb(AXIS)}"/>')
        out.append(f'<text x="{x:.1f}" y="{bottom + 4 + FONT_SIZE}" text-anchor="middle" '
                   f'fill="{rgb(MUTED)}">{fmt(t)}</text>')
    for k, (value, name) in enumerate(zip(lengths, names)):
        y = top + k * row_h
        bar = float(np.clip(value, 0.0, 1.0)) * (plot_w - 1)
        colour = rgb(HIGHLIGHT if k in predicted else BAR)
        text_colour = rgb(HIGHLIGHT if k in predicted else TEXT_COLOR)
        weight = ' font-weight="bold"' if k in predicted else ""
        out.append(f'<rect x="{x0}" y="{y + 3}" width="{bar:.2f}" height="{lay["bar_h"]}" '
                   f'fill="{colour}"><title>{escape(name)}: {value:.4f}</title></rect>')
        out.append(f'<text x="{x0 - 6}" y="{y + row_h / 2 + 0.36 * FONT_SIZE:.1f}" text-anchor="end" '
                   f'fill="{text_colour}"{weight}>{escape(name)}</text>')
        out.append(f'<text x="{x0 + bar + 4:.2f}" y="{y + row_h / 2 + 0.36 * FONT_SIZE:.1f}" '
                   f'fill="{rgb(HIGHLIGHT if k in predicted else MUTED)}">{length_label(value)}</text>')
    out.append(f'<line x1="{x0 + 0.5}" y1="{top}" x2="{x0 + 0.5}" y2="{bottom}" '
               f'stroke="{rgb(AXIS)}"/>')
    out.append(f'<line x1="{x0}" y1="{bottom + 0.5}" x2="{x0 + plot_w}" y2="{bottom + 0.5}" '
               f'stroke="{rgb(AXIS)}"/>')
    out.append("</svg>\n")
    return "\n".join(out).encode("utf-8")


def _gradient_words(ctx: RenderContext) -> str:
    """What the model's class gradients are taken of (reportgen.capsnet.model_words); "the
    class score" without a description."""
    from reportgen.capsnet import model_words

    return "the class score" if ctx.description is None else \
        model_words.gradient_words(ctx.description)


def _prediction_terms(result, ctx: RenderContext, count: int):
    """(chart title, a bar's word, sentence saying what the bars are) in the model's own terms
    (reportgen.capsnet.model_words), from its description; without one, from the arrays (a
    CNN's come with its "probabilities")."""
    from reportgen.capsnet import model_words

    description = ctx.description
    if description is None:
        kind = "probabilities" if "probabilities" in result else "lengths"
        cnn = kind == "probabilities"
    else:
        kind = model_words.shown_kind(description)
        cnn = description.head.kind != "capsules"
    if kind == "lengths":
        return ("Class-capsule lengths", "length",
                f"Predictions: length of each of the {count} class capsules (not a softmax; "
                f"each in 0 … 1, axis 0 … 1).")
    if kind == "activations":
        logistic = description is not None and \
            model_words.class_activation(description) == "logistic"
        return ("Class-capsule activations", "activation",
                f"Predictions: the {'logistic ' if logistic else ''}activation of each of the "
                f"{count} class capsules (not a softmax; each in 0 … 1, axis 0 … 1).")
    if cnn:
        return ("Class probabilities", "probability",
                f"Predictions: the CNN's probability of each of the {count} classes (axis 0 … "
                f"1).")
    return ("Class probabilities", "probability",
            f"Predictions: the probability of each of the {count} classes, from the logits "
            f"{model_words.LEARNT} (axis 0 … 1).")


def render_predictions(result, params, ctx: RenderContext) -> list[Figure]:
    """Horizontal bar chart of the class scores in the model's own terms (class-capsule lengths,
    not a softmax; logistic activations; a learnt readout's logits; a CNN's probabilities), the
    predicted class highlighted, the two highest for a two-digit model (`ctx.labels_per_image`).
    PNG (Pillow) + SVG (written directly)."""
    lengths = np.asarray(result["lengths"], dtype=np.float64).reshape(-1)
    names = [_class_name(ctx, k) for k in range(len(lengths))]
    # the predicted class, or both of a two-digit model's (its two highest scores: top-2)
    shown = [int(k) for k in np.argsort(-lengths, kind="stable")[:max(1, ctx.labels_per_image)]]
    title, kind, what = _prediction_terms(result, ctx, len(lengths))
    value = (lambda k: length_label(lengths[k])) if kind == "length" else \
        (lambda k: f"{lengths[k]:.3f}")
    named = " and ".join(f"{names[k]} ({kind} {value(k)})" for k in shown)
    caption = (f"{what} Predicted class {named} highlighted." if len(shown) == 1 else
               f"{what} Predicted classes {named}, the two highest (top-2), highlighted.")
    canvas = _predictions_png(lengths, names, frozenset(shown), title)
    svg = _predictions_svg(lengths, names, frozenset(shown), title)
    return [_png_figure("predictions.png", canvas, caption),
            Figure(name="predictions.svg", data=svg, kind="svg", caption=caption,
                   width=int(canvas.shape[1]), height=int(canvas.shape[0]))]


# --- 2. conv feature maps and kernels -----------------------------------------------------------

def _outline(tiles: np.ndarray, which: np.ndarray, colour, thickness: int) -> None:
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


def render_conv_feature_maps(result, params, ctx: RenderContext) -> list[Figure]:
    """Mosaic of every filter's activation map of one conv layer on one shared scale; dead
    filters (all zero) outlined in red."""
    maps = np.asarray(result["maps"], dtype=np.float64)                   # (h, w, F)
    h, w, count = maps.shape
    dead = np.asarray(result.get("dead", np.zeros(count)), dtype=bool).reshape(-1)
    if dead.shape[0] != count:
        dead = np.zeros(count, dtype=bool)
    layer = str(_get(params, "layer", ""))
    cmap = str(_get(params, "colormap", "viridis"))
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
    tiles = _upscale(apply_colormap(values, cmap), _tile_factor(ctx, max(h, w), 20))
    _outline(tiles, dead, DEAD, 2 if min(tiles.shape[1:3]) >= 12 else 1)
    cols = _columns(count, 16)
    mosaic = _mosaic(tiles, cols, gutter=2)
    n_dead = int(dead.sum())
    name = layer or "conv layer"
    blocks = [mosaic, _colorbar(cmap, vmin, vmax, "activation (shared scale for the layer)",
                                width=min(240, mosaic.array.shape[1]))]
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
    return [_png_figure("feature_maps.png", _compose(blocks), caption)]


def render_conv_kernels(result, params, ctx: RenderContext) -> list[Figure]:
    """Mosaic of a conv layer's kernels, diverging colours symmetric around zero."""
    kernels = np.asarray(result["kernels"], dtype=np.float64)             # (k, k, in, F)
    kh, kw, channels, count = kernels.shape
    mean = kernels.mean(axis=2) if channels > 1 else kernels[:, :, 0]
    rgb, vmax = apply_diverging(np.moveaxis(mean, -1, 0), name=DIVERGING)
    tiles = _upscale(rgb, _factor(max(kh, kw), 36))
    cols = _columns(count, 16)
    mosaic = _mosaic(tiles, cols, gutter=2)
    layer = str(_get(params, "layer", "")) or "conv layer"
    averaged = f", mean over its {channels} input channels" if channels > 1 else ""
    bar_label = "weight" + (f" (mean over {channels} input channels)" if channels > 1 else "")
    blocks = [_title(f"Kernels of {layer} ({count} filters, {kh}x{kw}{averaged})"), mosaic,
              _colorbar(DIVERGING, -vmax, vmax, bar_label, width=min(240, mosaic.array.shape[1]))]
    caption = (f"The learned weights of each {layer} filter: red positive, blue negative. "
               f"Details: "
               f"Conv kernels of {layer}: {count} filters of {kh}x{kw}{averaged}; {DIVERGING} "
               f"colours symmetric around zero (negative blue, zero white, positive red), one "
               f"scale for the layer: ±{fmt(vmax)} = the largest absolute weight shown.")
    return [_png_figure("kernels.png", _compose(blocks), caption)]


# --- 3./4. primary-capsule heatmaps and RPV -----------------------------------------------------

def _last_rf(ctx: RenderContext):
    """The primary-capsule grid's receptive field (from the model's description when given)."""
    field = ctx.receptive_field()
    if field is not None:
        return field.rows
    return tuple(ctx.receptive_fields[-1]) if ctx.receptive_fields else None


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
        else (_last_rf(ctx) if not layer else None)
    return words, "capsule activation" if logistic else "capsule length", field


def render_primary_heatmaps(result, params, ctx: RenderContext) -> list[Figure]:
    """One panel per capsule type: the layer's activation map (capsule lengths, or matrix
    capsules' logistic activations) placed on the gray input by receptive field, as a
    semi-transparent overlay; one shared scale unless per_map / absolute."""
    lengths = np.asarray(result["lengths"], dtype=np.float64)             # (gh, gw, T)
    gh, gw, types = lengths.shape
    grids = np.moveaxis(lengths, -1, 0)
    labels = [f"type {t}" for t in range(types)]
    words, quantity, field = _capsule_grid(ctx, str(_get(params, "layer", "")))
    canvas, where, norm, cmap, alpha = _overlay_figure(quantity, grids, labels, ctx, field,
                                                       params)
    caption = (f"Where each capsule type is active, drawn over the part of the image it sees. "
               f"Details: "
               f"{words} heatmaps: the {gh}x{gw} grid of {quantity}s of each of the "
               f"{types} capsule types, {where}, as a {cmap} overlay ({alpha:.0%} opacity) on the "
               f"grayscale input. Normalisation: {norm}.")
    return [_png_figure("primary_heatmaps.png", canvas, caption)]


def render_rpv(result, params, ctx: RenderContext) -> list[Figure]:
    """Routing Path Visualization: one placed overlay per class."""
    maps = np.asarray(result["maps"], dtype=np.float64)                   # (K, gh, gw)
    classes, gh, gw = maps.shape
    method = str(_get(params, "method", "modified"))
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
    labels = [_class_name(ctx, k) for k in range(classes)]
    canvas, where, norm, cmap, alpha = _overlay_figure("path strength m", maps, labels, ctx,
                                                       _last_rf(ctx), params)
    caption = (f"Which parts of the image send their evidence to each class through routing "
               f"({method} method). Details: "
               f"Routing Path Visualization, {method} method (path strength m = {formula},"
               f"{through} mean "
               f"over all primary capsules at each of the {gh}x{gw} grid locations), one panel "
               f"per class, {where}, as a {cmap} overlay ({alpha:.0%} opacity) on the grayscale "
               f"input. Normalisation: {norm}.")
    return [_png_figure("rpv.png", canvas, caption)]


# --- class capsules -----------------------------------------------------------------------------

def render_class_capsules(result, params, ctx: RenderContext) -> list[Figure]:
    """K rows x D columns of pose values (diverging), each row with class name and its score
    (its length |v| when the length is what the model predicts by)."""
    from reportgen.capsnet import model_words

    description = ctx.description
    by_length = description is None or model_words.readout(description) == "length"
    score = "|v|" if by_length else model_words.score_word(description)
    capsules = np.asarray(result["capsules"], dtype=np.float64)           # (K, D)
    lengths = np.asarray(result["lengths"], dtype=np.float64).reshape(-1)
    classes, dims = capsules.shape
    predicted = int(np.argmax(lengths))
    cell = 16
    rgb, vmax = apply_diverging(capsules)
    cells = _upscale(np.broadcast_to(rgb[:, :, None, None, :], (classes, dims, 1, 1, 3)), cell)
    grid = _grid(np.ascontiguousarray(cells), 1)
    names = [_class_name(ctx, k) for k in range(classes)]
    lh = _line_height()
    label_w = max(text_size(n)[0] for n in names) + 8
    value_w = max(text_size(f"{score} = {length_label(v)}")[0] for v in lengths) + 8
    header = lh + 2
    height = header + grid.shape[0] + 2
    width = label_w + grid.shape[1] + value_w + 4
    array = np.full((height, width, 3), WHITE, dtype=np.uint8)
    x0, y0 = label_w + 2, header
    array[y0:y0 + grid.shape[0], x0:x0 + grid.shape[1]] = grid
    # Frame the predicted class's row.
    top = y0 + predicted * (cell + 1) - 1
    bottom = top + cell + 1
    array[top, x0 - 2:x0 + grid.shape[1] + 2] = HIGHLIGHT
    array[bottom, x0 - 2:x0 + grid.shape[1] + 2] = HIGHLIGHT
    array[top:bottom + 1, x0 - 2] = HIGHLIGHT
    array[top:bottom + 1, x0 + grid.shape[1] + 1] = HIGHLIGHT
    texts = [(x0 + d * (cell + 1) + cell / 2, 0, str(d), "center", MUTED) for d in range(dims)]
    for k in range(classes):
        y = y0 + k * (cell + 1) + (cell - lh) // 2 + 1
        colour = HIGHLIGHT if k == predicted else None
        texts.append((x0 - 6, y, names[k], "right", colour))
        texts.append((x0 + grid.shape[1] + 6, y, f"{score} = {length_label(lengths[k])}", "left",
                      colour))
    blocks = [_Block(array, texts),
              _colorbar(DIVERGING, -vmax, vmax, "pose value", width=min(200, grid.shape[1]))]
    lead = ("the longest is the prediction" if by_length else
            f"the prediction is {model_words.prediction_words(description)}")
    each = ("each row's length |v| on the right" if by_length else
            f"each row's {model_words.score_word(description)} on the right (its class score, "
            f"one of {model_words.score_words(description)})")
    caption = (f"The pose vector of every class capsule; {lead}. Details: "
               f"Class capsules: the {dims}-dimensional pose vector of each of the {classes} class "
               f"capsules (rows; columns = dimensions 0 … {dims - 1}), {DIVERGING} colours "
               f"symmetric around zero, scale ±{fmt(vmax)} = the largest absolute value for this "
               f"image; {each}, predicted class {names[predicted]} framed.")
    return [_png_figure("class_capsules.png", _compose(blocks), caption)]


# --- 5./6. decoder ------------------------------------------------------------------------------

def render_decoder_length(result, params, ctx: RenderContext) -> list[Figure]:
    """A row of reconstructions from the target capsule rescaled to lengths p."""
    images = np.asarray(result["images"], dtype=np.float64)               # (P, H, W, C)
    lengths = np.asarray(result["lengths"], dtype=np.float64).reshape(-1)
    target = int(np.asarray(result["target"]).reshape(()))
    name = _class_name(ctx, target)
    height, width = images.shape[1:3]
    tiles = _upscale(_rgb(images, COLOUR_LEVELS), _factor(max(height, width), 56))
    mosaic = _mosaic(tiles, len(tiles), gutter=3, below=[f"p={fmt(p)}" for p in lengths])
    blocks = [mosaic]
    caption = (f"How the decoder draws class {name} as its capsule grows from length 0 to 1. "
               f"Details: "
               f"Decoder, capsule length: the class {name} capsule's vector rescaled to lengths "
               f"p = {fmt(lengths[0])} … {fmt(lengths[-1])} (x ← x·p/|x|), all other class "
               f"capsules masked, then reconstructed ({len(lengths)} images; pixel values "
               f"clipped to 0 … 1, no normalisation).")
    return [_png_figure("decoder_length.png", _compose(blocks), caption)]


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


def _perturbation_sheet(tiles, deltas, dims, texts_colour=MUTED) -> _Block:
    """A grid of tiles (D, S, h, w, 3) with δ above the columns and dimensions left of rows."""
    gutter = 2
    grid = _grid(tiles, gutter)
    th, tw = tiles.shape[2:4]
    size = FONT_SIZE
    lh = _line_height(size)
    label_w = text_size(f"dim {dims - 1}", size)[0] + 8
    header = lh + 4
    array = np.full((header + grid.shape[0], label_w + grid.shape[1], 3), WHITE, dtype=np.uint8)
    array[header:, label_w:] = grid
    texts = [(label_w + s * (tw + gutter) + tw / 2, 0, _delta_label(d), "center", texts_colour,
              size) for s, d in enumerate(deltas)]
    texts += [(label_w - 6, header + d * (th + gutter) + (th - lh) // 2, f"dim {d}", "right",
               None, size) for d in range(dims)]
    return _Block(array, texts)


def _side_by_side(blocks: list[_Block], gap: int = 3 * GAP) -> _Block:
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
    return _Block(array, texts)


def render_decoder_perturbation(result, params, ctx: RenderContext) -> list[Figure]:
    """D rows (dimensions) x S columns (offsets δ) of reconstructions, and beside them each
    one's signed difference from the unperturbed reconstruction on one diverging scale."""
    images = np.asarray(result["images"], dtype=np.float64)               # (D, S, H, W, C)
    deltas = np.asarray(result["deltas"], dtype=np.float64).reshape(-1)
    target = int(np.asarray(result["target"]).reshape(()))
    name = _class_name(ctx, target)
    dims, steps, height, width = images.shape[:4]
    # one pixel per pixel: 2 x 176 tiles upscaled were most of a step's site weight and drawing
    # time; the page can enlarge them (image-rendering: pixelated)
    factor = _factor(max(height, width), 24)
    recon = _perturbation_sheet(_upscale(_rgb(images, COLOUR_LEVELS), factor), deltas, dims)
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
        rgb, vmax = apply_diverging(difference, vmax if vmax > 0 else 1.0)
        diff = _perturbation_sheet(_upscale(rgb, factor), deltas, dims)
        title_h = _line_height() + 2
        labelled = []
        for label, block in (("reconstruction", recon), ("minus the unperturbed (delta 0)", diff)):
            array = np.full((title_h + block.array.shape[0], block.array.shape[1], 3), WHITE,
                            dtype=np.uint8)
            array[title_h:] = block.array
            texts = [(0, 0, label, "left", None)]
            texts += [(tx, ty + title_h, *rest) for tx, ty, *rest in block.texts]
            labelled.append(_Block(array, texts))
        both = _side_by_side(labelled)
        bar_w = min(240, diff.array.shape[1])
        bar = _colorbar(DIVERGING, -vmax, vmax, "difference from the unperturbed reconstruction",
                        width=bar_w)
        row_w = max(both.array.shape[1], bar.array.shape[1])
        bar_row = np.full((bar.array.shape[0], row_w, 3), WHITE, dtype=np.uint8)
        # under the difference grid; as far right as fits when its label is wider
        x = max(0, min(labelled[0].array.shape[1] + 3 * GAP, row_w - bar.array.shape[1]))
        bar_row[:, x:x + bar.array.shape[1]] = bar.array
        blocks = [both, _Block(bar_row, [(tx + x, ty, *rest) for tx, ty, *rest in bar.texts])]
        caption += (f" Right: each reconstruction minus the unperturbed one (δ = 0), pixel "
                    f"values as shown{' averaged over colour channels' if images.shape[-1] > 1 else ''}, "
                    f"{DIVERGING} (red brighter, blue darker), one scale for the whole grid: "
                    f"±{fmt(vmax)} = the largest absolute difference.")
    return [_png_figure("decoder_perturbation.png", _compose(blocks), caption)]


# --- 7. Grad-CAM++ ------------------------------------------------------------------------------

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
    layer = str(_get(params, "layer", ""))
    input_hw = _input_hw(ctx, (gh, gw), None) if ctx.image is not None else (gh, gw)
    rf = _layer_rf(ctx, layer, (gh, gw), input_hw) if ctx.image is not None else None
    cmap = str(_get(params, "colormap", "viridis"))
    alpha = float(_get(params, "alpha", 0.5))
    target = result.get("target", _get(params, "target", _get(params, "class_index", None)))
    for_class = ""
    if target is not None and np.asarray(target).size == 1 and int(np.asarray(target)) >= 0:
        for_class = f" for class {_class_name(ctx, int(np.asarray(target)))}"
    overlay, where = _overlay_tiles(np.clip(cam, 0.0, 1.0)[None], ctx, rf, cmap, alpha, target=84)
    panels = [overlay[0]]
    labels = [f"Grad-CAM++ on {layer or 'conv layer'}"]
    if ctx.image is not None:
        base = _upscale(_rgb(_gray(ctx.image)[:, :, None], BASE_LEVELS),
                        overlay.shape[1] // ctx.image.shape[0])
        if base.shape == overlay[0].shape:
            panels.insert(0, base)
            labels.insert(0, "input (grayscale)")
    mosaic = _mosaic(np.stack(panels), len(panels), gutter=8, above=labels)
    blocks = [mosaic, _colorbar(cmap, 0.0, 1.0, "Grad-CAM++ (min-max per image)",
                                width=min(200, mosaic.array.shape[1]), levels=OVERLAY_LEVELS)]
    caption = (f"Where the network looks for the class, from the gradients at layer "
               f"{layer or '(unnamed)'}. Details: "
               f"Grad-CAM++{for_class} from layer {layer or '(unnamed)'} ({gh}x{gw} map, gradients "
               f"of {_gradient_words(ctx)}), {where}, as a {cmap} overlay ({alpha:.0%} "
               f"opacity) on the grayscale input. Normalisation: min-max per image (0 … 1).")
    return [_png_figure("gradcam_pp.png", _compose(blocks), caption)]


# --- 8. activation maximization -----------------------------------------------------------------

def render_activation_maximization(result, params, ctx: RenderContext) -> list[Figure]:
    """A row of synthesized images, one per class, with the model's lengths for each."""
    from reportgen.capsnet import model_words

    # the ascent is on the class capsules' lengths (the technique's); the model predicts by
    # them only when its readout is their length
    description = ctx.description
    by_length = description is None or model_words.readout(description) == "length"
    images = np.asarray(result["images"], dtype=np.float64)               # (K, H, W, C)
    lengths = np.asarray(result["lengths"], dtype=np.float64)             # (K, K)
    classes, height, width = images.shape[:3]
    tiles = _upscale(_rgb(images, COLOUR_LEVELS), _factor(max(height, width), 84))
    names = [_class_name(ctx, k) for k in range(classes)]
    below = []
    for k in range(classes):
        pred = int(np.argmax(lengths[k]))
        below.append([f"|v|={lengths[k, k]:.3f}",
                      (f"{'pred' if by_length else 'longest'} {names[pred]}",
                       MUTED if pred == k else DEAD)])
    cols = _columns(classes, 10)
    mosaic = _mosaic(tiles, cols, gutter=4, above=names, below=below)
    blocks = [_title("Activation maximization (experimental)"), mosaic]
    verdict = ("the model's prediction for it (red when another class wins)" if by_length else
               f"the longest class capsule for it (red when another class's is longer; this "
               f"model predicts by {model_words.prediction_words(description)}, not by length)")
    caption = ("Images synthesised to maximise each class capsule, and what the model predicts "
               "for them. Details: " if by_length else
               "Images synthesised to lengthen each class capsule, and which capsule is then "
               "the longest. Details: ") + (
               "Activation maximization (experimental): for each class, an image synthesized by "
               "gradient ascent on that class capsule's length from an all-black input, no "
               f"regulariser; below each, the length of its own class capsule and {verdict}. "
               "Pixel values clipped to 0 … 1, no normalisation.")
    return [_png_figure("activation_maximization.png", _compose(blocks), caption)]


RENDERERS = {
    "predictions": render_predictions,
    "conv_feature_maps": render_conv_feature_maps,
    "conv_kernels": render_conv_kernels,
    "primary_heatmaps": render_primary_heatmaps,
    "rpv": render_rpv,
    "class_capsules": render_class_capsules,
    "decoder_length": render_decoder_length,
    "decoder_perturbation": render_decoder_perturbation,
    "gradcam_pp": render_gradcam_pp,
    "activation_maximization": render_activation_maximization,
}
