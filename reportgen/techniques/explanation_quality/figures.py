"""The figure of the explanation-quality analysis (reportgen.techniques.explanation_quality): one
table in two blocks (faithfulness correlation, infidelity, max-sensitivity; then ROAD's MoRF,
LeRF and gap), a row per map (the model's explanations, then the two baselines) and a column per
score, each cell the mean over the images, its 95% interval and, for an explanation, the verdict against
the baselines in words. Matplotlib, pyplot-free; no TensorFlow."""

from __future__ import annotations

import math

from reportgen.figures.encode import new_figure
from reportgen.figures.figure import Figure
from reportgen.figures.plots import figure_pair
from reportgen.figures.print_size import text_floor
from reportgen.results import intervals as iv
from reportgen.techniques.explanation_quality.numbers import (BASELINES, LABELS, METRICS, better,
                                                              key, verdict)

WIDTH = 7.5             # inches
DPI = 110
BETTER = "#d9f0d3"      # cell behind a score better than every baseline it is compared with
WORSE = "#f6d5d5"       # ... worse than one of them
SHORT = {"random_map": "random", "uniform_map": "uniform"}
SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
HEADS = {"faithfulness": ("faithfulness", "correlation"), "infidelity": ("infidelity", ""),
         "sensitivity": ("max-sensitivity", ""), "road_morf": ("ROAD MoRF", "score"),
         "road_lerf": ("ROAD LeRF", "score"), "road_gap": ("ROAD gap", "LeRF − MoRF")}
# the table's blocks, three score columns each
GROUPS = (("faithfulness", "infidelity", "sensitivity"), ("road_morf", "road_lerf", "road_gap"))
BOLD_SECOND = {"faithfulness", "road_morf", "road_lerf", "road_gap"}   # second head line: a name


def _get(params, name, default):
    value = getattr(params, name, default) if params is not None else default
    return default if value is None else value


def column_scale(values) -> int:
    """The power of ten a column is shown in: 0, or the exponent of its largest magnitude when
    that is under 0.01 (infidelities of class scores in [0, 1] are ~1e-6)."""
    finite = [abs(v) for v in values if v is not None and math.isfinite(v) and v != 0]
    if not finite or max(finite) >= 0.01:
        return 0
    return int(math.floor(math.log10(max(finite))))


def cell_verdict(summary: dict, metric: str, method: str) -> tuple[str, bool | None]:
    """Short words for a cell and whether it is better (True), worse (False) or neither."""
    results = {b: better(summary, metric, method, b) for b in METRICS[metric][2]}
    worse = [SHORT[b] for b, r in results.items() if r is False]
    good = [SHORT[b] for b, r in results.items() if r is True]
    if worse:
        return "worse than " + " and ".join(worse), False
    if good and len(good) == len(results):
        return "better than " + ("both" if len(good) > 1 else good[0]), True
    if good:
        return "better than " + " and ".join(good), None
    return "not told apart", None


def passed(summary: dict, method: str) -> list[str]:
    """The scores on which the method is better than every baseline it is compared with."""
    return [METRICS[m][0] for m in METRICS if cell_verdict(summary, m, method)[1] is True]


def procedure(summary: dict, params) -> str:
    """Every choice of the procedure, for the caption."""
    return (f"{summary.get('images', 0)} images of the evaluation set (stratified by class, seed "
            f"{_get(params, 'seed', 0)}); f = the score of the "
            f"{'true' if _get(params, 'target', 'true') == 'true' else 'predicted'} class, every "
            f"map explains that class and is placed on the input as in Explanation fidelity "
            f"(grid cells at their receptive-field centres, pixels outside count as 0). "
            f"Faithfulness correlation (Bhatt et al. 2020): Pearson correlation over "
            f"{summary.get('subsets', '?')} random subsets of {summary.get('subset_size', '?')} "
            f"pixels between the map's sum over the subset and the drop of f when the subset is "
            f"set to 0. Infidelity (Yeh et al. 2019): mean of (I^T Phi - (f(x) - f(x - I)))^2 "
            f"over {summary.get('perturbations', '?')} Gaussian perturbations I of sigma "
            f"{summary.get('noise_sigma', '?')}, Phi scaled by its optimal factor first. "
            f"Max-sensitivity (Yeh et al. 2019): the largest ||Phi(x + d) - Phi(x)|| / "
            f"||Phi(x)|| over {summary.get('sensitivity_samples', '?')} perturbations d uniform "
            f"in [-{summary.get('radius', '?')}, {summary.get('radius', '?')}] per input value, "
            f"the map recomputed on x + d. ROAD (Rong et al. 2022): at each of "
            f"{_fractions(summary)} of the pixels removed, most relevant first (MoRF) or least "
            f"relevant first (LeRF), and filled by noisy linear imputation (each the weighted "
            f"mean of its 8 neighbours, weights 1/6 direct and 1/12 diagonal, plus Gaussian "
            f"noise of sigma {summary.get('road_noise', '?')}), f of the imputed image; the "
            f"score is its mean over the fractions, the gap LeRF − MoRF (higher: more faithful); "
            f"ties in a map (the uniform map's all) broken by a seeded random order. Baselines: a random map (uniform noise, drawn afresh "
            f"for every input) and a uniform map (constant: no faithfulness correlation, "
            f"max-sensitivity 0). Grad-CAM++ of layer {summary.get('gradcam_layer', '?')}. "
            f"Intervals: 95% BCa bootstrap over the images; a verdict says better or worse only "
            f"where the 95% interval of the paired difference (the same images) excludes 0.")


def _fractions(summary: dict) -> str:
    fractions = summary.get("road_fractions") or []
    return ", ".join(f"{100 * p:g}%" for p in fractions) or "?"


def render(arrays, params, ctx) -> list[Figure]:
    from reportgen.techniques.explanation_quality import own_methods, summarize

    summary = summarize(arrays, params)
    own = own_methods(arrays)
    rows = [m for m in (*own, *BASELINES) if m in summary["methods"]]
    font = text_floor(WIDTH, DPI)
    line = font / 72 * 1.35                                     # inches per line of text
    header, row = 3 * line + 0.15, 3 * line + 0.12
    block = header + row * len(rows) + 0.12
    height = block * len(GROUPS) - 0.1
    fig = new_figure(WIDTH, height, dpi=DPI)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.set_xlim(0, WIDTH)
    ax.set_ylim(height, 0)                                      # inches from the top
    edges = [0.08, 1.95] + [1.95 + (WIDTH - 2.03) / 3 * (i + 1) for i in range(3)]
    for g, metrics in enumerate(GROUPS):
        _block(ax, summary, rows, metrics, g * block, edges, font, line, header, row)
    return figure_pair(fig, "table", caption(summary, params, ctx, own), svg_size=False)


def _block(ax, summary, rows, metrics, y0, edges, font, line, header, row) -> None:
    """One block of the table from y0 (inches from the top): its head and a row per map."""
    scales = {m: column_scale([summary.get(key(m, r)) for r in rows]) for m in metrics}
    heads = [("map", "", "")] + [(*HEADS[m], f"({METRICS[m][1]} is better)") for m in metrics]
    for c, lines in enumerate(heads):
        metric = metrics[c - 1] if c else None
        lines = list(lines)
        if metric and scales[metric]:
            lines[1] = f"(× 10{str(scales[metric]).translate(SUPERSCRIPT)})"
        for i, text in enumerate(lines):
            named = i == 1 and metric in BOLD_SECOND and not scales[metric]
            ax.text(edges[c] + 0.08, y0 + 0.08 + i * line, text, fontsize=font, va="top",
                    fontweight="bold" if i == 0 or named else "normal",
                    color="#000000" if i == 0 or named else "#444444")
    ax.axhline(y0 + header - 0.04, color="#333333", linewidth=0.8)
    for r, method in enumerate(rows):
        top = y0 + header + r * row
        name = LABELS[method].replace(" (baseline)", "")
        ax.text(edges[0] + 0.08, top + 0.06, name, fontsize=font, va="top",
                fontweight="normal" if method in BASELINES else "bold")
        if method in BASELINES:
            ax.text(edges[0] + 0.08, top + 0.06 + line, "(baseline)", fontsize=font, va="top",
                    color="#444444")
        for c, metric in enumerate(metrics, start=1):
            x = edges[c] + 0.08
            value = summary.get(key(metric, method))
            interval = iv.interval_of(summary, key(metric, method))
            scale = 10.0 ** -scales[metric]
            if value is None:
                ax.text(x, top + 0.06, "undefined", fontsize=font, va="top", color="#444444")
                continue
            ax.text(x, top + 0.06, iv.fixed_digits(value * scale, 3), fontsize=font, va="top")
            if interval is not None:
                low = iv.fixed_digits(interval.low * scale, 3)
                high = iv.fixed_digits(interval.high * scale, 3)
                ax.text(x, top + 0.06 + line, f"{low} to {high}", fontsize=font, va="top",
                        color="#444444")
            if method not in BASELINES:
                words, good = cell_verdict(summary, metric, method)
                if good is not None:
                    ax.add_patch(_cell(edges[c], top, edges[c + 1] - edges[c], row,
                                       BETTER if good else WORSE))
                ax.text(x, top + 0.06 + 2 * line, words, fontsize=font, va="top",
                        fontstyle="italic")
        ax.axhline(top + row, color="#bbbbbb", linewidth=0.5)


def _cell(x: float, y: float, width: float, height: float, color: str):
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), width, height, facecolor=color, edgecolor="none", zorder=0)


def caption(summary: dict, params, ctx, own) -> str:
    model = f"{ctx.model} step {ctx.step}: " if getattr(ctx, "model", "") else ""
    counts = ", ".join(f"{LABELS[m]} on {len(passed(summary, m))}" for m in own)
    verdicts = "; ".join(
        f"{LABELS[m]}: " + ", ".join(v for metric in METRICS for b in METRICS[metric][2]
                                     if (v := verdict(summary, metric, m, b)))
        for m in own)
    return (f"How far to trust these explanations? Of {len(METRICS)} scores, the maps beat "
            f"the random and uniform maps (by 95% intervals): {counts or 'none'}. Details: "
            f"Explanation quality, "
            f"{model}mean faithfulness correlation, infidelity, max-sensitivity and ROAD's MoRF "
            f"and LeRF scores and their gap per map, "
            f"each with its 95% interval (second line) and, for the model's explanations, the "
            f"verdict against the baselines (green: better than every baseline it is compared "
            f"with, red: worse than one). {verdicts}. {procedure(summary, params)}")
