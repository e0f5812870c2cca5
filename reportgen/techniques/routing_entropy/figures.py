"""Charts of the routing entropy (reportgen.techniques.routing_entropy); no TensorFlow.

Words and letters for the routing weights come from the model's description (RoutingWeights)
when the context has it; routed layers are named from it, else numbered. Every chart is drawn
once with matplotlib and saved as PNG (site) and SVG and PDF (papers).
"""

from __future__ import annotations

import numpy as np

from reportgen.figures.encode import new_figure
from reportgen.figures.figure import Figure
from reportgen.figures.plots import (band, bounds, error_bars, figure_pair, grouped_bars,
                                     interval_bounds, interval_note, legend_below,
                                     legends_outside, lines_over_steps, plain_log_ticks,
                                     step_axis, styled,
                                     summary_value)

DEFICIT_FLOOR_SHOWN = 1e-9    # compare chart: normalised deficits below this are drawn at it


def _class_name(ctx, k: int) -> str:
    names = getattr(ctx, "class_names", ()) or ()
    return str(names[k]) if k < len(names) else str(k)


def _where(ctx) -> str:
    return f"{ctx.model} step {ctx.step}" if getattr(ctx, "model", "") else ""


def _shares(hist: np.ndarray) -> np.ndarray:
    totals = hist.sum(1, keepdims=True)
    return np.divide(hist, totals, out=np.zeros_like(hist), where=totals > 0)


def _routed(ctx, count: int) -> list[str]:
    """Names of the routed layers ("primary_caps -> conv_caps1", …) in model order."""
    description = getattr(ctx, "description", None)
    if description is not None:
        layers = description.capsule_layers
        pairs = [f"{a.name} -> {b.name}" for a, b in zip(layers, layers[1:])
                 if a in description.routed_layers]
        if len(pairs) == count:
            return pairs
    return [f"routing layer {i + 1}" for i in range(count)]


def _words(ctx) -> tuple[str, str, str]:
    """(what the weights into the classes are called, their letter, what their children are)
    from the model's description: its RoutingWeights."""
    description = getattr(ctx, "description", None)
    routed = description.routed_layers if description is not None else ()
    if not routed:
        return "routing weights", "w", "child capsule"
    last = routed[-1]
    child = "primary capsule" if last is description.primary_capsules else f"{last.name} capsule"
    return last.routing.words, last.routing.symbol, child


def _entropy(arrays, params, ctx) -> list[Figure]:
    words, w, child = _words(ctx)
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
        ax_h.set_xlabel(f"entropy H of the {w}_ij (nats)")
        ax_h.set_ylabel(f"share of {child}s")
        ax_h.legend(frameon=False, fontsize=6, ncols=2 if classes > 5 else 1,
                    title="class capsule", title_fontsize=6, loc="upper left")
        ax_d.set_xscale("log")
        plain_log_ticks(ax_d, "x")
        ax_d.set_xlim(deficit_edges[0], deficit_edges[-1])
        ax_d.set_xlabel("log K − H (nats, log scale; 0 = uniform)")
        ax_d.set_title("distance from uniform routing")
        where = f" — {_where(ctx)}" if _where(ctx) else ""
        ax_h.set_title(f"Routing entropy per class capsule{where}")
        fig.tight_layout()
    if params.grouping == "argmax":
        grouping = (f"each {child} is counted once, under the class capsule it routes to "
                    f"most (argmax_j {w}_ij; option grouping='argmax')")
    else:
        grouping = (f"each {child} is counted under every class capsule j with weight "
                    f"{w}_ij (option grouping='weighted')")
    overall = float(np.asarray(arrays["entropy_mean"]))
    caption = (f"How decided routing is: the mean entropy of the {words} into the classes is "
               f"{overall:.3g} nats, against {log_k:.3f} (log {classes}) for uniform weights. "
               f"Details: "
               f"Routing entropy: H_i = -Σ_j {w}_ij log {w}_ij of every {child}'s final "
               f"{words}, for all {child}s of {n} evaluation images; {grouping}. Left: "
               f"histogram of H, {bins} equal bins over "
               f"[0, log {classes} = {log_k:.3f}] nats, as shares per class capsule (dotted line: "
               f"log {classes}, uniform weights, what a single routing iteration gives). "
               f"Right: the same capsules' distance from uniform, log {classes} − H, in {bins} "
               f"log-spaced bins from {deficit_edges[0]:g} to {log_k:.3f} nats (at or below "
               f"{deficit_edges[0]:g}: first bin). Mean over all capsules {overall:.4f} nats "
               f"({overall / log_k:.2%} of the maximum); weighted by the {child}s' activations "
               f"{float(np.asarray(arrays['entropy_length_weighted_mean'])):.4f} nats.")
    return figure_pair(fig, "entropy", caption)


def _layers(arrays, ctx) -> list[Figure]:
    hist = np.asarray(arrays["layer_entropy_hist"], np.float64)
    edges = np.asarray(arrays["layer_entropy_edges"], np.float64)
    normalized = np.asarray(arrays["layer_entropy_normalized_mean"], np.float64)
    weighted = np.asarray(arrays["layer_entropy_weighted_mean"], np.float64)
    means = np.asarray(arrays["layer_entropy_mean"], np.float64)
    uniform = np.asarray(arrays["layer_entropy_uniform"], np.float64)
    names = _routed(ctx, len(hist))
    n = int(np.asarray(arrays["layer_entropy_image_mean"]).size)
    totals = hist.sum(1, keepdims=True)
    shares = np.divide(hist, totals, out=np.zeros_like(hist), where=totals > 0)
    fig = new_figure(8.0, 3.0)
    with styled():
        ax_h, ax_m = fig.subplots(1, 2, width_ratios=(1.4, 1))
        for i, name in enumerate(names):
            ax_h.stairs(shares[i], edges, color=f"C{i % 10}", linewidth=1.0,
                        label=f"{name} (mean {normalized[i]:.3f})")
        ax_h.axvline(1.0, color="0.4", linestyle=":", linewidth=0.8)
        ax_h.set_xlabel("H / H_uniform (1 = uniform over the child's parents)")
        ax_h.set_ylabel("share of children")
        ax_h.legend(frameon=False)
        x = np.arange(len(names))
        ax_m.bar(x - 0.2, normalized, width=0.4, label="mean H / H_uniform",
                 color=[f"C{i % 10}" for i in x])
        ax_m.bar(x + 0.2, weighted, width=0.4, label="weighted by child activation",
                 color=[f"C{i % 10}" for i in x], alpha=0.5)
        ax_m.axhline(1.0, color="0.4", linestyle=":", linewidth=0.8)
        ax_m.set_xticks(x, [f"{i + 1}" for i in x])
        ax_m.set_xlabel("routed layer")
        ax_m.set_ylim(0, 1.05)
        ax_m.legend(frameon=False, fontsize=6)
        fig.tight_layout()
    per_layer = "; ".join(f"{name}: {m:.3f} of {u:.3f} nats" for name, m, u in
                          zip(names, means, uniform))
    words, w, _ = _words(ctx)
    caption = (f"How decided routing is at each layer: the entropy of every child capsule's "
               f"{words}, against uniform (1 = no preference). Details: "
               f"Routing entropy per layer over {n} evaluation images: for every routed "
               f"layer, the entropy H of each child capsule's final {words} {w}_ij over the "
               f"parents that can receive it, divided by the entropy of uniform weights "
               f"log(#parents) (what one routing iteration gives; children with a "
               f"single parent are left out). Left: its distribution; right: its mean, plain and "
               f"weighted by the child's activation. Mean entropy per layer: {per_layer}.")
    return figure_pair(fig, "routing_entropy_layers", caption)


def render(arrays, params, ctx) -> list[Figure]:
    """The entropy into the classes; per routed layer too when there are several."""
    several = np.asarray(arrays["layer_entropy_mean"]).size > 1
    return _entropy(arrays, params, ctx) + (_layers(arrays, ctx) if several else [])


# --- over steps and across models ---------------------------------------------------------------

def _layer_values(summary: dict, key: str, count: int) -> list[float]:
    values = list(summary.get(key) or [])
    return [float(v) if v is not None else float("nan") for v in values[:count]] + \
        [float("nan")] * max(0, count - len(values))


def render_trend(series, params, ctx) -> list[Figure]:
    """Headline numbers against training step (categorical axis, in the given order)."""
    if len(series) < 2:
        return []
    steps = [str(s) for s, _ in series]
    x = np.arange(len(steps))
    count = max(int(s.get("layers") or 0) for _, s in series)
    fig = new_figure(6.4 if count > 1 else 4.8, 3.0)
    with styled():
        axes = list(np.atleast_1d(fig.subplots(1, 2 if count > 1 else 1)))
        lines_over_steps(axes[0], series, (("entropy_mean", "mean H"),
                                           ("entropy_length_weighted_mean",
                                            "mean H, weighted by activation")))
        log_k = max((summary_value(s, "entropy_max") for _, s in series), default=float("nan"))
        axes[0].axhline(log_k, color="0.4", linestyle=":", linewidth=0.8,
                        label=f"log K = {log_k:.3f} (uniform)")
        axes[0].set_ylabel("routing entropy into the classes (nats)")
        if count > 1:
            for i, name in enumerate(_routed(ctx, count)):
                line, = axes[1].plot(x, [_layer_values(s, "entropy_normalized_per_layer",
                                                       count)[i] for _, s in series],
                                     marker="o", markersize=3, linewidth=1.0, label=name)
                band(axes[1], x, *interval_bounds([s for _, s in series],
                                                  "entropy_normalized_per_layer", i),
                     line.get_color())
            axes[1].axhline(1.0, color="0.4", linestyle=":", linewidth=0.8, label="uniform")
            axes[1].set_ylabel("mean H / H_uniform")
        for ax in axes:
            step_axis(ax, steps)
        fig.suptitle(f"Routing entropy over training, {ctx.model}".strip(", "), fontsize=9)
        legends_outside(fig)
    layers = ("; right, the mean entropy of every routed layer relative to uniform weights (1 = "
              "uniform, what one iteration gives)") if count > 1 else ""
    caption = (f"Routing entropy over {len(steps)} training steps, each on the same evaluation "
               f"set: {'left, ' if count > 1 else ''}the mean entropy of the routing weights "
               f"into the classes (plain, and weighted by the children's activations) against "
               f"its maximum log K (dotted, uniform routing; the axis is zoomed to the "
               f"data){layers}.")
    note = interval_note([s for _, s in series], ["entropy_mean", "entropy_length_weighted_mean",
                                                  "entropy_normalized_per_layer"], "shaded")
    return figure_pair(fig, "routing_entropy_trend", f"{caption} {note}".strip())


def render_compare(series, params, ctx) -> list[Figure]:
    """Headline numbers of several models as grouped bars."""
    if len(series) < 2:
        return []
    models = [str(m) for m, _ in series]
    count = max(int(s.get("layers") or 0) for _, s in series)
    fig = new_figure(6.4 if count > 1 else 4.0, 3.3)
    with styled():
        axes = list(np.atleast_1d(fig.subplots(1, 2, width_ratios=(0.7, 1)) if count > 1
                                  else fig.subplots(1, 1)))
        x = np.arange(len(models))
        deficits = [max(1.0 - summary_value(s, "entropy_mean") / summary_value(s, "entropy_max"),
                        DEFICIT_FLOOR_SHOWN) for _, s in series]
        for m, model in enumerate(models):
            axes[0].bar(x[m], deficits[m], label=model, color=f"C{m % 10}")
        # 1 − H/log K from the interval of H/log K: its ends swap; floored as the bars are
        shares = [bounds(s, "entropy_mean_normalized") for _, s in series]
        error_bars(axes[0], x, [max(1.0 - high, DEFICIT_FLOOR_SHOWN) for _, high in shares],
                   [max(1.0 - low, DEFICIT_FLOOR_SHOWN) for low, _ in shares])
        axes[0].set_yscale("log")
        plain_log_ticks(axes[0])
        axes[0].set_xticks(x, models, rotation=20, ha="right")
        axes[0].set_ylabel("1 − mean H / log K (log scale)")
        axes[0].set_title("distance from uniform routing")
        if count > 1:
            layers = np.arange(count)
            grouped_bars(axes[1], series,
                         lambda summary: _layer_values(summary, "entropy_normalized_per_layer",
                                                       count),
                         intervals=lambda summary: list(zip(*(
                             bounds(summary, "entropy_normalized_per_layer", i)
                             for i in range(count)))))
            axes[1].axhline(1.0, color="0.4", linestyle=":", linewidth=0.8)
            axes[1].set_xticks(layers, [f"routed layer {i + 1}" for i in layers])
            axes[1].set_ylabel("mean H / H_uniform")
        fig.suptitle("Routing entropy, models compared", fontsize=9)
        legend_below(fig)
    layers = ("; right, the mean entropy of every routed layer relative to uniform weights "
              "(1 = uniform), layer by layer from the primary capsules to the classes") \
        if count > 1 else ""
    caption = ("Routing entropy of " + ", ".join(models) + " (each on its own evaluation set at "
               f"the chosen step): {'left, ' if count > 1 else ''}how far routing into the "
               "classes is from uniform, 1 − mean entropy / log K on a log scale (0 = uniform "
               f"weights, drawn at {DEFICIT_FLOOR_SHOWN:g}){layers}.")
    note = interval_note([s for _, s in series], ["entropy_mean_normalized",
                                                  "entropy_normalized_per_layer"], "error bars")
    return figure_pair(fig, "routing_entropy_compare", f"{caption} {note}".strip())
