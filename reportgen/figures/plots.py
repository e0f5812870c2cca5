"""Helpers shared by the matplotlib charts of the dataset analyses; no TensorFlow.

One rc style for the charts, an axes style, a legend below the axes (never over the data), the
PNG (site, drawn at twice its layout size) + SVG and PDF (paper) files of one figure
(deterministic bytes, reportgen.figures.encode) and a summary lookup for trend/compare charts.
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
    Figure's width and height are the layout size (what the page's img tag says)."""
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
        ax.plot(x, [summary_value(s, key) for _, s in series], marker="o", markersize=3,
                linewidth=1.0, label=label)
    step_axis(ax, [str(step) for step, _ in series])


def grouped_bars(ax, series, values, label=lambda model, summary: str(model)) -> None:
    """Bars grouped by position, one bar per model of `series` ((model, summary) pairs) in each
    group: `values(summary)` gives the model's value per group, in the colour C<m>."""
    import numpy as np

    width = 0.8 / len(series)
    for m, (model, summary) in enumerate(series):
        heights = values(summary)
        ax.bar(np.arange(len(heights)) + (m - (len(series) - 1) / 2) * width, heights,
               width=width, label=label(model, summary), color=f"C{m % 10}")


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
