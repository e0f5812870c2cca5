"""The figure of the randomisation sanity checks (reportgen.techniques.explanation_randomisation):
one panel per explanation, the similarity to the trained map as the weighted layers are
randomised from the output side down (x: the layers randomised so far), a line per measure with
its 95% interval band, the random-class test at the right, the random map's similarity and the
pass threshold as horizontal lines; the caption states every verdict. Matplotlib, pyplot-free;
no TensorFlow."""

from __future__ import annotations

import numpy as np

from reportgen.figures.encode import new_figure
from reportgen.figures.figure import Figure
from reportgen.figures.plots import band, bounds, error_bars, figure_pair, style_axes
from reportgen.results.technique_numbers import METHOD_LABELS
from reportgen.techniques.explanation_randomisation.similarity import LABELS, MEASURES

FONT = 8
DPI = 110
COLORS = {"spearman_abs": "#d95f02", "spearman_signed": "#7570b3", "ssim": "#1b9e77"}
STYLES = {"spearman_abs": "-", "spearman_signed": "--", "ssim": "-."}


def depth_labels(layers) -> list[str]:
    """x tick labels: "trained", then each layer as it is added to the randomised ones."""
    return ["trained"] + [f"+ {name}" for name in layers]


def procedure(summary: dict, params) -> str:
    layers = summary.get("layers", [])
    seed = getattr(params, "seed", 0) if params is not None else 0
    return (f"{summary.get('images', 0)} images of the evaluation set (stratified by class, seed "
            f"{seed}); every map explains the true class and is placed on the input as in "
            f"Explanation fidelity, and compared over the pixels its grid covers. Cascading "
            f"randomisation (Adebayo "
            f"et al. 2018): on a copy of the network, the weighted layers "
            f"{', '.join(layers) or '(none)'} are re-initialised in that order (output side "
            f"first, cumulatively) with their own Keras initializers, every map recomputed "
            f"after each. Similarity to the trained map per image: Spearman rank correlation of "
            f"|map| and of the signed map, SSIM (Wang et al. 2004; 7x7 window) of |map| scaled "
            f"to [0, 1]. Random class: the map of a uniformly drawn other class (Sixt et al. "
            f"2020). Baseline: a random map (uniform noise on the covered pixels). Grad-CAM++ of layer "
            f"{summary.get('gradcam_layer', '?')}. Intervals: 95% BCa bootstrap over the "
            f"images. A map passes when, with every layer randomised, the upper end of every "
            f"similarity's interval is below {summary.get('threshold', 0.5):g}.")


def render(arrays, params, ctx) -> list[Figure]:
    from reportgen.techniques.explanation_randomisation import summarize

    summary = summarize(arrays, params)
    methods = summary["methods"]
    layers = summary["layers"]
    xs = np.arange(len(layers) + 1)
    width = 5.0 + 1.0 * len(xs)
    fig = new_figure(width, 2.6 * max(1, len(methods)) + 0.6, dpi=DPI)
    axes = np.atleast_1d(fig.subplots(max(1, len(methods)), 1, squeeze=False)[:, 0])
    logit_x = len(xs) + 0.4
    for row, (ax, method) in enumerate(zip(axes, methods)):
        for measure in MEASURES:
            key = f"cascade_{measure}_{method}"
            values = np.asarray([np.nan if v is None else v for v in summary.get(key, [])],
                                np.float64)
            if values.size != len(xs):
                continue
            ends = [bounds(summary, key, d) for d in range(len(xs))]
            ax.plot(xs, values, STYLES[measure], color=COLORS[measure], linewidth=1.4,
                    marker="o", markersize=3, label=LABELS[measure])
            band(ax, xs, [e[0] for e in ends], [e[1] for e in ends], COLORS[measure])
            logit = summary.get(f"random_logit_{measure}_{method}")
            if logit is not None:
                low, high = bounds(summary, f"random_logit_{measure}_{method}")
                ax.plot([logit_x], [logit], "D", color=COLORS[measure], markersize=4)
                error_bars(ax, [logit_x], [low], [high], colour=COLORS[measure])
        base = summary.get(f"baseline_spearman_abs_{method}")
        if base is not None:
            ax.axhline(base, color="0.45", linestyle=(0, (4, 2)), linewidth=0.9,
                       label="a random map's Spearman of |map|")
        ax.axhline(summary["threshold"], color="0.2", linestyle=":", linewidth=0.9,
                   label=f"pass threshold {summary['threshold']:g}")
        ax.set_xticks([*xs, logit_x], [*depth_labels(layers), "random\nclass"],
                      fontsize=FONT - 1, rotation=30, ha="right")
        ax.set_xlim(-0.3, logit_x + 0.5)
        ax.set_ylim(-1.05, 1.05)
        ax.set_ylabel("similarity to the\ntrained map", fontsize=FONT)
        ax.set_title(f"{METHOD_LABELS[method]}: {summary[f'verdict_{method}']}",
                     fontsize=FONT + 1)
        style_axes(ax)
        if row == 0:                   # the same lines in every panel: one legend
            ax.legend(fontsize=FONT - 1, frameon=False, loc="upper left",
                      bbox_to_anchor=(1.01, 1))
    if methods:
        axes[-1].set_xlabel("layers randomised (from the output side down)", fontsize=FONT)
    fig.tight_layout()
    return figure_pair(fig, "cascade", caption(summary, params, ctx), svg_size=False)


def caption(summary: dict, params, ctx) -> str:
    model = f"{ctx.model} step {ctx.step}: " if getattr(ctx, "model", "") else ""
    verdicts = "; ".join(summary[f"verdict_text_{m}"] for m in summary["methods"])
    return (f"Do the explanations depend on what the network learned? {verdicts or 'No map'}. "
            f"Details: Randomisation sanity checks, {model}mean similarity of each map to the "
            f"trained network's (shaded: 95% interval) as layers are randomised, and the map of a "
            f"random other class (diamonds, right). {procedure(summary, params)}")
