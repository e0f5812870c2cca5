"""The figures of explanation localisation (reportgen.techniques.explanation_localisation):
grouped bars per map (the model's explanations and the random map) of the pointing game and
relevance mass accuracy against the explained digit, the other digit, and the uniform map's
score on the explained digit, each with its 95% interval; and a few example pairs with each
class's maps and the two digits' mask outlines. Matplotlib, pyplot-free; no TensorFlow."""

from __future__ import annotations

import numpy as np

from reportgen.figures.encode import new_figure
from reportgen.figures.figure import Figure
from reportgen.figures.plots import figure_pair
from reportgen.figures.print_size import text_floor
from reportgen.results import intervals as iv

WIDTH = 7.5
DPI = 110
BARS = (("own", "explained digit", "#1f77b4"), ("other", "other digit", "#ff7f0e"),
        ("uniform", "uniform map (explained digit)", "#999999"))
MASK_COLOURS = ("#1f77b4", "#ff7f0e")
SHORT = {"rpv_modified": "RPV mod.", "rpv_original": "RPV orig.", "builtin": "built-in",
         "gradcam_pp": "Grad-CAM++", "lrp": "LRP", "clrp1": "CLRP1"}


def _get(params, name, default):
    value = getattr(params, name, default) if params is not None else default
    return default if value is None else value


def bar_values(summary: dict, metric: str, method: str):
    """[(value, low, high) or None] for the BARS of one map."""
    from reportgen.techniques.explanation_localisation import key

    keys = (key(metric, method, "own"), key(metric, method, "other"),
            key(metric, "uniform_map", "own"))
    out = []
    for name in keys:
        interval = iv.interval_of(summary, name)
        value = summary.get(name)
        if value is None:
            out.append(None)
        else:
            out.append((value, interval.low, interval.high) if interval else (value, value, value))
    return out


def render_bars(summary: dict, params, ctx, own) -> list[Figure]:
    from reportgen.techniques.explanation_localisation import LABELS, METRICS

    groups = [*own, "random_map"]
    font = text_floor(WIDTH, DPI)
    fig = new_figure(WIDTH, 3.2, dpi=DPI)
    axes = fig.subplots(1, 2)
    width = 0.8 / len(BARS)
    for ax, metric in zip(axes, METRICS):
        for g, method in enumerate(groups):
            for b, ((_, label, colour), got) in enumerate(zip(BARS, bar_values(summary, metric,
                                                                             method))):
                if got is None:
                    continue
                value, low, high = got
                x = g + (b - 1) * width
                ax.bar(x, value, width, color=colour, label=label if g == 0 else None)
                ax.errorbar(x, value, yerr=[[value - low], [high - value]], color="#000000",
                            linewidth=0.8, capsize=2)
        ax.set_xticks(range(len(groups)), [LABELS[m] for m in groups], fontsize=font,
                      rotation=20, ha="right")
        ax.set_ylim(0, 1.05)
        ax.set_title(METRICS[metric], fontsize=font)
        ax.tick_params(labelsize=font)
    axes[0].set_ylabel("mean over the pairs", fontsize=font)
    fig.tight_layout(rect=(0, 0, 1, 0.88))
    fig.legend(*axes[0].get_legend_handles_labels(), fontsize=font, loc="upper center",
               ncol=len(BARS), frameon=False)
    return figure_pair(fig, "bars", caption(summary, params, ctx, own))


def render_examples(arrays, summary: dict, params, ctx, own) -> list[Figure]:
    from reportgen.techniques.explanation_localisation import METHODS

    images = np.asarray(arrays["example_images"], np.float32)
    masks = np.asarray(arrays["example_masks"], bool)
    maps = np.asarray(arrays["example_maps"], np.float32)
    labels = np.asarray(arrays["labels"])
    if not len(images):
        return []
    font = text_floor(WIDTH, DPI)
    columns = 1 + 2 * len(own)
    side = min(WIDTH / columns, 1.3)
    fig = new_figure(WIDTH, (side + 0.25) * len(images) + 0.2, dpi=DPI)
    axes = np.asarray(fig.subplots(len(images), columns, squeeze=False))
    for r in range(len(images)):
        panels = [(images[r].mean(-1), f"input\n{labels[r, 0]} + {labels[r, 1]}", None)]
        for method in own:
            for k in range(2):
                panels.append((maps[METHODS.index(method), r, k],
                               f"{SHORT[method]}\nclass {labels[r, k]}", k))
        for c, (picture, title, k) in enumerate(panels):
            ax = axes[r, c]
            ax.imshow(picture, cmap="gray" if k is None else "viridis", interpolation="nearest")
            for j in range(2):
                if masks[r, j].any():
                    ax.contour(masks[r, j].astype(float), levels=[0.5], colors=MASK_COLOURS[j],
                               linewidths=0.8 if k is None or k == j else 0.5)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(title, fontsize=font)
    fig.tight_layout()
    text = (f"Example pairs of Explanation localisation: each explanation computed for each of "
            f"the pair's two classes (column titles: method and class), with the outline of the "
            f"first digit's mask in blue and the second's in orange (ink above "
            f"{_get(params, 'ink_threshold', 0.5)}, overlap {_get(params, 'overlap', 'exclude')}"
            f"d). A map localises its class when its relevance sits inside that class's outline.")
    return figure_pair(fig, "examples", text)


def caption(summary: dict, params, ctx, own) -> str:
    from reportgen.techniques.explanation_localisation import METRICS, verdict

    model = f"{ctx.model} step {ctx.step}: " if getattr(ctx, "model", "") else ""
    verdicts = "; ".join(v for m in own for metric in METRICS
                         for b in ("uniform_map", "random_map", "other") if (v := verdict(summary, metric, m, b)))
    overlap = ("excluded from both masks" if _get(params, "overlap", "exclude") == "exclude"
               else "counted in both masks")
    return (f"Do the explanations point at the right digit? {model}{verdicts or 'no verdict'}. "
            f"Explanation localisation over {summary.get('images', 0)} MultiMNIST test pairs "
            f"(stratified by the first digit's class, seed {_get(params, 'seed', 0)}): for each "
            f"of a pair's two classes, each map explains that class and is scored against that "
            f"digit's mask (blue), the other digit's (orange), beside the uniform map's score on "
            f"the explained digit (grey). Pointing game (Zhang et al. 2016): a hit when the "
            f"map's maximum is in the mask; relevance mass accuracy (Arras et al. 2022): the "
            f"share of the positive relevance inside it. A digit's mask: its source image's ink "
            f"above {_get(params, 'ink_threshold', 0.5)}, pixels of both digits {overlap} (mean "
            f"mask: {summary.get('mask_area') or 0:.1%} of the image). Uniform map: relevance "
            f"mass = the mask's share of the image, pointing = the expected hit of a random "
            f"pixel (the same share); random map: uniform noise. Grad-CAM++ of layer "
            f"{summary.get('gradcam_layer', '?')}. Bars: the mean over the pairs (a pair's "
            f"value: the mean of its two classes'), whiskers its 95% BCa interval; a verdict "
            f"says above or below only where the 95% interval of the paired difference over "
            f"the same pairs excludes 0.")


def render(arrays, params, ctx) -> list[Figure]:
    from reportgen.techniques.explanation_localisation import own_methods, summarize

    summary = summarize(arrays, params)
    own = own_methods(arrays)
    return [*render_bars(summary, params, ctx, own),
            *render_examples(arrays, summary, params, ctx, own)]
