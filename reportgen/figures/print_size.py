"""How large a paper figure's text prints (README "Paper supplement"): captions.tex sets each
figure at its own width, LINE_WIDTH_PX layout pixels filling \\linewidth (TEXT_WIDTH_PT, the
article class at 10 pt), and never wider than \\linewidth nor taller than the text height
less its caption's lines (reportgen.commands.captions_tex). A figure larger than that shrinks,
and so does its text: no label may print under MIN_PRINTED_PT.

- `printed_scale`: printed size / size on the figure's page, from its layout width;
- `printed_pixel_pt`: the printed size of one layout pixel of a figure, its height and caption
  counted (what an image figure's Pillow text prints at);
- `text_floor`: the smallest font size (pt) a matplotlib figure of that width may use;
- `enlarge_small_text`: every visible text of a matplotlib figure raised to that floor;
- `fit_titles`: titles and x labels wider than their room broken onto two lines (never
  clipped, never running into a neighbour's);
- `tight_layout`: both, then matplotlib's tight layout, the figure made taller until the
  larger text fits (reportgen.figures.encode.new_figure's figures lay out through it).
"""

from __future__ import annotations

LINE_WIDTH_PX = 480                    # layout pixels that fill \linewidth
TEXT_WIDTH_PT = 345.0                  # \linewidth of the article class at 10 pt
MIN_PRINTED_PT = 7.0
MIN_SHARE = 0.25                       # captions.tex never sets a figure narrower than this
TEXT_HEIGHT_PT = 550.0                 # \textheight of the article class at 10 pt
BASELINE_PT = 12.0                     # its \baselineskip; half an em is 5 pt


def printed_width_share(width_px: float) -> float:
    """The share of \\linewidth captions.tex gives a figure of `width_px` layout pixels."""
    return min(1.0, max(MIN_SHARE, width_px / LINE_WIDTH_PX)) if width_px else 1.0


def caption_room_pt(characters: int) -> float:
    """The height captions.tex's \\reportgenheight leaves a figure whose caption has
    `characters` characters: the text height less a line per \\linewidth of half-em
    characters and 3 more, never under a fifth of the text height."""
    lines = round(characters * 5.0 / TEXT_WIDTH_PT) + 3
    return max(0.2 * TEXT_HEIGHT_PT, TEXT_HEIGHT_PT - BASELINE_PT * lines)


def printed_pixel_pt(width_px: float, height_px: float, characters: int = 0) -> float:
    """Points one layout pixel prints at: the width captions.tex gives the figure, or less when
    the figure would then be taller than its room (keepaspectratio)."""
    by_width = printed_width_share(width_px) * TEXT_WIDTH_PT / width_px
    return min(by_width, caption_room_pt(characters) / height_px) if height_px else by_width


def printed_scale(width_px: float, page_width_pt: float) -> float:
    """Printed size over the size on the figure's own page (a PDF of `page_width_pt`)."""
    return printed_width_share(width_px) * TEXT_WIDTH_PT / page_width_pt


def text_floor(width_in: float, dpi: float = 100.0) -> float:
    """The smallest font size (pt) that prints at MIN_PRINTED_PT in a matplotlib figure
    `width_in` inches wide (its layout width is width_in * dpi pixels), to 0.1 pt upwards."""
    import math

    scale = printed_scale(width_in * dpi, width_in * 72.0)
    return math.ceil(MIN_PRINTED_PT / scale * 10 - 1e-9) / 10


def enlarge_small_text(fig) -> bool:
    """Raise every visible, non-empty text of `fig` (titles, labels, ticks, legends,
    annotations) to the figure's floor; whether any changed."""
    from matplotlib.text import Text

    floor = text_floor(fig.get_figwidth(), fig.dpi)
    changed = False
    for text in fig.findobj(Text):
        if text.get_visible() and text.get_text().strip() and text.get_fontsize() < floor:
            text.set_fontsize(floor)
            changed = True
    return changed


def fit_titles(fig) -> None:
    """Break a figure's or an axes' title, or an x axis' label, that is wider than the figure
    (or its axes' share of it) at the space nearest its middle: neighbours never collide."""
    renderer = fig.canvas.get_renderer()
    titles = [(fig._suptitle, fig.bbox.width)] if fig._suptitle is not None else []
    titles += [(text, ax.get_position().width * fig.bbox.width * 1.1) for ax in fig.axes
               for text in (ax.title, ax.xaxis.label)]
    for title, room in titles:
        text = title.get_text()
        if "\n" in text or " " not in text.strip() or not title.get_visible():
            continue
        if title.get_window_extent(renderer).width <= 0.98 * room:
            continue
        middle = len(text) // 2
        spaces = [i for i, c in enumerate(text) if c == " "]
        cut = min(spaces, key=lambda i: abs(i - middle))
        title.set_text(text[:cut] + "\n" + text[cut + 1:])


def thin_ticks(fig) -> None:
    """At most 5 ticks on every numeric axis (enlarged labels would run into each other);
    axes whose ticks name categories (steps, models) keep theirs."""
    from matplotlib.ticker import AutoLocator, MaxNLocator

    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if type(axis.get_major_locator()) in (AutoLocator, MaxNLocator) \
                    and axis.get_scale() == "linear":
                axis.set_major_locator(MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]))


def tight_layout(fig, layout, tries: int = 6) -> None:
    """Enlarge the small text and fit the titles, then `layout()` (matplotlib's tight layout);
    while it cannot fit the decorations, the figure grows 20% taller and tries again."""
    import warnings

    from matplotlib.layout_engine import ConstrainedLayoutEngine

    if enlarge_small_text(fig):
        thin_ticks(fig)
    fit_titles(fig)
    if isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine):
        return      # laid out when drawn (a colorbar beside subplots); a tight layout would fail
    for _ in range(tries):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            layout()
        if not any("Tight layout not applied" in str(w.message) for w in caught):
            return
        width, height = fig.get_size_inches()
        fig.set_size_inches(width, height * 1.2)
    layout()
