"""The drawing of the self-attention coupling (efficient_capsnet.technique), with reportgen's
figure helpers: one matplotlib figure saved as PNG (site), SVG and PDF (paper). No TensorFlow.
"""

from __future__ import annotations

import numpy as np

from reportgen.sdk import (Figure, RenderContext, figure_pair, legend_below, new_figure,
                           style_axes, styled)

HIGHLIGHT = "#d95f02"          # the predicted class, as reportgen's panels mark it


def _class_name(ctx: RenderContext, k: int) -> str:
    names = ctx.class_names or ()
    return str(names[k]) if k < len(names) else str(k)


def render(result, params, ctx: RenderContext) -> list[Figure]:
    coupling = np.asarray(result["coupling"], np.float64)                # (children, classes)
    bias = np.asarray(result["bias"], np.float64)
    weights = np.asarray(result["weights"], np.float64)
    predicted = int(np.asarray(result["predicted"]).reshape(-1)[0])
    children, classes = coupling.shape
    names = [_class_name(ctx, k) for k in range(classes)]
    reach = max(float(np.abs(bias).max()), 1e-12)
    signed = max(float(np.abs(weights).max()), 1e-12)
    fig = new_figure(7.6, 4.6)
    with styled():
        grid = fig.add_gridspec(2, 3, height_ratios=(3.2, 1.3))
        panels = ((coupling, "coupling c_ij", "viridis", 0.0, 1.0),
                  (bias, "routing bias b_ij", "RdBu_r", -reach, reach),
                  (weights, "c_ij + b_ij", "RdBu_r", -signed, signed))
        for column, (values, title, cmap, low, high) in enumerate(panels):
            ax = fig.add_subplot(grid[0, column])
            image = ax.imshow(values, cmap=cmap, vmin=low, vmax=high, aspect="auto",
                              interpolation="nearest")
            ax.add_patch(_column_box(ax, predicted, children))
            ax.set_title(title)
            ax.set_xticks(range(classes), names)
            ax.set_yticks(range(0, children, max(1, children // 8)))
            if column == 0:
                ax.set_ylabel("primary capsule i")
            ax.set_xlabel("class j")
            fig.colorbar(image, ax=ax, fraction=0.08, pad=0.03)
        ax = fig.add_subplot(grid[1, :])
        x = np.arange(classes)
        ax.bar(x - 0.2, coupling.sum(0), width=0.4, color="#7a7a7a", label="sum_i c_ij")
        ax.bar(x + 0.2, weights.sum(0), width=0.4, color="#3b6ea8",
               label="sum_i (c_ij + b_ij)")
        ax.set_xticks(x, names)
        ax.get_xticklabels()[predicted].set_color(HIGHLIGHT)
        ax.set_ylabel("total weight")
        style_axes(ax)
        legend_below(fig)
    share = coupling[:, predicted].sum() / children
    total = weights.sum()
    biased = f"{weights[:, predicted].sum() / total:.0%}" if total else "undefined"
    caption = (f"How strongly the {children} primary capsules route to the predicted class "
               f"{names[predicted]}: {share:.0%} of their coupling before the routing bias, "
               f"{biased} of the weights after it. "
               f"Details: Efficient-CapsNet's self-attention routing (Mazzia, Salvetti & "
               f"Chiaberge 2021): c_ij = softmax over the classes j of u_hat[j|i] . "
               f"sum_k u_hat[j|k] / sqrt(D) (each row sums to 1); the routing bias b_ij, learnt "
               f"and the same for every input (largest |b_ij| {reach:.3g}), is added after the "
               f"softmax, and each class capsule is the squashed sum of its votes weighted by "
               f"c_ij + b_ij (right; blue negative, red positive). The predicted class's "
               f"column is outlined; below, each class's total weight with and without the "
               f"bias (the share after it: sum_i (c_ij + b_ij) over the sum of every class's).")
    return figure_pair(fig, "coupling", caption)


def _column_box(ax, column: int, rows: int):
    from matplotlib.patches import Rectangle

    return Rectangle((column - 0.5, -0.5), 1.0, rows, fill=False, edgecolor=HIGHLIGHT,
                     linewidth=1.6)
