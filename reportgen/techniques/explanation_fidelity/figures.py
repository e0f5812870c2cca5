"""Figures of the explanation-fidelity analysis (reportgen.techniques.explanation_fidelity).

Plots are matplotlib figures (pyplot-free, deterministic bytes via encode.matplotlib_bytes), each
written as a PNG for the site and an SVG for papers; the example maps are a PNG. No TensorFlow.
"""

from __future__ import annotations

import numpy as np

from reportgen.figures.encode import new_figure
from reportgen.figures.plots import (band, error_bars, figure_pair, interval_bounds,
                                     interval_note, legend_below, png_figure, style_axes,
                                     summary_value)
from reportgen.figures.figure import Figure
from reportgen.results import intervals as iv
from reportgen.techniques.explanation_fidelity.numbers import (METHOD_LABELS as LABELS, METHODS,
                                                               area_under_curve, builtin_method,
                                                               deletion_aopc, own_methods,
                                                               summarized_methods)

COLORS = {"rpv_modified": "#d95f02", "rpv_original": "#e6ab02", "gradcam_pp": "#1b9e77",
          "random": "#7f7f7f", "builtin": "#e7298a"}
STYLES = {"rpv_modified": "-", "rpv_original": "--", "gradcam_pp": "-", "random": ":",
          "builtin": "-"}
AGREEMENT_COLOR = "#7570b3"
# The model's own explanation (reportgen.techniques.explanation_fidelity.builtin_explanation),
# in words.
SUBJECTS = {"rpv_modified": "RPV", "builtin": "the built-in explanation"}
MAPS = {"rpv_modified": "RPV modified (a_i w_ij a_j along every routing path) and original "
                        "((w_ij a_j)^2 per hop)",
        "builtin": "the explanation map the model's family builds in (for GraCapsNet, its "
                   "graph-pooling attention averaged over the heads, E)"}
FONT = 8
DPI = 110


# --- helpers ------------------------------------------------------------------------------------

def _get(params, name, default):
    value = getattr(params, name, default) if params is not None else default
    return default if value is None else value


def _start_text(params) -> str:
    if _get(params, "insertion_start", "blur") == "blank":
        return "an all-zero (blank) image"
    return (f"the input blurred by a Gaussian of sigma {float(_get(params, 'blur_sigma', 3.0)):g} "
            f"px (edge-padded)")


def _target_text(params) -> str:
    return ("the true class" if _get(params, "target", "true") == "true"
            else "the predicted class")


def _score(ctx, params) -> str:
    """Score f: the target class's score in the model's own terms
    (reportgen.capsnet.model_words); the models' class scores across models."""
    from reportgen.capsnet.model_words import class_score_words

    description = getattr(ctx, "description", None)
    if description is None:
        return f"the class score of {_target_text(params)} (each model's own)"
    return class_score_words(description, _target_text(params))


def _score_label(ctx) -> str:
    from reportgen.capsnet.model_words import score_label

    description = getattr(ctx, "description", None)
    return score_label(description) if description is not None else "class score"


def procedure(params, images: int, patches: int, grid: str, layer: str,
              builtin: str | tuple[str, ...] = "rpv_modified", score: str = "") -> str:
    """Every procedure choice, for the captions; `builtin` the model's own explanation (the
    models' own explanations, for a comparison); `score` what f is (`_score`)."""
    score = score or f"the length of the class capsule of {_target_text(params)}"
    maps = "; ".join(MAPS[b] for b in ((builtin,) if isinstance(builtin, str) else builtin))
    patch = int(_get(params, "patch", 5))
    return (f"{images} images of the evaluation set (stratified by class, seed "
            f"{_get(params, 'seed', 0)}); inputs cut into {patch}x{patch}-pixel patches "
            f"({patches} patches; edge patches may be smaller). Score f = {score}; every map "
            f"explains that class. A patch's "
            f"relevance is the mean of the map placed on the input (grid cells drawn at their "
            f"receptive-field centres, pixels outside count as 0); patches are taken in "
            f"descending relevance, ties in random order; 'random order' is a seeded random "
            f"permutation per image. Deletion replaces the patches with seeded uniform noise in "
            f"[0, 1] (one noise image per input, shared by all methods); insertion starts from "
            f"{_start_text(params)} and restores the patches. Maps: {maps} on the "
            f"{grid} primary grid; Grad-CAM++ of layer {layer}.")


def _names(ctx) -> tuple[str, ...]:
    return tuple(getattr(ctx, "class_names", ()) or ())


# --- one result ---------------------------------------------------------------------------------

def render(arrays, params, ctx) -> list[Figure]:
    deletion = np.asarray(arrays["deletion"], np.float64)                 # (M, N, P+1)
    insertion = np.asarray(arrays["insertion"], np.float64)
    fractions = np.asarray(arrays["fractions"], np.float64)
    _, n, steps = deletion.shape
    gh, gw = (int(g) for g in np.asarray(arrays["grid_shape"]).reshape(-1))
    grid = f"{gh}x{gw}"
    layer = str(_get(params, "gradcam_layer", "conv1"))
    builtin = builtin_method(arrays)
    text = procedure(params, n, steps - 1, grid, layer, builtin, _score(ctx, params))
    model = f"{ctx.model} step {ctx.step}: " if getattr(ctx, "model", "") else ""

    # Curves: deletion and insertion, the mean over images in its 95% BCa bootstrap band
    # (every k from one set of draws: the images resampled with their whole curves).
    fig = new_figure(8.0, 3.3, dpi=DPI)
    axes = fig.subplots(1, 2)
    methods = own_methods(deletion) if n else ()        # a model's other methods are NaN
    for ax, mode, curves in ((axes[0], "deletion", deletion), (axes[1], "insertion", insertion)):
        for method in methods:
            m = METHODS.index(method)
            mean = curves[m].mean(axis=0)
            ends = iv.bootstrap_means(curves[m])
            if mode == "deletion":
                number = f"AOPC {deletion_aopc(curves[m]).mean():.3f}"
            else:
                number = f"AUC {area_under_curve(curves[m]).mean():.3f}"
            ax.plot(fractions, mean, STYLES[method], color=COLORS[method], linewidth=1.4,
                    label=f"{LABELS[method]} ({number})")
            band(ax, fractions, [e.low for e in ends], [e.high for e in ends], COLORS[method])
        ax.set_title(f"{mode.capitalize()} ({'noise' if mode == 'deletion' else 'restore'})",
                     fontsize=FONT + 1)
        ax.set_xlabel("fraction of patches perturbed" if mode == "deletion"
                      else "fraction of patches restored", fontsize=FONT)
        ax.set_ylabel(f"target {_score_label(ctx)} (mean)", fontsize=FONT)
        ax.set_xlim(0, 1)
        style_axes(ax)
        if n:
            ax.legend(fontsize=FONT - 1, frameon=False)
    fig.suptitle(f"{model}deletion and insertion curves ({n} images)", fontsize=FONT + 2)
    fig.tight_layout()
    caption = (f"Which saliency map finds what the model uses? The class score as the most "
               f"relevant patches are deleted (left: faster drop = more faithful) or inserted "
               f"(right: faster rise = more faithful). Details: "
               f"Explanation fidelity, {model}mean target {_score_label(ctx)} (shaded: its 95% "
               f"interval at each k, a BCa bootstrap over the {n:,} images) as patches are deleted (left; a faithful map drops "
               f"fast: higher AOPC, AOPC = mean over k = 0 … P of f(x_0) - f(x_k)) or inserted "
               f"(right; a faithful map rises fast: higher AUC, trapezoid area over the fraction "
               f"of patches k/P). {text}")
    figures = figure_pair(fig, "curves", caption, svg_size=False)

    # Agreement: distribution of the per-image Spearman correlations.
    figures += _agreement_figure(arrays, grid, layer, model, text, builtin)
    figures += _examples_figure(arrays, ctx, grid, layer, model, builtin)
    return figures


def _agreement_figure(arrays, grid, layer, model, text, builtin="rpv_modified"):
    fig = new_figure(5.0, 3.2, dpi=DPI)
    ax = fig.subplots()
    bins = np.linspace(-1.0, 1.0, 21)
    stats = []
    rows = [("agreement", LABELS[builtin], "bar")]
    if builtin == "rpv_modified":
        rows.append(("agreement_original", "RPV (original)", "step"))
    for key, label, style in rows:
        values = np.asarray(arrays[key], np.float64)
        valid = values[~np.isnan(values)]
        if len(valid) == 0:
            stats.append(f"{label}: no image with two non-constant maps")
            continue
        mean = float(valid.mean())
        if style == "bar":
            ax.hist(valid, bins=bins, color=AGREEMENT_COLOR, alpha=0.75,
                    label=f"{label} vs Grad-CAM++ (mean {mean:.2f})")
        else:
            ax.hist(valid, bins=bins, histtype="step", color="#333333", linewidth=1.2,
                    label=f"{label} vs Grad-CAM++ (mean {mean:.2f})")
        ax.axvline(mean, color=AGREEMENT_COLOR if style == "bar" else "#333333",
                   linestyle="--", linewidth=1)
        stats.append(f"{label}: mean {mean:.3f}, median {np.median(valid):.3f}, std "
                     f"{valid.std():.3f} over {len(valid)} of {len(values)} images")
    ax.set_xlim(-1, 1)
    ax.set_xlabel("Spearman rank correlation per image", fontsize=FONT)
    ax.set_ylabel("images", fontsize=FONT)
    ax.set_title(f"{model}{LABELS[builtin]} vs Grad-CAM++ ({layer}) on the {grid} grid",
                 fontsize=FONT + 1)
    style_axes(ax)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=FONT - 1, frameon=False, loc="upper left")
    fig.tight_layout()
    pooled = ("Grad-CAM++ of primary_conv is already on the grid" if layer == "primary_conv" else
              f"the {layer} Grad-CAM++ map is placed on the input at its cells' receptive-field "
              f"centres and average-pooled over each primary cell's centre tile (the input "
              f"pixels nearest the cell's receptive-field centre)")
    subject = SUBJECTS[builtin]
    thesis = (" The thesis found the two comparable when the primary grid is large "
              "(MNIST_LPcaps, 18x18)." if builtin == "rpv_modified" else "")
    caption = (f"Do {subject} and Grad-CAM++ point at the same places? Spearman correlation of "
               f"the two maps, one value per image. Details: "
               f"Agreement of {subject} and Grad-CAM++, {model}distribution of Spearman's rank "
               f"correlation (average ranks for ties) between the two maps of the same class at "
               f"the {grid} primary-grid resolution, one value per image; {pooled}. Images where "
               f"either map is constant are left out. {'; '.join(stats)}.{thesis} {text}")
    return figure_pair(fig, "agreement", caption, svg_size=False)


def _examples_figure(arrays, ctx, grid, layer, model, builtin="rpv_modified"):
    images = np.asarray(arrays.get("example_images", np.zeros((0,))), np.float64)
    if images.ndim != 4 or len(images) == 0:
        return []
    names = _names(ctx)
    rows = len(images)
    label = LABELS[builtin]
    columns = (("input", None), (label, "example_rpv"),
               (f"Grad-CAM++ {layer}", "example_gradcam"),
               (f"{label} on {grid} grid", "example_rpv_grid"),
               (f"Grad-CAM++ pooled to {grid}", "example_gradcam_grid"))
    fig = new_figure(1.6 * len(columns), 1.7 * rows, dpi=DPI)
    axes = np.asarray(fig.subplots(rows, len(columns))).reshape(rows, len(columns))
    gray = images.mean(axis=-1) if images.shape[-1] > 1 else images[..., 0]
    for r in range(rows):
        target = int(np.asarray(arrays["example_targets"])[r])
        name = names[target] if 0 <= target < len(names) else str(target)
        rho = float(np.asarray(arrays["example_agreement"])[r])
        for c, (title, key) in enumerate(columns):
            ax = axes[r, c]
            ax.set_xticks([])
            ax.set_yticks([])
            if key is None:
                ax.imshow(gray[r], cmap="gray", vmin=0, vmax=1, interpolation="nearest")
                ax.set_ylabel(f"class {name}\nrho {rho:.2f}" if not np.isnan(rho)
                              else f"class {name}\nrho n/a", fontsize=FONT)
            else:
                values = np.asarray(arrays[key][r], np.float64)
                finite = values[~np.isnan(values)]
                low = float(finite.min()) if len(finite) else 0.0
                top = float(finite.max()) if len(finite) else 1.0
                top = top if top > low else low + 1.0
                if key in ("example_rpv", "example_gradcam"):
                    ax.imshow(gray[r], cmap="gray", vmin=0, vmax=1, interpolation="nearest")
                    ax.imshow(np.ma.masked_invalid(values), cmap="viridis", vmin=low, vmax=top,
                              alpha=0.6, interpolation="nearest")
                else:
                    ax.imshow(values, cmap="viridis", vmin=low, vmax=top,
                              interpolation="nearest")
            if r == 0:
                ax.set_title(title, fontsize=FONT)
    fig.suptitle(f"{model}example maps of the target class", fontsize=FONT + 1)
    fig.tight_layout()
    caption = (f"{SUBJECTS[builtin][:1].upper()}{SUBJECTS[builtin][1:]} and Grad-CAM++ side by side on a few images. Details: "
               f"Example maps, {model}the input, {label} and Grad-CAM++ ({layer}) placed "
               f"on the input at their cells' receptive-field centres (viridis overlay, 60% "
               f"opacity; every map scaled min-max on its own), and the two maps on the {grid} "
               f"primary grid whose Spearman correlation (rho) is measured; one row per image "
               f"(first image of each class).")
    return [png_figure(fig, "examples.png", caption)]


# --- over training steps and across models ------------------------------------------------------

def _three_panels(width: float, height: float):
    """A figure of three axes, two above one (side by side they would print too small: the
    supplement fits a figure to the text width, reportgen.figures.print_size)."""
    fig = new_figure(width, height, dpi=DPI)
    grid = fig.subplots(2, 2)
    grid[1, 1].set_axis_off()
    return fig, [grid[0, 0], grid[0, 1], grid[1, 0]]


def render_trend(history, params, ctx) -> list[Figure]:
    """Deletion AOPC, insertion AUC per method and the mean agreement over training steps."""
    history = list(history)
    if not history:
        return []
    steps = [str(s) for s, _ in history]
    x = np.arange(len(steps))
    fig, axes = _three_panels(6.4, 5.4)
    methods = summarized_methods(s for _, s in history)  # only the model's own methods
    for ax, key, title in ((axes[0], "deletion_aopc", "deletion AOPC (higher = faithful)"),
                           (axes[1], "insertion_auc", "insertion AUC (higher = faithful)")):
        for method in methods:
            ax.plot(x, [summary_value(s, f"{key}_{method}") for _, s in history], STYLES[method],
                    marker="o", markersize=3, color=COLORS[method], label=LABELS[method])
            band(ax, x, *interval_bounds([s for _, s in history], f"{key}_{method}"),
                 COLORS[method])
        ax.set_title(title, fontsize=FONT + 1)
    last = history[-1][1]
    builtin = last.get("builtin_method") if last.get("builtin_method") in MAPS else "rpv_modified"
    lines = [("agreement_mean", LABELS[builtin], AGREEMENT_COLOR)]
    if builtin == "rpv_modified":
        lines.append(("agreement_original_mean", "RPV (original)", "#333333"))
    for key, label, color in lines:
        axes[2].plot(x, [summary_value(s, key) for _, s in history], marker="o", markersize=3,
                     color=color, label=f"{label} vs Grad-CAM++")
        band(axes[2], x, *interval_bounds([s for _, s in history], key), color)
    axes[2].set_title("mean Spearman agreement", fontsize=FONT + 1)
    axes[2].set_ylim(-1, 1)
    for ax in axes:
        ax.set_xticks(x)
        ax.set_xticklabels(steps, rotation=90 if len(steps) > 8 else 0, fontsize=FONT - 1)
        ax.set_xlabel("training step", fontsize=FONT)
        style_axes(ax)
    model = getattr(ctx, "model", "")
    fig.suptitle(f"{model + ': ' if model else ''}explanation fidelity over training",
                 fontsize=FONT + 2)
    legend_below(fig)
    text = procedure(params, int(last.get("images", 0)), int(last.get("patches", 0)),
                     str(last.get("grid", "?")), str(last.get("gradcam_layer", "?")), builtin,
                     _score(ctx, params))
    caption = (f"Explanation fidelity over training steps{' of ' + model if model else ''}: "
               f"deletion AOPC and insertion AUC per saliency method, and the mean per-image "
               f"Spearman correlation of {SUBJECTS[builtin]} and Grad-CAM++ on the primary "
               f"grid. {text}")
    keys = [f"{k}_{m}" for k in ("deletion_aopc", "insertion_auc") for m in methods]
    note = interval_note([s for _, s in history], keys + [k for k, _, _ in lines], "shaded")
    return figure_pair(fig, "trend", f"{caption} {note}".strip(), svg_size=False)


def render_compare(entries, params, ctx) -> list[Figure]:
    """Models side by side: AOPC / AUC per method (grouped bars) and agreement per model."""
    entries = list(entries)
    if not entries:
        return []
    models = [str(m) for m, _ in entries]
    x = np.arange(len(models))
    # what some model has, the built-in explanations first (beside each other)
    methods = sorted(summarized_methods(s for _, s in entries) or ("random",),
                     key=lambda m: m in ("gradcam_pp", "random"))
    width = 0.8 / len(methods)
    fig, axes = _three_panels(max(6.4, 2.0 + 1.3 * len(models)), 6.0)
    for ax, key, title in ((axes[0], "deletion_aopc", "deletion AOPC (higher = faithful)"),
                           (axes[1], "insertion_auc", "insertion AUC (higher = faithful)")):
        for m, method in enumerate(methods):
            ax.bar(x + (m - (len(methods) - 1) / 2) * width,
                   [summary_value(s, f"{key}_{method}") for _, s in entries], width,
                   color=COLORS[method], label=LABELS[method])
            error_bars(ax, x + (m - (len(methods) - 1) / 2) * width,
                       *interval_bounds([s for _, s in entries], f"{key}_{method}"))
        ax.set_title(title, fontsize=FONT + 1)
    means = np.array([summary_value(s, "agreement_mean") for _, s in entries])
    stds = np.array([summary_value(s, "agreement_std") for _, s in entries])
    axes[2].bar(x, np.nan_to_num(means), 0.6, yerr=np.nan_to_num(stds), color=AGREEMENT_COLOR,
                capsize=3, error_kw={"linewidth": 0.8})
    grids = {str(s.get("grid", "?")) for _, s in entries}
    if len(grids) > 1:               # one grid for all: the title says it
        for i, (_, s) in enumerate(entries):
            axes[2].annotate(f"{s.get('grid', '?')} grid", (x[i], 0),
                             xytext=(0, -10 if means[i] >= 0 else 4),
                             textcoords="offset points", ha="center", fontsize=FONT - 1)
    axes[2].axhline(0, color="#999999", linewidth=0.6)
    axes[2].set_ylim(-1, 1)
    axes[2].set_ylabel("mean ± std over images", fontsize=FONT)
    recorded = {str(s.get("builtin_method") or "rpv_modified") for _, s in entries}
    own = [m for m in MAPS if m in recorded] or ["rpv_modified"]
    subject = SUBJECTS[own[0]] if len(own) == 1 else "own explanation"
    axes[2].set_title(f"{subject} vs Grad-CAM++\n(Spearman"
                      + (f", {next(iter(grids))} grid)" if len(grids) == 1 else ")"),
                      fontsize=FONT + 1)
    for ax in axes:
        ax.set_xticks(x)
        ax.set_xticklabels(models, rotation=30 if len(models) > 3 else 0, ha="right"
                           if len(models) > 3 else "center", fontsize=FONT - 1)
        style_axes(ax)
    fig.suptitle("Explanation fidelity across models", fontsize=FONT + 2)
    legend_below(fig)
    grids = ", ".join(f"{m}: {s.get('grid', '?')} grid, Grad-CAM++ {s.get('gradcam_layer', '?')}"
                      f", {s.get('images', '?')} images" for m, s in entries)
    whose = (LABELS[own[0]] if len(own) == 1 else
             "each model's own explanation (" + ", ".join(
                 f"{m}: {LABELS.get(str(s.get('builtin_method') or 'rpv_modified'), '?')}"
                 for m, s in entries) + ")")
    thesis = (" — the thesis found RPV and Grad-CAM++ comparable when the primary grid is "
              "large (MNIST_LPcaps, 18x18)" if "rpv_modified" in own else "")
    caption = (f"Explanation fidelity across models ({grids}): deletion AOPC and insertion AUC "
               f"per saliency method ({', '.join(LABELS[m] for m in methods)}; a model's bars "
               f"are only of its own methods), and the mean (± standard deviation) per-image "
               f"Spearman correlation of {whose} and Grad-CAM++ on each model's primary "
               f"grid{thesis}. "
               + procedure(params, int(entries[0][1].get("images", 0)),
                           int(entries[0][1].get("patches", 0)), "model's",
                           str(_get(params, "gradcam_layer", "conv1")), tuple(own),
                           _score(None, params)))
    note = interval_note([s for _, s in entries], [f"{k}_{m}" for k in ("deletion_aopc",
                         "insertion_auc") for m in methods], "error bars on the AOPC and AUC bars")
    return figure_pair(fig, "compare", f"{caption} {note}".strip(), svg_size=False)
