"""Helpers shared by the matplotlib charts of the dataset analyses; no TensorFlow.

One rc style for the charts, an axes style, a legend below the axes (never over the data), the
PNG (site, drawn at twice its layout size) + SVG and PDF (paper) files of one figure
(deterministic bytes, reportgen.figures.encode), a summary lookup for trend/compare charts, and
the 95% intervals of the scores they plot (reportgen.results.intervals): a shaded band under a
line over steps, an error bar on a point or a bar, and the caption's words for them.
"""

from __future__ import annotations

from reportgen.figures.encode import PIXEL_RATIO, matplotlib_bytes, palette_png, png_size
from reportgen.figures.figure import Figure

STYLE = {"font.size": 8, "axes.titlesize": 9, "axes.labelsize": 8, "legend.fontsize": 7,
         "xtick.labelsize": 7, "ytick.labelsize": 7, "axes.spines.top": False,
         "axes.spines.right": False}
FONT = 8


def styled():
    """The rc context of STYLE (use as `with styled(): ...`)."""
    import matplotlib

    return matplotlib.rc_context(STYLE)


def style_axes(ax) -> None:
    """Small tick labels, a light grid behind the data, no top and right spines."""
    ax.tick_params(labelsize=FONT)
    ax.grid(True, color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def legend_below(fig, fontsize: float = FONT - 1):
    """Lay `fig` out (tight_layout) with one legend under all its axes, outside every plotting
    area so that it never covers data: the labels of every axes, each once, in as many columns
    as fit the figure's width; the figure grows by the legend's height. Returns the legend
    (None without labels). Use in place of fig.tight_layout()."""
    from reportgen.figures.print_size import text_floor

    fontsize = max(fontsize, text_floor(fig.get_figwidth(), fig.dpi))
    found: dict[str, object] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            found.setdefault(label, handle)
    fig.tight_layout()
    if not found:
        return None
    renderer = fig.canvas.get_renderer()
    for columns in range(len(found), 0, -1):
        legend = fig.legend(list(found.values()), list(found), loc="lower center",
                            bbox_to_anchor=(0.5, 0.0), ncols=columns, frameon=False,
                            fontsize=fontsize)
        if columns == 1 or legend.get_window_extent(renderer).width <= 0.98 * fig.bbox.width:
            break
        legend.remove()
    width, height = fig.get_size_inches()
    extra = legend.get_window_extent(renderer).height / fig.dpi + 0.05
    fig.set_size_inches(width, height + extra)
    fig.tight_layout(rect=(0.0, extra / (height + extra), 1.0, 1.0))
    return legend


def legends_outside(fig, fontsize: float = FONT - 1) -> list:
    """Lay `fig` out with its legends outside every plotting area, so none covers a curve: one
    legend under all the axes when one axes has labels (`legend_below`); else each axes' own
    under it, clear of its tick and axis labels (the same colour can mean another series in
    another axes). Use in place of fig.tight_layout(); returns the legends."""
    from reportgen.figures.print_size import text_floor

    labelled = [ax for ax in fig.axes if ax.get_legend_handles_labels()[0]]
    if len(labelled) <= 1:
        legend = legend_below(fig, fontsize)
        return [legend] if legend is not None else []
    fontsize = max(fontsize, text_floor(fig.get_figwidth(), fig.dpi))
    for ax in labelled:
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    legends = []
    for ax in labelled:
        below = ax.get_window_extent(renderer).y0 - ax.get_tightbbox(renderer).y0
        pad = (below * 72.0 / fig.dpi + 2.0) / fontsize          # in font sizes, as matplotlib's
        handles, labels = ax.get_legend_handles_labels()
        legends.append(ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0),
                                 borderaxespad=pad, frameon=False, fontsize=fontsize))
    # the figure grows by the tallest legend: the plotting areas keep their height
    extra = max(legend.get_window_extent(renderer).height for legend in legends) / fig.dpi
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, height + extra)
    fig.tight_layout()
    return legends


def figure_pair(fig, stem: str, caption: str, svg_size: bool = True) -> list[Figure]:
    """The PNG (site), SVG and PDF (paper) files of one matplotlib figure, same caption; no
    text under what prints at 7 pt (reportgen.figures.print_size).

    The SVG and PDF carry the PNG's layout size unless `svg_size` is False (then 0 x 0).
    """
    from reportgen.figures.print_size import enlarge_small_text

    if enlarge_small_text(fig) and not fig.legends:    # laid out without tight_layout
        fig.tight_layout()
    png = png_figure(fig, f"{stem}.png", caption)
    width, height = (png.width, png.height) if svg_size else (0, 0)
    return [png,
            Figure(f"{stem}.svg", matplotlib_bytes(fig, "svg"), "svg", caption, width, height),
            Figure(f"{stem}.pdf", matplotlib_bytes(fig, "pdf"), "pdf", caption, width, height)]


def png_figure(fig, name: str, caption: str) -> Figure:
    """The PNG file of one matplotlib figure, drawn at PIXEL_RATIO times its layout size; the
    Figure's width and height are the layout size (what the page's img tag says). The figure
    is first snapped to whole layout pixels (a legend that grew it by 411.6 px would draw 823
    pixels, not the 2 x 412 its img tag says)."""
    width_in, height_in = fig.get_size_inches()
    fig.set_size_inches(round(width_in * fig.dpi) / fig.dpi, round(height_in * fig.dpi) / fig.dpi)
    png = palette_png(matplotlib_bytes(fig, "png", dpi=fig.dpi * PIXEL_RATIO))
    width, height = png_size(png)
    return Figure(name, png, "png", caption, round(width / PIXEL_RATIO),
                  round(height / PIXEL_RATIO))


def summary_value(summary: dict, key: str) -> float:
    """summary[key] as a float; NaN when missing or None."""
    value = summary.get(key)
    return float(value) if value is not None else float("nan")


# --- trend (over training steps) and compare (across models) charts ----------------------------

def step_axis(ax, steps: list[str]) -> None:
    """A categorical x axis of training steps, in the given order (labels turned when many)."""
    import numpy as np

    ax.set_xticks(np.arange(len(steps)), steps, rotation=60 if len(steps) > 6 else 0)
    ax.set_xlabel("training step")


def lines_over_steps(ax, series, keys) -> None:
    """One line per (summary key, label) of `keys` against the steps of `series` ((step,
    summary) pairs), with step_axis."""
    import numpy as np

    x = np.arange(len(series))
    for key, label in keys:
        line, = ax.plot(x, [summary_value(s, key) for _, s in series], marker="o", markersize=3,
                        linewidth=1.0, label=label)
        band(ax, x, *interval_bounds([s for _, s in series], key), line.get_color())
    step_axis(ax, [str(step) for step, _ in series])


def grouped_bars(ax, series, values, label=lambda model, summary: str(model),
                 keys=None, intervals=None) -> None:
    """Bars grouped by position, one bar per model of `series` ((model, summary) pairs) in each
    group: `values(summary)` gives the model's value per group, in the colour C<m>. Each bar
    carries its 95% interval as an error bar where the summary records one: that of the
    summary key of its group (`keys`), or `intervals(summary)` = (lows, highs) per group."""
    import numpy as np

    if keys is not None:
        def intervals(summary):
            return list(zip(*(bounds(summary, key) for key in keys)))
    width = 0.8 / len(series)
    for m, (model, summary) in enumerate(series):
        heights = values(summary)
        xs = np.arange(len(heights)) + (m - (len(series) - 1) / 2) * width
        ax.bar(xs, heights, width=width, label=label(model, summary), color=f"C{m % 10}")
        if intervals is not None and len(heights):
            error_bars(ax, xs, *intervals(summary))


MAX_DECADE_LABELS = 4       # labelled decades on a log x axis of one panel's width


def plain_log_ticks(ax, axis: str = "y") -> None:
    """Log-scale tick labels as plain numbers (0.01, 0.1, 1) rather than powers of ten, whose
    exponents print at two thirds of the labels' size."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    from matplotlib.ticker import LogLocator

    target = ax.yaxis if axis == "y" else ax.xaxis
    if axis == "x":
        # plain labels of many decades ("0.0001" beside "1e-05") collide on a panel's width:
        # at most MAX_DECADE_LABELS + 1 labelled decades
        target.set_major_locator(LogLocator(base=10, numticks=MAX_DECADE_LABELS + 1))
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    target.set_minor_formatter(NullFormatter())


def chance_line(ax, classes: int) -> None:
    """A dotted line at chance accuracy, 1/K, labelled for the legend (every accuracy axis
    shows what guessing gives)."""
    if classes and classes > 1:
        ax.axhline(1.0 / classes, color="0.55", linestyle=(0, (1, 2)), linewidth=1.0,
                   label=f"chance 1/{classes}")


# --- 95% intervals (reportgen.results.intervals) --------------------------------------------------

INTERVAL_EDGE = "0.15"      # error bars on bars: dark on any fill
BAND_ALPHA = 0.18


def bounds(summary: dict, key: str, index: int | None = None) -> tuple[float, float]:
    """(low, high) of the 95% interval a summary records for `key` (its `index`-th for a
    list-valued score); (NaN, NaN) where it records none (older results)."""
    from reportgen.results.intervals import interval_of

    try:
        got = interval_of(summary, key, index)
    except (IndexError, KeyError, TypeError):
        got = None
    return (got.low, got.high) if got is not None else (float("nan"), float("nan"))


def interval_bounds(summaries, key: str, index: int | None = None):
    """The lows and the highs (two arrays) of `key`'s interval in each of `summaries`, NaN
    where one has none."""
    import numpy as np

    pairs = [bounds(s, key, index) for s in summaries]
    return (np.array([p[0] for p in pairs], np.float64),
            np.array([p[1] for p in pairs], np.float64))


def band(ax, xs, lows, highs, colour, alpha: float = BAND_ALPHA):
    """A shaded band from `lows` to `highs` at `xs` under a line (a score over steps or a
    sweep), unlabelled (no legend entry), gaps where an end is NaN; None, and nothing drawn,
    when no x has an interval."""
    import numpy as np

    xs, lows, highs = (np.asarray(a, np.float64) for a in (xs, lows, highs))
    known = np.isfinite(lows) & np.isfinite(highs)
    if not known.any():
        return None
    return ax.fill_between(xs, np.where(known, lows, np.nan), np.where(known, highs, np.nan),
                           where=known, color=colour, alpha=alpha, linewidth=0, zorder=1.5)


def error_bars(ax, xs, lows, highs, colour=INTERVAL_EDGE, linewidth: float = 0.9):
    """Vertical bars from `lows` to `highs` at `xs` (the intervals of points or bars), one
    LineCollection, none where an end is NaN; None, and nothing drawn, when none has one."""
    import numpy as np

    xs, lows, highs = (np.asarray(a, np.float64) for a in (xs, lows, highs))
    known = np.isfinite(lows) & np.isfinite(highs) & np.isfinite(xs)
    if not known.any():
        return None
    return ax.vlines(xs[known], lows[known], highs[known], colors=colour, linewidth=linewidth,
                     zorder=3)


_METHOD_WORDS = {"Wilson": "Wilson", "BCa bootstrap over images": "BCa bootstrap",
                 "BCa bootstrap over images (of the whole statistic)":
                     "BCa bootstrap of the whole statistic"}


def interval_note(summaries, keys, mark: str = "shaded") -> str:
    """The caption's words for the intervals a chart draws of `keys` in `summaries`: "Shaded:
    95% intervals, Wilson over the 1,000 images." ("" when none of them records one)."""
    methods, counts = [], set()
    for summary in summaries:
        entries = (summary or {}).get("intervals") or {}
        for key in keys:
            entry = entries.get(key)
            if not isinstance(entry, dict):
                continue
            words = _METHOD_WORDS.get(entry.get("method"), str(entry.get("method")))
            if words not in methods:
                methods.append(words)
            n = entry.get("n")
            counts.update(v for v in (n if isinstance(n, list) else [n]) if v)
    if not methods:
        return ""
    over = (f"the {next(iter(counts)):,} images" if len(counts) == 1 else "each score's images")
    return f"{mark[:1].upper()}{mark[1:]}: 95% intervals, {' / '.join(methods)} over {over}."
