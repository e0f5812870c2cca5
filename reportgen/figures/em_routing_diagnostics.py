"""Charts of the routing diagnostics of matrix capsules with EM routing (Hinton, Sabour & Frosst
2018; arrays of reportgen.techniques.routing_diagnostics.compute_em); no TensorFlow.

Routed layers are named from the model's description when the context has it, else numbered.
Every chart is saved as PNG (site) and SVG (papers).
"""

from __future__ import annotations

import numpy as np

from reportgen.figures.encode import new_figure
from reportgen.figures.plots import figure_pair, legend_below, styled


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


def _entropy(arrays, ctx):
    hist = np.asarray(arrays["layer_entropy_hist"], np.float64)
    edges = np.asarray(arrays["layer_entropy_edges"], np.float64)
    normalized = np.asarray(arrays["layer_entropy_normalized_mean"], np.float64)
    weighted = np.asarray(arrays["layer_entropy_weighted_mean"], np.float64)
    means = np.asarray(arrays["layer_entropy_mean"], np.float64)
    uniform = np.asarray(arrays["layer_entropy_uniform"], np.float64)
    names = _routed(ctx, len(hist))
    n = int(np.asarray(arrays["entropy_image_mean"]).size)
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
    caption = (f"How decided EM routing is at each layer: the entropy of every child capsule's "
               f"assignments, against uniform (1 = no preference). Details: "
               f"Routing diagnostics, EM assignments over {n} evaluation images: for every "
               f"routed layer, the entropy H of each child capsule's final assignments R_ij "
               f"over the parents that can receive it, divided by the entropy of uniform "
               f"assignments log(#parents) (what one EM iteration gives; children with a "
               f"single parent are left out). Left: its distribution; right: its mean, plain and "
               f"weighted by the child's activation. Mean entropy per layer: {per_layer}.")
    return figure_pair(fig, "em_routing_entropy", caption)


def render(arrays, params, ctx):
    return _entropy(arrays, ctx)


def _layer_values(summary: dict, key: str, count: int) -> list[float]:
    values = list(summary.get(key) or [])
    return [float(v) if v is not None else float("nan") for v in values[:count]] + \
        [float("nan")] * max(0, count - len(values))


def render_trend(series, params, ctx):
    """Mean H / H_uniform of every routed layer against training step."""
    if len(series) < 2:
        return []
    steps = [str(s) for s, _ in series]
    count = max(int(s.get("layers") or 0) for _, s in series)
    names = _routed(ctx, count)
    x = np.arange(len(steps))
    fig = new_figure(4.8, 3.0)
    with styled():
        ax_e = fig.subplots(1, 1)
        for i, name in enumerate(names):
            ax_e.plot(x, [_layer_values(s, "entropy_normalized_per_layer", count)[i]
                          for _, s in series], marker="o", markersize=3, linewidth=1.0,
                      label=name)
        ax_e.axhline(1.0, color="0.4", linestyle=":", linewidth=0.8, label="uniform")
        ax_e.set_ylabel("mean H / H_uniform")
        for ax in (ax_e,):
            ax.set_xticks(x, steps, rotation=60 if len(steps) > 6 else 0)
            ax.set_xlabel("training step")
            ax.legend(frameon=False, fontsize=6)
        fig.suptitle(f"EM routing over training, {ctx.model}".strip(", "), fontsize=9)
        fig.tight_layout()
    caption = (f"Routing diagnostics over {len(steps)} training steps, each on the same "
               f"evaluation set: left, the mean entropy of the EM assignments of every routed "
               f"layer relative to uniform assignments (1 = uniform, what one iteration gives).")
    return figure_pair(fig, "em_routing_diagnostics_trend", caption)


def render_compare(series, params, ctx):
    """Mean H / H_uniform per routed layer, one bar group per layer, one colour per model."""
    if len(series) < 2:
        return []
    models = [str(m) for m, _ in series]
    count = max(int(s.get("layers") or 0) for _, s in series)
    fig = new_figure(8.0, 3.0)
    width = 0.8 / len(models)
    with styled():
        ax = fig.subplots(1, 1)
        x = np.arange(count)
        for m, (model, summary) in enumerate(series):
            ax.bar(x + (m - (len(models) - 1) / 2) * width,
                   _layer_values(summary, "entropy_normalized_per_layer", count), width=width,
                   label=str(model), color=f"C{m % 10}")
        ax.axhline(1.0, color="0.4", linestyle=":", linewidth=0.8)
        ax.set_xticks(x, [f"routed layer {i + 1}" for i in x])
        ax.set_ylabel("mean H / H_uniform")
        fig.suptitle("EM routing, models compared", fontsize=9)
        legend_below(fig)
    caption = ("Routing diagnostics of " + ", ".join(models) + " (each on its own evaluation "
               "set at the chosen step): the mean entropy of every routed layer's EM "
               "assignments relative to uniform assignments (1 = uniform), layer by layer from "
               "the primary capsules to the classes.")
    return figure_pair(fig, "em_routing_diagnostics_compare", caption)
