"""Charts of accuracy under affine transforms (reportgen.techniques.affine_robustness).

No TensorFlow here. Each chart is drawn once with matplotlib and saved as PNG (site) and SVG
(paper), deterministically (reportgen.figures.encode).
"""

from __future__ import annotations

import math

import numpy as np

from reportgen.figures.encode import new_figure
from reportgen.figures.plots import (band, bounds, chance_line, figure_pair, interval_bounds,
                                     interval_note, legend_below, legends_outside,
                                     lines_over_steps, styled, summary_value)
from reportgen.probe.affine import FACTORS
from reportgen.figures.figure import Figure

LINE = "#d95f02"
TRANSFORM_NOTE = "bilinear resampling about the image centre, zero fill outside the image"


def _label(factor: str) -> str:
    return FACTORS[factor][2]


def _sweep_text(factor: str, values) -> str:
    values = [float(v) for v in values]
    if not values:
        return f"{factor}: none"
    steps = np.diff(values)
    if len(values) > 2 and np.allclose(steps, steps[0]):
        return f"{factor} {values[0]:g} … {values[-1]:g} step {steps[0]:g}"
    return f"{factor} {', '.join(f'{v:g}' for v in values)}"


def _panels(count: int):
    cols = min(3, max(1, count))
    return int(math.ceil(count / cols)), cols


def _axes(fig, count):
    rows, cols = _panels(count)
    axes = fig.subplots(rows, cols, sharey=True, squeeze=False)
    for extra in axes.flat[count:]:
        extra.set_axis_off()
    return axes.flat


def render(arrays, params, ctx) -> list[Figure]:
    from reportgen.techniques.affine_robustness.numbers import AFFNIST_REFERENCE, factors_in

    factors = factors_in(arrays)
    clean = float(np.asarray(arrays["clean_accuracy"]))
    n = int(np.asarray(arrays["class_counts"]).sum())
    if not factors:
        return []
    rows, cols = _panels(len(factors))
    fig = new_figure(2.6 * cols + 0.4, 2.1 * rows + 0.5)
    shaded = False
    with styled():
        axes = _axes(fig, len(factors))
        for ax, factor in zip(axes, factors):
            values = np.asarray(arrays[f"values_{factor}"], np.float64)
            accuracy = np.asarray(arrays[f"accuracy_{factor}"], np.float64)
            ax.plot(values, accuracy, color=LINE, marker="o", markersize=3, linewidth=1.2)
            swept = _sweep_bounds(arrays, factor)
            if swept is not None:
                band(ax, values, *swept, LINE)
                shaded = True
            ax.axhline(clean, color="0.35", linestyle="--", linewidth=0.8,
                       label=f"clean {clean:.1%}")
            chance_line(ax, len(np.asarray(arrays["class_counts"])))
            ax.axvline(FACTORS[factor][1], color="0.75", linestyle=":", linewidth=0.8)
            ax.set_xlabel(_label(factor))
            ax.set_ylim(-0.02, 1.02)
            ax.legend(loc="lower center", frameon=False)
        for ax in list(axes)[::cols]:
            ax.set_ylabel("accuracy")
        title = f"Accuracy under affine transforms, {ctx.model} step {ctx.step}" \
            if getattr(ctx, "model", "") else "Accuracy under affine transforms"
        fig.suptitle(title, fontsize=9)
        fig.tight_layout()
    sweeps = "; ".join(_sweep_text(f, arrays[f"values_{f}"]) for f in factors)
    caption = (f"Accuracy as each affine transform grows (clean accuracy {clean:.1%}, dashed). "
               f"Details: "
               f"Affine robustness: accuracy{_predicted_by(ctx)} of {n} "
               f"evaluation images, each transformed with every value of one factor at a time "
               f"({sweeps}; {TRANSFORM_NOTE}); dashed line: clean accuracy {clean:.1%}, dotted "
               f"line: the identity; grey dots: chance (1/K)"
               f"{f'; shaded: 95% intervals, Wilson over the {n:,} images' if shaded else ''}. "
               f"{AFFNIST_REFERENCE}.")
    return figure_pair(fig, "affine_robustness", caption)


def _sweep_bounds(arrays, factor: str):
    """The Wilson interval of the accuracy at each sweep value, from the per-image outcomes as
    the summary's (reportgen.results.intervals.proportion): lows, highs; None for results
    stored without per-image outcomes."""
    from reportgen.results.intervals import proportion

    labels = arrays.get("labels") if hasattr(arrays, "get") else None
    predicted = arrays.get(f"predicted_{factor}") if hasattr(arrays, "get") else None
    if labels is None or predicted is None or np.asarray(labels).size == 0:
        return None
    correct = np.asarray(predicted) == np.asarray(labels, np.int64)[None]          # (S, N)
    got = [proportion(row) for row in correct]
    return np.array([g.low for g in got]), np.array([g.high for g in got])


def _predicted_by(ctx) -> str:
    """" (prediction = the longest class capsule)" in the model's own terms
    (reportgen.capsnet.model_words); "" without its description."""
    from reportgen.capsnet.model_words import prediction_words

    description = getattr(ctx, "description", None)
    return f" (prediction = {prediction_words(description)})" if description is not None else ""


def render_trend(series, params, ctx) -> list[Figure]:
    """Clean accuracy and each factor's mean accuracy over its sweep, against training step."""
    if len(series) < 2:
        return []
    steps = [str(s) for s, _ in series]
    x = np.arange(len(steps))
    factors = [f for f in FACTORS if any(f"{f}_values" in s for _, s in series)]
    fig = new_figure(6.4, 3.2)
    with styled():
        ax = fig.subplots()
        ax.plot(x, [summary_value(s, "clean_accuracy") for _, s in series], color="0.2",
                linestyle="--", marker="o", markersize=3, linewidth=1.2, label="clean")
        band(ax, x, *interval_bounds([s for _, s in series], "clean_accuracy"), "0.2")
        lines_over_steps(ax, series, [(f"{factor}_mean_accuracy", f"{factor} (mean over sweep)")
                                      for factor in factors])
        chance_line(ax, len(getattr(ctx, "class_names", ()) or ()))
        ax.set_ylabel("accuracy")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"Affine robustness over training, {ctx.model}".strip(", "))
        legends_outside(fig)
    caption = (f"Affine robustness over {len(steps)} training steps: clean accuracy (dashed) "
               f"and, per factor, the accuracy averaged over that factor's sweep (every value "
               f"weighted equally, identity included; {TRANSFORM_NOTE}), on the same "
               f"evaluation set at every step.")
    keys = ["clean_accuracy"] + [f"{factor}_mean_accuracy" for factor in factors]
    note = interval_note([s for _, s in series], keys, "shaded")
    return figure_pair(fig, "affine_robustness_trend", f"{caption} {note}".strip())


def render_compare(series, params, ctx) -> list[Figure]:
    """One panel per factor, the models' accuracy curves overlaid."""
    from reportgen.techniques.affine_robustness.numbers import AFFNIST_REFERENCE

    if len(series) < 2:
        return []
    factors = [f for f in FACTORS if any(f"{f}_values" in s for _, s in series)]
    if not factors:
        return []
    rows, cols = _panels(len(factors))
    fig = new_figure(2.6 * cols + 0.4, 2.1 * rows + 0.7)
    with styled():
        axes = list(_axes(fig, len(factors)))
        for ax, factor in zip(axes, factors):
            for m, (model, summary) in enumerate(series):
                if f"{factor}_values" not in summary:
                    continue
                line, = ax.plot(summary[f"{factor}_values"], summary[f"{factor}_accuracy"],
                                marker="o", markersize=3, linewidth=1.0, label=str(model))
                sweep = range(len(summary[f"{factor}_values"]))
                lows, highs = zip(*(bounds(summary, f"{factor}_accuracy", i) for i in sweep))
                band(ax, summary[f"{factor}_values"], lows, highs, line.get_color())
                clean = summary.get("clean_accuracy")
                if clean is not None:
                    ax.axhline(clean, color=line.get_color(), linestyle="--", linewidth=0.6)
            ax.set_xlabel(_label(factor))
            ax.set_ylim(-0.02, 1.02)
        for ax in axes[::cols]:
            ax.set_ylabel("accuracy")
        fig.suptitle("Accuracy under affine transforms, models compared", fontsize=9)
        legend_below(fig)
    models = ", ".join(str(m) for m, _ in series)
    note = interval_note([s for _, s in series], [f"{f}_accuracy" for f in factors])
    caption = (f"Affine robustness of {models}: accuracy per value of each factor (one panel "
               f"per factor, {TRANSFORM_NOTE}); dashed lines in each model's colour: its clean "
               f"accuracy. {note + ' ' if note else ''}{AFFNIST_REFERENCE}.")
    return figure_pair(fig, "affine_robustness_compare", caption)
