"""The CLRP evaluation's table and bars (reportgen.techniques.clrp_evaluation)."""

from __future__ import annotations

import numpy as np

from reportgen.figures.encode import new_figure
from reportgen.figures.figure import Figure
from reportgen.figures.plots import error_bars, figure_pair
from reportgen.results import intervals as iv
from reportgen.techniques.clrp_evaluation.numbers import (DISCRIMINATIVE, LABELS, METHODS,
                                                          disc_key, drop_key, pointing_key)

DPI = 100


def _cell(summary: dict, key: str, percent: bool = False) -> str:
    value = summary.get(key)
    if value is None:
        return "-"
    got = iv.interval_of(summary, key)
    scale, unit = (100.0, "%") if percent else (1.0, "")
    text = f"{value * scale:.1f}{unit}" if percent else f"{value:.3f}"
    if got is not None:
        text += (f" [{got.low * scale:.1f}, {got.high * scale:.1f}]" if percent
                 else f" [{got.low:.3f}, {got.high:.3f}]")
    return text


def _difference(summary: dict, a: str, b: str) -> str:
    got = iv.difference_of(summary, a, b)
    return "-" if got is None else f"{got.value:+.3f} [{got.low:+.3f}, {got.high:+.3f}]"


def verdict_text(summary: dict) -> str:
    """The plain sentences the intervals decide (never Gu et al.'s finding assumed)."""
    diff = _difference(summary, disc_key("clrp1"), disc_key("lrp"))
    got = iv.difference_of(summary, disc_key("clrp1"), disc_key("lrp"))
    first = ("No discriminativeness was measured" if got is None else
             "CLRP's top-2 maps differ more than LRP's" if got.low > 0 else
             "LRP's top-2 maps differ more than CLRP's" if got.high < 0 else
             "CLRP's and LRP's top-2 maps cannot be told apart by how much they differ")
    text = f"{first} (CLRP1 - LRP {diff}, 95% BCa)."
    order = summary.get("ablation_order")
    if order:
        agree = ("follows Gu et al.'s Table 1 ordering random < gradient < LRP < CLRP"
                 if summary.get("table1_order") else
                 "does not follow Gu et al.'s Table 1 ordering random < gradient < LRP < CLRP")
        separated = (", every step of it separated by its paired interval"
                     if summary.get("table1_order_separated") else
                     ", not every step of it separated by its paired interval"
                     if summary.get("table1_order") else "")
        text += f" Patch ablation, mean drop found: {order}; it {agree}{separated}."
    return text


def render(arrays, params, ctx) -> list[Figure]:
    from reportgen.techniques.clrp_evaluation import summarize

    summary = summarize(arrays, params)
    if not summary.get("supported"):
        fig = new_figure(6.0, 0.8, dpi=DPI)
        fig.text(0.02, 0.5, "No LRP for this network: a layer has no LRP rule "
                 "(e.g. ConvNet-CR-SF's squash).", va="center")
        return figure_pair(fig, "clrp_evaluation", "No LRP for this network. Details: a layer "
                           "of it has no LRP rule (rules for Conv2D, Dense, pooling, flatten "
                           "and a class sum, with ReLU or linear activations).", svg_size=False)
    rows = []
    for k in METHODS:
        rows.append([LABELS[k], _cell(summary, disc_key(k)) if k in DISCRIMINATIVE else "",
                     _cell(summary, pointing_key(k), percent=True), _cell(summary, drop_key(k))])
    fig = new_figure(8.0, 2.3, dpi=DPI)
    ax = fig.add_subplot(1, 1, 1)
    ax.axis("off")
    table = ax.table(cellText=rows, colLabels=["map", "1 - cos of top-2 maps",
                                               "pointing game hits", "logit drop, 9x9 ablation"
                                               if int(params.patch) == 9 else
                                               f"logit drop, {params.patch}x{params.patch}"],
                     loc="center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(9)
    table.scale(1.0, 1.4)
    fig.tight_layout()
    text = verdict_text(summary)
    procedure = (f"Details: {summary['images']} evaluation images (stratified). 1 - cosine "
                 f"between the maps of each image's two highest-scoring classes, over "
                 f"{summary.get('discriminativeness_images', 0)} images with no all-zero map "
                 f"(means, 95% BCa). Pointing game (Zhang et al. 2016): a hit when the map's "
                 f"maximum of the true class lies on the digit, its pixels above "
                 f"{summary['threshold']:g} ({summary.get('pointing_images', 0)} images with "
                 f"such pixels; hit rates, 95% Wilson-type). Ablation: the {summary['patch']}x"
                 f"{summary['patch']} patch at the map's maximum replaced by the evaluation "
                 f"set's mean image; drop = clean minus ablated logit of the true class (means, "
                 f"95% BCa); random: a uniformly random map. Gradient: |dS_y/dx| (Simonyan et "
                 f"al. 2014). Paired differences: CLRP2 - LRP "
                 f"{_difference(summary, disc_key('clrp2'), disc_key('lrp'))} (1 - cos); drop "
                 f"gradient - random "
                 f"{_difference(summary, drop_key('gradient'), drop_key('random'))}, "
                 f"LRP - gradient {_difference(summary, drop_key('lrp'), drop_key('gradient'))}, "
                 f"CLRP1 - LRP {_difference(summary, drop_key('clrp1'), drop_key('lrp'))}, "
                 f"CLRP2 - LRP {_difference(summary, drop_key('clrp2'), drop_key('lrp'))}.")
    figures = figure_pair(fig, "clrp_evaluation", f"{text} {procedure}", svg_size=False)
    return figures + _bars(summary, text, procedure)


def _bars(summary: dict, text: str, procedure: str) -> list[Figure]:
    fig = new_figure(8.0, 3.0, dpi=DPI)
    panels = ((DISCRIMINATIVE, disc_key, "1 - cos of top-2 maps", 1.0),
              (METHODS, pointing_key, "pointing game hits (%)", 100.0),
              (METHODS, drop_key, "logit drop at the patch", 1.0))
    for i, (methods, key, label, scale) in enumerate(panels):
        ax = fig.add_subplot(1, 3, i + 1)
        xs = np.arange(len(methods))
        values = [np.nan if summary.get(key(k)) is None else summary[key(k)] * scale
                  for k in methods]
        ax.bar(xs, values, color=[COLORS[k] for k in methods])
        got = [iv.interval_of(summary, key(k)) for k in methods]
        error_bars(ax, xs, [np.nan if g is None else g.low * scale for g in got],
                   [np.nan if g is None else g.high * scale for g in got])
        ax.set_xticks(xs, [LABELS[k] for k in methods], rotation=45, ha="right",
                      rotation_mode="anchor")
        ax.set_ylabel(label)
    fig.tight_layout()
    return figure_pair(fig, "clrp_evaluation_bars", f"{text} The same numbers as bars, with "
                       f"their 95% intervals. {procedure}", svg_size=False)


# one colour per map in every panel (Okabe-Ito)
COLORS = {"random": "#999999", "gradient": "#E69F00", "lrp": "#0072B2", "clrp1": "#D55E00",
          "clrp2": "#009E73"}
# the three measures, each its own panel of the trend and compare charts
PANELS = ((DISCRIMINATIVE, disc_key, "1 - cos of the top-2 maps"),
          (METHODS, pointing_key, "pointing game hit rate"),
          (METHODS, drop_key, "logit drop at the patch"))


def render_trend(history, params, ctx) -> list[Figure]:
    """The three measures per map over the training steps, each with its 95% band."""
    from reportgen.figures.plots import legend_below, lines_over_steps

    history = [(step, s) for step, s in history if s.get("supported")]
    if not history:
        return []
    fig = new_figure(8.0, 3.2, dpi=DPI)
    for i, (methods, key, label) in enumerate(PANELS):
        ax = fig.add_subplot(1, 3, i + 1)
        ax.set_prop_cycle(color=[COLORS[k] for k in methods])
        lines_over_steps(ax, history, [(key(k), LABELS[k]) for k in methods])
        ax.set_ylabel(label)
    legend_below(fig)
    model = getattr(ctx, "model", "")
    caption = (f"LRP vs contrastive LRP over training{' of ' + model if model else ''}: how "
               f"different the top-2 classes' maps are, pointing-game hits and the logit drop "
               f"of the patch ablation per map. Details: bands are the 95% intervals (BCa over "
               f"the images; Wilson-type for the hit rates); "
               f"{history[-1][1].get('images', 0)} images per step.")
    return figure_pair(fig, "trend", caption, svg_size=False)


def render_compare(entries, params, ctx) -> list[Figure]:
    """The three measures per map, the models side by side, with 95% error bars."""
    from reportgen.figures.plots import grouped_bars, legend_below

    entries = [(model, s) for model, s in entries if s.get("supported")]
    if not entries:
        return []
    fig = new_figure(8.0, 3.4, dpi=DPI)
    for i, (methods, key, label) in enumerate(PANELS):
        ax = fig.add_subplot(1, 3, i + 1)
        keys = [key(k) for k in methods]
        grouped_bars(ax, entries, lambda s, keys=keys: [
            np.nan if s.get(k) is None else s[k] for k in keys], keys=keys)
        ax.set_xticks(np.arange(len(methods)), [LABELS[k] for k in methods], rotation=45,
                      ha="right", rotation_mode="anchor")
        ax.set_ylabel(label)
    legend_below(fig)
    caption = ("LRP vs contrastive LRP across models: how different the top-2 classes' maps "
               "are, pointing-game hits and the logit drop of the patch ablation per map. "
               "Details: error bars are the 95% intervals (BCa over the images; Wilson-type for "
               "the hit rates); each model at its last step with the analysis.")
    return figure_pair(fig, "compare", caption, svg_size=False)
