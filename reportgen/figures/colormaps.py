"""Colormaps as 256-entry lookup tables (vectorised), and colour-bar images.

`apply_colormap` indexes a LUT taken from `matplotlib.colormaps` at COLOUR_LEVELS evenly spaced
values: each value is rounded to the nearest level, and a level's colour is matplotlib's own for
that value (index = floor(value * 256)).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from reportgen.figures.encode import png_bytes

DIVERGING = "RdBu_r"
NAN_COLOR = (255, 255, 255)
TEXT_COLOR = (34, 34, 34)
# Every label drawn inside a mosaic (tile labels, colour bars, grid rows and columns): digits
# 10 px tall at 1x, so a figure reads without zooming (at 11 they were 8 px).
FONT_SIZE = 14
# Values are drawn at 65 levels (0, 1/64, ..., 1; odd, so 0 of a diverging scale is a level):
# finer than the eye separates in a colormap, and a figure then holds few enough colours to be
# stored as an exact palette PNG at about half the bytes of 256 levels. The numbers themselves
# are in each figure's JSON/CSV.
COLOUR_LEVELS = 65


# --- text (Pillow's built-in default font: same glyphs everywhere, no font files) ---------

@lru_cache(maxsize=8)
def font(size: int = FONT_SIZE):
    """Pillow's default font at `size` px (the bitmap fallback when FreeType is unavailable)."""
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except (TypeError, ImportError, OSError):
        return ImageFont.load_default()


@lru_cache(maxsize=4096)
def text_size(text: str, size: int = FONT_SIZE) -> tuple[int, int]:
    """(width, height) a line of `text` takes; the height is the font's line height."""
    f = font(size)
    left, _, right, _ = f.getbbox(text) if text else (0, 0, 0, 0)
    return int(right - left), int(f.getbbox("Agjy|")[3])


# anti-aliased glyph edges at this many coverages: a few colours per text colour, so a figure
# of colour levels and labels fits an exact 256-colour palette (no lossy quantising)
TEXT_LEVELS = 9


@lru_cache(maxsize=4096)
def _text_mask(text: str, size: int) -> tuple[np.ndarray, int]:
    """(coverage (h, w) uint8, x offset) of one line of text: rendered once, then reused by
    every figure (the labels repeat from image to image; rasterising them was a third of the
    drawing time)."""
    from PIL import Image, ImageDraw

    f = font(size)
    left, _, right, bottom = f.getbbox(text)
    height = max(int(bottom), text_size("Ag", size)[1]) + 1
    mask = Image.new("L", (max(1, int(right - left) + 2), height), 0)
    ImageDraw.Draw(mask).text((-left, 0), text, fill=255, font=f)
    levels = TEXT_LEVELS - 1
    array = (np.round(np.asarray(mask, np.float32) * (levels / 255.0)) * (255.0 / levels)
             + 0.5).astype(np.uint8)
    array.setflags(write=False)
    return array, int(left)


@lru_cache(maxsize=8192)
def _glyph(text: str, size: int, color: tuple) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(keep, add, x offset, advance) of one line of text in one colour: a pixel under it
    becomes pixel * keep + add (alpha blending, with the colour's share precomputed)."""
    mask, left = _text_mask(text, size)
    alpha = mask[:, :, None].astype(np.float32) / 255.0
    keep = 1.0 - alpha
    add = alpha * np.asarray(color, np.float32) + 0.5         # + 0.5: rounds when truncated
    keep.setflags(write=False)
    add.setflags(write=False)
    return keep, add, left, text_size(text, size)[0]


def draw_texts(canvas: np.ndarray, texts, size: int = FONT_SIZE) -> np.ndarray:
    """`canvas` (uint8 RGB) with text items drawn in place: (x, y, text, align[, rgb[, size]])
    where y is the top, and x the left edge, centre or right edge for align "left", "center" or
    "right", from glyph masks rasterised once per text and size (Pillow's glyphs; the labels
    repeat from figure to figure, and rasterising them was a third of the drawing time)."""
    height, width = canvas.shape[:2]
    for item in texts:
        x, y, text, align = item[:4]
        if not text:
            continue
        color = item[4] if len(item) > 4 and item[4] is not None else TEXT_COLOR
        item_size = item[5] if len(item) > 5 else size
        keep, add, left, shift = _glyph(text, item_size, tuple(int(c) for c in color))
        x = x - shift / 2 if align == "center" else (x - shift if align == "right" else x)
        x0, y0 = int(round(x - left)) + left, int(round(y))
        h, w = keep.shape[:2]
        top, lft = max(0, -y0), max(0, -x0)
        bottom, rgt = min(h, height - y0), min(w, width - x0)
        if bottom <= top or rgt <= lft:
            continue
        region = canvas[y0 + top:y0 + bottom, x0 + lft:x0 + rgt]
        region[...] = region * keep[top:bottom, lft:rgt] + add[top:bottom, lft:rgt]
    return canvas


# --- colormaps ----------------------------------------------------------------------------------


@lru_cache(maxsize=32)
def lut(name: str = "viridis") -> np.ndarray:
    """The (256, 3) uint8 RGB lookup table of matplotlib colormap `name` (read-only)."""
    from matplotlib import colormaps

    try:
        cmap = colormaps[name].resampled(256)
    except KeyError:
        raise ValueError(f"Unknown colormap {name!r}. Use a matplotlib colormap name, "
                         f"e.g. 'viridis', 'inferno', 'gray' or 'RdBu_r'.") from None
    table = (np.asarray(cmap(np.arange(256)))[:, :3] * 255.0 + 0.5).astype(np.uint8)
    table.setflags(write=False)
    return table


def quantise(values01: np.ndarray, levels: int = COLOUR_LEVELS) -> np.ndarray:
    """`values01` clipped to [0, 1] and rounded to the nearest of `levels` evenly spaced values
    (NaN stays NaN)."""
    v = np.clip(np.asarray(values01, dtype=np.float64), 0.0, 1.0)
    return np.round(v * (levels - 1)) / (levels - 1)


@lru_cache(maxsize=16)
def _level_rows(levels: int) -> np.ndarray:
    """The LUT row of each of `levels` levels, as matplotlib picks it (floor(level * 256),
    1 → the last row)."""
    steps = levels - 1
    rows = np.minimum(np.arange(levels) * 256 // steps, 255).astype(np.intp)
    rows.setflags(write=False)
    return rows


def lut_indices(values01: np.ndarray, levels: int = COLOUR_LEVELS) -> np.ndarray:
    """LUT rows for values in [0, 1] (clipped) rounded to `levels` levels, each level's row as
    matplotlib picks it (floor(level * 256), 1 → the last row); NaN → -1."""
    scaled = np.clip(np.asarray(values01, dtype=np.float64), 0.0, 1.0) * (levels - 1)
    nan = np.isnan(scaled)
    has_nan = bool(nan.any())
    if has_nan:
        scaled[nan] = 0.0
    idx = _level_rows(levels).take(np.rint(scaled).astype(np.intp))
    if has_nan:
        idx[nan] = -1
    return idx


def apply_colormap(values01: np.ndarray, name: str = "viridis",
                   nan_color: tuple[int, int, int] = NAN_COLOR,
                   levels: int = COLOUR_LEVELS) -> np.ndarray:
    """uint8 RGB (..., 3) of `values01` (any shape, clipped to [0, 1], at `levels` levels;
    NaN → `nan_color`)."""
    idx = lut_indices(values01, levels)
    nan = idx < 0
    has_nan = bool(nan.any())
    rgb = lut(name).take(np.maximum(idx, 0) if has_nan else idx, axis=0)
    if has_nan:
        rgb[nan] = nan_color
    return rgb


def symmetric_limit(values: np.ndarray) -> float:
    """max |value| ignoring NaN; 1.0 when everything is zero/NaN (avoids dividing by zero)."""
    v = np.asarray(values, dtype=np.float64)
    vmax = float(np.nanmax(np.abs(v))) if v.size and not np.all(np.isnan(v)) else 0.0
    return vmax if vmax > 0 and np.isfinite(vmax) else 1.0


def apply_diverging(values: np.ndarray, vmax: float | None = None,
                    name: str = DIVERGING) -> tuple[np.ndarray, float]:
    """Signed values → (uint8 RGB, vmax) on a scale symmetric around 0: -vmax blue, 0 white,
    +vmax red (for "RdBu_r"). `vmax` defaults to max |values|."""
    if vmax is None or not vmax > 0:
        vmax = symmetric_limit(values)
    v = np.asarray(values, dtype=np.float64)
    return apply_colormap(0.5 + v / (2.0 * vmax), name), float(vmax)


def fmt(value: float) -> str:
    """Compact tick label: 3 significant digits, no '-0'."""
    text = f"{float(value):.3g}"
    return "0" if text in ("-0", "0", "-0.0") else text


def colorbar_array(name: str, vmin: float, vmax: float, label: str = "", width: int = 200,
                   bar_height: int = 10, ticks: tuple[float, ...] | None = None,
                   levels: int = COLOUR_LEVELS) -> np.ndarray:
    """A horizontal colour bar as a uint8 RGB array: label above, the gradient, tick labels below
    (min and max, plus 0 for a scale that straddles zero, else the midpoint)."""
    if ticks is None:
        mid = 0.0 if vmin < 0 < vmax else (vmin + vmax) / 2.0
        ticks = (vmin, mid, vmax)
    span = (vmax - vmin) or 1.0
    # a bar is its tick labels and their places: drawn once for all the figures that share them
    return _colorbar_image(name, label, width, bar_height, levels,
                           tuple((round((t - vmin) / span, 6), fmt(t)) for t in ticks)).copy()


@lru_cache(maxsize=512)
def _colorbar_image(name: str, label: str, width: int, bar_height: int, levels: int,
                    ticks: tuple[tuple[float, str], ...]) -> np.ndarray:
    """colorbar_array's drawing; `ticks` are (place along the bar in [0, 1], label)."""
    margin = 6
    label_h = text_size(label)[1] + 3 if label else 0
    tick_h = text_size("0")[1]
    height = label_h + bar_height + 3 + tick_h + 2
    # Wide enough for the label and the end tick labels, which are centred on the bar's ends.
    ends = max(text_size(text)[0] for _, text in ticks) // 2 + 1
    width = max(width, text_size(label)[0] if label else 0)
    canvas = np.full((height, width + 2 * max(margin, ends), 3), 255, dtype=np.uint8)
    x0 = max(margin, ends)
    gradient = apply_colormap(np.linspace(0.0, 1.0, width), name, levels=levels)   # as drawn
    canvas[label_h:label_h + bar_height, x0:x0 + width] = gradient[None, :, :]
    # Thin frame around the gradient and small tick marks.
    frame = (90, 90, 90)
    canvas[label_h, x0:x0 + width] = frame
    canvas[label_h + bar_height - 1, x0:x0 + width] = frame
    canvas[label_h:label_h + bar_height, x0] = frame
    canvas[label_h:label_h + bar_height, x0 + width - 1] = frame
    texts = []
    if label:
        texts.append((x0 + width / 2, 0, label, "center"))
    for place, text in ticks:
        x = int(round(x0 + place * (width - 1)))
        canvas[label_h + bar_height:label_h + bar_height + 2, x] = frame
        texts.append((x, label_h + bar_height + 3, text, "center"))
    canvas = draw_texts(canvas, texts)
    canvas.setflags(write=False)
    return canvas


def colorbar_png(name: str, vmin: float, vmax: float, label: str = "", width: int = 200) -> bytes:
    """PNG bytes of `colorbar_array`."""
    return png_bytes(colorbar_array(name, vmin, vmax, label, width=width))
