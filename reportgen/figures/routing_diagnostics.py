"""Charts of the routing diagnostics (reportgen.techniques.routing_diagnostics); no TensorFlow.

Every chart is drawn once with matplotlib and saved twice: PNG for the site and SVG for papers
(deterministic bytes, reportgen.figures.encode).
"""

from __future__ import annotations

import math

import numpy as np

from reportgen.figures.encode import new_figure
from reportgen.figures.plots import figure_pair, legend_below, styled, summary_value
from reportgen.figures.figure import Figure

TRUE_COLOUR = "#d95f02"       # panels.HIGHLIGHT: the true class
WRONG_COLOUR = "#5a7bb0"      # the strongest wrong class


def _class_name(ctx, k: int) -> str:
    names = getattr(ctx, "class_names", ()) or ()
    return str(names[k]) if k < len(names) else str(k)


def _grid(count: int, max_cols: int = 5) -> tuple[int, int]:
    cols = min(max_cols, max(1, count))
    return int(math.ceil(count / cols)), cols


def _where(ctx) -> str:
    return f"{ctx.model} step {ctx.step}" if getattr(ctx, "model", "") else ""


def _shares(hist: np.ndarray) -> np.ndarray:
    totals = hist.sum(1, keepdims=True)
    return np.divide(hist, totals, out=np.zeros_like(hist), where=totals > 0)


def _entropy(arrays, params, ctx) -> list[Figure]:
    hist = _shares(np.asarray(arrays["entropy_hist"], np.float64))
    edges = np.asarray(arrays["entropy_edges"], np.float64)
    deficit = _shares(np.asarray(arrays["entropy_deficit_hist"], np.float64))
    deficit_edges = np.asarray(arrays["entropy_deficit_edges"], np.float64)
    means = np.asarray(arrays["entropy_mean_class"], np.float64)
    classes, bins = hist.shape
    log_k = float(np.asarray(arrays["entropy_max"]))
    n = int(np.asarray(arrays["entropy_image_mean"]).size)
    colours = [f"C{k % 10}" for k in range(classes)]
    fig = new_figure(8.0, 3.0)
    with styled():
        ax_h, ax_d = fig.subplots(1, 2)
        for k in range(classes):
            mean = f"{means[k]:.4f}" if np.isfinite(means[k]) else "–"
            ax_h.stairs(hist[k], edges, color=colours[k], linewidth=1.0,
                        label=f"{_class_name(ctx, k)} (mean {mean})")
            ax_d.stairs(deficit[k], deficit_edges, color=colours[k], linewidth=1.0)
        ax_h.axvline(log_k, color="0.4", linestyle=":", linewidth=0.8)
        ax_h.set_xlim(0, log_k * 1.02)
        ax_h.set_xlabel("coupling entropy H (nats)")
        ax_h.set_ylabel("share of primary capsules")
        ax_h.legend(frameon=False, fontsize=6, ncols=2 if classes > 5 else 1,
                    title="class capsule", title_fontsize=6, loc="upper left")
        ax_d.set_xscale("log")
        ax_d.set_xlim(deficit_edges[0], deficit_edges[-1])
        ax_d.set_xlabel("log K − H (nats, log scale; 0 = uniform)")
        ax_d.set_title("distance from uniform routing")
        where = f" — {_where(ctx)}" if _where(ctx) else ""
        ax_h.set_title(f"Coupling entropy per class capsule{where}")
        fig.tight_layout()
    if params.grouping == "argmax":
        grouping = ("each primary capsule is counted once, under the class capsule it couples to "
                    "most (argmax_j c_ij; option grouping='argmax')")
    else:
        grouping = ("each primary capsule is counted under every class capsule j with weight "
                    "c_ij (option grouping='weighted')")
    overall = float(np.asarray(arrays["entropy_mean"]))
    caption = (f"How decided routing is: the mean entropy of the coupling coefficients is "
               f"{overall:.3g} nats, against {log_k:.3f} (log {classes}) for uniform couplings. "
               f"Details: "
               f"Routing diagnostics, coupling entropy: H_i = -Σ_j c_ij log c_ij of every primary "
               f"capsule's final coupling coefficients, for all primary capsules of {n} "
               f"evaluation images; {grouping}. Left: histogram of H, {bins} equal bins over "
               f"[0, log {classes} = {log_k:.3f}] nats, as shares per class capsule (dotted line: "
               f"log {classes}, uniform couplings, what a single routing iteration gives). "
               f"Right: the same capsules' distance from uniform, log {classes} − H, in {bins} "
               f"log-spaced bins from {deficit_edges[0]:g} to {log_k:.3f} nats (at or below "
               f"{deficit_edges[0]:g}: first bin). Mean over all capsules {overall:.4f} nats "
               f"({overall / log_k:.2%} of the maximum); weighted by primary-capsule length "
               f"{float(np.asarray(arrays['entropy_length_weighted_mean'])):.4f} nats.")
    return figure_pair(fig, "entropy", caption)


def _agreement(arrays, params, ctx) -> list[Figure]:
    share = np.asarray(arrays["agreement_share"], np.float64)
    length = np.asarray(arrays["agreement_length"], np.float64)
    coupling = np.asarray(arrays["agreement_coupling"], np.float64)
    edges = np.asarray(arrays["agreement_edges"], np.float64)
    mean_cos = np.asarray(arrays["agreement_mean_cos"], np.float64)
    weighted = np.asarray(arrays["agreement_coupling_cos"], np.float64)
    n = int(np.asarray(arrays["entropy_image_mean"]).size)
    centres = (edges[:-1] + edges[1:]) / 2
    fig = new_figure(6.4, 5.2)
    with styled():
        axes = fig.subplots(3, 1, sharex=True)
        for r, (label, colour) in enumerate((("true class", TRUE_COLOUR),
                                              ("strongest wrong class", WRONG_COLOUR))):
            axes[0].stairs(share[r], edges, color=colour, linewidth=1.2,
                           label=f"{label} (mean cos {mean_cos[r]:.3f})")
            axes[1].plot(centres, length[r], color=colour, linewidth=1.0, marker=".",
                         markersize=2)
            axes[2].plot(centres, coupling[r], color=colour, linewidth=1.0, marker=".",
                         markersize=2)
        axes[0].set_ylabel("share of votes")
        axes[0].legend(loc="upper left", frameon=False)
        axes[1].set_ylabel("mean vote length")
        axes[2].set_ylabel("mean c_ij")
        axes[2].set_xlabel("cos(v_j, û_j|i)")
        axes[2].set_xlim(-1, 1)
        axes[0].set_title(f"Vote agreement {_where(ctx)}".strip())
        fig.tight_layout()
    bins = len(centres)
    caption = (f"Do the votes agree with the class capsule they build? Cosine of votes and class "
               f"capsule, true class against the strongest wrong class (coupling-weighted means "
               f"{weighted[0]:.3f} and {weighted[1]:.3f}). Details: "
               f"Routing diagnostics, vote agreement: for every one of {n} evaluation images, the "
               f"cosine between class capsule v_j and each primary capsule's vote "
               f"û_j|i = W_ij u_i "
               f"for j = the true class (orange) and j = the strongest wrong class (the longest "
               f"other class capsule, blue); {bins} equal bins over [-1, 1] (a vote parallel to "
               f"v_j falls in the last bin; a zero vote counts as cosine 0). Top: share of all "
               f"votes per bin (each curve sums to 1); middle: mean vote length |û_j|i| per bin; "
               f"bottom: mean final coupling coefficient c_ij per bin (gaps = empty bins). "
               f"Coupling-weighted mean cosine: true {weighted[0]:.3f}, wrong {weighted[1]:.3f}.")
    return figure_pair(fig, "vote_agreement", caption)


def _agreement_images(arrays, params, ctx) -> list[Figure]:
    shares = np.asarray(arrays["agreement_image_share"], np.float64)      # (kept, 2, bins)
    if shares.size == 0:
        return []
    index = np.asarray(arrays["agreement_image_index"]).astype(int)
    kept, _, bins = shares.shape
    fig = new_figure(8.0, 1.1 + 0.22 * kept)
    fig.set_layout_engine("constrained")
    with styled():
        axes = fig.subplots(1, 2, sharey=True)
        vmax = float(shares.max()) or 1.0
        for r, (ax, label) in enumerate(zip(axes, ("true class", "strongest wrong class"))):
            image = ax.imshow(shares[:, r], aspect="auto", cmap="viridis", vmin=0.0, vmax=vmax,
                              extent=(-1.0, 1.0, kept - 0.5, -0.5), interpolation="nearest")
            ax.set_title(label)
            ax.set_xlabel("cos(v_j, û_j|i)")
        axes[0].set_yticks(np.arange(kept), [str(i) for i in index])
        axes[0].set_ylabel("evaluation image")
        fig.colorbar(image, ax=list(axes), label="share of votes", shrink=0.9)
    caption = (f"Vote agreement of single images: the same cosines, one row per image. Details: "
               f"Routing diagnostics, vote agreement of the first {kept} evaluation images taken "
               f"one at a time (rows): share of that image's votes per cosine bin ({bins} bins "
               f"over [-1, 1], colour scale 0 … {vmax:.3g} shared by both panels) for the true "
               f"class (left) and the strongest wrong class (right).")
    return figure_pair(fig, "vote_agreement_images", caption)


def render(arrays, params, ctx) -> list[Figure]:
    return (_entropy(arrays, params, ctx) + _agreement(arrays, params, ctx)
            + _agreement_images(arrays, params, ctx))


# --- over steps and across models ---------------------------------------------------------------

UNITS = (  # (summary key, label, panel 1 = cosines)
    ("agreement_true_mean_cos", "mean cos, true class", 1),
    ("agreement_wrong_mean_cos", "mean cos, strongest wrong class", 1),
    ("agreement_true_coupling_weighted_cos", "c_ij-weighted cos, true class", 1),
)
PANEL_LABELS = ("", "cosine")
DEFICIT_FLOOR_SHOWN = 1e-9    # compare chart: normalised deficits below this are drawn at it


def render_trend(series, params, ctx) -> list[Figure]:
    """Headline numbers against training step (categorical axis, in the given order)."""
    if len(series) < 2:
        return []
    steps = [str(s) for s, _ in series]
    x = np.arange(len(steps))
    fig = new_figure(6.4, 3.0)
    with styled():
        axes = fig.subplots(1, 2)
        for key, label in (("entropy_mean", "mean H"),
                           ("entropy_length_weighted_mean", "mean H, weighted by |u_i|")):
            axes[0].plot(x, [summary_value(s, key) for _, s in series], marker="o", markersize=3,
                         linewidth=1.0, label=label)
        log_k = max((summary_value(s, "entropy_max") for _, s in series), default=float("nan"))
        axes[0].axhline(log_k, color="0.4", linestyle=":", linewidth=0.8,
                        label=f"log K = {log_k:.3f} (uniform)")
        axes[0].set_ylabel("coupling entropy (nats)")
        for key, label, panel in UNITS:
            axes[panel].plot(x, [summary_value(s, key) for _, s in series], marker="o",
                             markersize=3, linewidth=1.0, label=label)
        for panel, ax in enumerate(axes):
            ax.set_xticks(x, steps, rotation=60 if len(steps) > 6 else 0)
            ax.set_xlabel("training step")
            if PANEL_LABELS[panel]:
                ax.set_ylabel(PANEL_LABELS[panel])
            ax.legend(frameon=False, fontsize=6)
        fig.suptitle(f"Routing diagnostics over training, {ctx.model}".strip(", "), fontsize=9)
        fig.tight_layout()
    caption = (f"Routing diagnostics over {len(steps)} training steps, each on the same "
               f"evaluation set: left, the mean coupling entropy of the primary capsules "
               f"(plain, and weighted by primary-capsule length) against its maximum log K "
               f"(dotted, uniform routing; the axis is zoomed to the data); right, the "
               f"mean cosine between class capsules and their votes for the true and the "
               f"strongest wrong class.")
    return figure_pair(fig, "routing_diagnostics_trend", caption)


def render_compare(series, params, ctx) -> list[Figure]:
    """Headline numbers of several models as grouped bars."""
    if len(series) < 2:
        return []
    models = [str(m) for m, _ in series]
    fig = new_figure(6.4, 3.3)
    with styled():
        axes = fig.subplots(1, 2, width_ratios=(0.7, 1))
        x = np.arange(len(models))
        deficits = [max(1.0 - summary_value(s, "entropy_mean") / summary_value(s, "entropy_max"),
                        DEFICIT_FLOOR_SHOWN) for _, s in series]
        axes[0].bar(x, deficits, color=[f"C{m % 10}" for m in range(len(models))])
        axes[0].set_yscale("log")
        axes[0].set_xticks(x, models, rotation=20, ha="right")
        axes[0].set_ylabel("1 − mean H / log K (log scale)")
        axes[0].set_title("distance from uniform routing")
        width = 0.8 / len(models)
        for panel in (1,):
            ax = axes[panel]
            metrics = [(k, label) for k, label, p in UNITS if p == panel]
            xm = np.arange(len(metrics))
            for m, (model, summary) in enumerate(series):
                ax.bar(xm + (m - (len(models) - 1) / 2) * width,
                       [summary_value(summary, k) for k, _ in metrics], width=width,
                       label=str(model), color=f"C{m % 10}")
            ax.set_xticks(xm, [label for _, label in metrics], rotation=20, ha="right")
            ax.set_ylabel(PANEL_LABELS[panel])
            ax.axhline(0, color="0.5", linewidth=0.6)
        fig.suptitle("Routing diagnostics, models compared", fontsize=9)
        legend_below(fig)
    caption = ("Routing diagnostics of " + ", ".join(models) + " (each on its own evaluation "
               "set at the chosen step): left, how far routing is from uniform, 1 − mean "
               "coupling entropy / log K on a log scale (0 = uniform couplings, drawn at "
               f"{DEFICIT_FLOOR_SHOWN:g}); right, mean cosine between class capsules and their votes for the "
               "true and the strongest wrong class.")
    return figure_pair(fig, "routing_diagnostics_compare", caption)
