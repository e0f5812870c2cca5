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
FONT_SIZE = 11
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


def draw_texts(canvas: np.ndarray, texts, size: int = FONT_SIZE) -> np.ndarray:
    """`canvas` (uint8 RGB) with text items drawn: (x, y, text, align[, rgb[, size]]) where y is
    the top, and x the left edge, centre or right edge for align "left", "center" or "right"."""
    if not texts:
        return canvas
    from PIL import Image, ImageDraw

    image = Image.fromarray(np.ascontiguousarray(canvas), mode="RGB")
    draw = ImageDraw.Draw(image)
    for item in texts:
        x, y, text, align = item[:4]
        color = tuple(item[4]) if len(item) > 4 and item[4] is not None else TEXT_COLOR
        item_size = item[5] if len(item) > 5 else size
        f = font(item_size)
        left = f.getbbox(text)[0] if text else 0
        width = text_size(text, item_size)[0]
        if align == "center":
            x = x - width / 2
        elif align == "right":
            x = x - width
        draw.text((int(round(x - left)), int(round(y))), text, fill=color, font=f)
    return np.asarray(image).copy()


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


def lut_indices(values01: np.ndarray) -> np.ndarray:
    """LUT rows for values in [0, 1] (clipped) rounded to COLOUR_LEVELS levels, each level's row
    as matplotlib picks it (floor(level * 256), 1 → the last row); NaN → -1."""
    v = np.asarray(values01, dtype=np.float64)
    nan = np.isnan(v)
    levels = np.round(np.clip(np.where(nan, 0.0, v), 0.0, 1.0) * (COLOUR_LEVELS - 1))
    idx = np.minimum(levels * 256 // (COLOUR_LEVELS - 1), 255).astype(np.intp)
    if nan.any():
        idx[nan] = -1
    return idx


def apply_colormap(values01: np.ndarray, name: str = "viridis",
                   nan_color: tuple[int, int, int] = NAN_COLOR) -> np.ndarray:
    """uint8 RGB (..., 3) of `values01` (any shape, clipped to [0, 1]; NaN → `nan_color`)."""
    idx = lut_indices(values01)
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
                   bar_height: int = 10, ticks: tuple[float, ...] | None = None) -> np.ndarray:
    """A horizontal colour bar as a uint8 RGB array: label above, the gradient, tick labels below
    (min and max, plus 0 for a scale that straddles zero, else the midpoint)."""
    if ticks is None:
        mid = 0.0 if vmin < 0 < vmax else (vmin + vmax) / 2.0
        ticks = (vmin, mid, vmax)
    margin = 6
    label_h = text_size(label)[1] + 3 if label else 0
    tick_h = text_size("0")[1]
    height = label_h + bar_height + 3 + tick_h + 2
    # Wide enough for the label and the end tick labels, which are centred on the bar's ends.
    ends = max(text_size(fmt(t))[0] for t in ticks) // 2 + 1
    width = max(width, text_size(label)[0] if label else 0)
    canvas = np.full((height, width + 2 * max(margin, ends), 3), 255, dtype=np.uint8)
    x0 = max(margin, ends)
    gradient = apply_colormap(np.linspace(0.0, 1.0, width), name)     # the levels figures use
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
    span = (vmax - vmin) or 1.0
    for t in ticks:
        x = int(round(x0 + (t - vmin) / span * (width - 1)))
        canvas[label_h + bar_height:label_h + bar_height + 2, x] = frame
        texts.append((x, label_h + bar_height + 3, fmt(t), "center"))
    return draw_texts(canvas, texts)


def colorbar_png(name: str, vmin: float, vmax: float, label: str = "", width: int = 200) -> bytes:
    """PNG bytes of `colorbar_array`."""
    return png_bytes(colorbar_array(name, vmin, vmax, label, width=width))
