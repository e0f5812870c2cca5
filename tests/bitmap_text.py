"""The Pillow-drawn text of image figures as the supplement prints it: every text item that
reportgen.figures.colormaps.draw_texts draws (its box on the canvas it is drawn on, and its
font size in px), recorded while a figure is rendered; a figure prints a layout pixel at
reportgen.figures.print_size.printed_pixel_pt of its size and caption."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass

from reportgen.figures import colormaps
from reportgen.figures.print_size import printed_pixel_pt


@dataclass(frozen=True)
class DrawnText:
    call: int                  # which draw_texts call (boxes compare within one canvas only)
    canvas: tuple[int, int]    # its canvas' (height, width)
    text: str
    size: int                  # font size, px
    x0: float
    y0: float
    x1: float
    y1: float


@contextlib.contextmanager
def recorded_texts():
    """Yields the list every draw_texts call appends its items to (the colour bars' cache is
    cleared first, so cached bars draw again)."""
    original = colormaps.draw_texts
    drawn: list[DrawnText] = []
    calls = [0]

    def recording(canvas, texts, size=colormaps.FONT_SIZE):
        texts = list(texts)
        calls[0] += 1
        for item in texts:
            x, y, text, align = item[:4]
            if not text:
                continue
            item_size = item[5] if len(item) > 5 and item[5] else size
            width, height = colormaps.text_size(text, item_size)
            left = x - width / 2 if align == "center" else (x - width if align == "right" else x)
            drawn.append(DrawnText(calls[0], tuple(canvas.shape[:2]), text, item_size, left, y, left + width, y + height))
        return original(canvas, texts, size)

    bound = [(m, name) for m in list(sys.modules.values())
             if getattr(m, "__name__", "").startswith("reportgen")
             for name in ("draw_texts",) if getattr(m, name, None) is original]
    colormaps._colorbar_image.cache_clear()
    for module, name in bound:
        setattr(module, name, recording)
    try:
        yield drawn
    finally:
        for module, name in bound:
            setattr(module, name, original)
        colormaps._colorbar_image.cache_clear()


# what captions.tex counts besides a figure's own caption: "Figure 12: ", its title ("Decoder:
# dimension perturbation: difference."), the context ("MNIST_model_number_3, step 10-1000,
# input test #1234.") and its citations, generously
CAPTION_EXTRA = 160


def on_figure(drawn: list[DrawnText], figure, figures) -> list[DrawnText]:
    """The texts drawn for `figure` of the rendered `figures`: on its own canvas, or on a
    canvas that is no figure's (a colour bar's, pasted into one)."""
    sheets = {(f.height, f.width) for f in figures if f.kind == "png"}
    return [t for t in drawn if t.canvas == (figure.height, figure.width)
            or t.canvas not in sheets]


def smallest_printed(drawn: list[DrawnText], figure) -> tuple[float, str]:
    """(printed font size in pt, text) of the smallest text drawn on `figure` (a Figure)."""
    item = min(drawn, key=lambda t: t.size)
    pixel = printed_pixel_pt(figure.width, figure.height, len(figure.caption) + CAPTION_EXTRA)
    return item.size * pixel, item.text


def collisions(drawn: list[DrawnText]) -> list[tuple[str, str]]:
    """Pairs of texts drawn on one canvas whose boxes overlap (by more than half a pixel)."""
    found = []
    for i, a in enumerate(drawn):
        for b in drawn[i + 1:]:
            if a.call == b.call and min(a.x1, b.x1) - max(a.x0, b.x0) > 0.5 \
                    and min(a.y1, b.y1) - max(a.y0, b.y0) > 0.5:
                found.append((a.text, b.text))
    return found
