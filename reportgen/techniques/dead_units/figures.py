"""Charts of the dead units (reportgen.techniques.dead_units); no TensorFlow.

Every chart is drawn once with matplotlib and saved as PNG (site) and SVG (papers).
"""

from __future__ import annotations

import numpy as np

from reportgen.figures.encode import new_figure
from reportgen.figures.figure import Figure
from reportgen.figures.plots import (figure_pair, grouped_bars, legend_below, legends_outside,
                                     lines_over_steps, styled, summary_value)
from reportgen.techniques.dead_units.numbers import FILTER_PREFIX, TYPE_PREFIX

DEAD_COLOUR = "#dc1414"       # panel_kit.DEAD
ALIVE_COLOUR = "#8098ba"      # panel_kit.BAR
FRACTIONS = (("dead_filter_fraction", "dead conv filters"),
             ("dead_type_fraction", "inactive capsule types"))


def _activation_word(ctx, layer: str) -> str:
    """"length" for vector capsules (their activation is their length), else "activation"."""
    description = getattr(ctx, "description", None)
    if description is not None:
        found = [c for c in description.capsule_layers if c.name == layer]
        if found and found[0].activation == "length":
            return "length"
    return "activation"


def render(arrays, params, ctx) -> list[Figure]:
    """One bar row per ReLU conv layer (each filter's largest output) and per grid capsule
    layer (each type's largest activation); dead units red and crossed."""
    filters = [k for k in arrays if k.startswith(FILTER_PREFIX)]
    types = [k for k in arrays if k.startswith(TYPE_PREFIX)]
    threshold = float(np.asarray(arrays["dead_type_threshold"]))
    rows = len(filters) + len(types)
    fig = new_figure(6.4, 1.5 * rows + 0.3)
    summary, words = [], set()
    with styled():
        axes = fig.subplots(rows, 1, squeeze=False)[:, 0]
        for ax, key in zip(axes, filters + types):
            values = np.asarray(arrays[key], np.float64)
            is_filter = key.startswith(FILTER_PREFIX)
            name = key[len(FILTER_PREFIX if is_filter else TYPE_PREFIX):]
            dead = values <= 0 if is_filter else values < threshold
            ax.bar(np.arange(len(values)), values, width=0.85, linewidth=0,
                   color=[DEAD_COLOUR if d else ALIVE_COLOUR for d in dead])
            if dead.any():    # zero-height bars: mark them
                ax.plot(np.flatnonzero(dead), np.zeros(int(dead.sum())), "x", color=DEAD_COLOUR,
                        markersize=4, clip_on=False)
            ax.set_xlim(-1, len(values))
            word = "output" if is_filter else _activation_word(ctx, name)
            if not is_filter:
                words.add(word)
            what = "filters dead" if is_filter else f"types never above {word} {threshold:g}"
            ax.set_title(f"{name}: {int(dead.sum())} of {len(values)} {what}")
            ax.set_ylabel(f"max {word}")
            ax.set_xlabel("filter" if is_filter else "capsule type")
            if not is_filter:
                ax.axhline(threshold, color="0.3", linestyle=":", linewidth=0.8)
            summary.append(f"{name}: {', '.join(map(str, np.flatnonzero(dead))) or 'none'}")
        fig.tight_layout()
    n = int(np.asarray(arrays["images"]))
    activation = " or ".join(sorted(words)) or "activation"
    caption = (f"Units that never fire: conv filters with output 0 on every image and capsule "
               f"types whose {activation} stays below {threshold:g}. Details: "
               f"Dead units over {n} evaluation images: the largest post-ReLU output of every "
               f"conv filter over all images and positions (only ReLU layers are checked), and "
               f"the largest {activation} of every capsule type of every capsule layer on a grid "
               f"over all images and grid cells (red crosses = dead or below the threshold "
               f"{threshold:g}, dotted line). Dead or inactive: {'; '.join(summary)}.")
    return figure_pair(fig, "dead_units", caption)


def render_trend(series, params, ctx) -> list[Figure]:
    """The dead fractions against training step (categorical axis, in the given order)."""
    if len(series) < 2:
        return []
    steps = [str(s) for s, _ in series]
    fig = new_figure(4.8, 3.0)
    with styled():
        ax = fig.subplots(1, 1)
        lines_over_steps(ax, series, FRACTIONS)
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel("fraction")
        fig.suptitle(f"Dead units over training, {ctx.model}".strip(", "), fontsize=9)
        legends_outside(fig)
    caption = (f"Dead units over {len(steps)} training steps, each on the same evaluation set: "
               f"the fractions of dead conv filters (post-ReLU output 0 on every image) and of "
               f"inactive capsule types (never above the threshold).")
    return figure_pair(fig, "dead_units_trend", caption)


def render_compare(series, params, ctx) -> list[Figure]:
    """The dead fractions of several models as grouped bars."""
    if len(series) < 2:
        return []
    models = [str(m) for m, _ in series]
    fig = new_figure(4.8, 3.3)
    with styled():
        ax = fig.subplots(1, 1)
        grouped_bars(ax, series, lambda summary: [summary_value(summary, k) for k, _ in FRACTIONS])
        ax.set_xticks(np.arange(len(FRACTIONS)), [label for _, label in FRACTIONS])
        ax.set_ylabel("fraction")
        ax.axhline(0, color="0.5", linewidth=0.6)
        fig.suptitle("Dead units, models compared", fontsize=9)
        legend_below(fig)
    caption = ("Dead units of " + ", ".join(models) + " (each on its own evaluation set at the "
               "chosen step): the fractions of dead conv filters and of inactive capsule types.")
    return figure_pair(fig, "dead_units_compare", caption)
