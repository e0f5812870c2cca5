"""Charts of the vote agreement (reportgen.techniques.vote_agreement); no TensorFlow.

Every chart is drawn once with matplotlib and saved as PNG (site) and SVG and PDF (papers).
"""

from __future__ import annotations

import numpy as np

from reportgen.figures.encode import new_figure
from reportgen.figures.figure import Figure
from reportgen.figures.plots import (figure_pair, grouped_bars, interval_note, legend_below,
                                     legends_outside, lines_over_steps, styled, summary_value)

TRUE_COLOUR = "#d95f02"       # panel_kit.HIGHLIGHT: the true class
WRONG_COLOUR = "#5a7bb0"      # the strongest wrong class
COSINES = (("agreement_true_mean_cos", "mean cos, true class"),
           ("agreement_wrong_mean_cos", "mean cos, strongest wrong class"),
           ("agreement_true_coupling_weighted_cos", "c_ij-weighted cos, true class"))


def _where(ctx) -> str:
    return f"{ctx.model} step {ctx.step}" if getattr(ctx, "model", "") else ""


def _agreement(arrays, params, ctx) -> list[Figure]:
    share = np.asarray(arrays["agreement_share"], np.float64)
    length = np.asarray(arrays["agreement_length"], np.float64)
    coupling = np.asarray(arrays["agreement_coupling"], np.float64)
    edges = np.asarray(arrays["agreement_edges"], np.float64)
    mean_cos = np.asarray(arrays["agreement_mean_cos"], np.float64)
    weighted = np.asarray(arrays["agreement_coupling_cos"], np.float64)
    n = int(np.asarray(arrays["images"]))
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
        axes[2].set_ylabel(f"mean {_symbol(ctx)}_ij")
        axes[2].set_xlabel("cos(v_j, û_j|i)")
        axes[2].set_xlim(-1, 1)
        axes[0].set_title(f"Vote agreement {_where(ctx)}".strip())
        fig.tight_layout()
    bins = len(centres)
    weights = _weights_word(ctx)
    caption = (f"Do the votes agree with the class capsule they build? Cosine of votes and class "
               f"capsule, true class against the strongest wrong class ({weights}-weighted means "
               f"{weighted[0]:.3f} and {weighted[1]:.3f}). Details: "
               f"Vote agreement: for every one of {n} evaluation images, the "
               f"cosine between class capsule v_j and each primary capsule's vote "
               f"û_j|i = W_ij u_i "
               f"for j = the true class (orange) and j = the strongest wrong class "
               f"({_strongest_other(ctx)}, blue); {bins} equal bins over [-1, 1] (a vote parallel to "
               f"v_j falls in the last bin; a zero vote counts as cosine 0). Top: share of all "
               f"votes per bin (each curve sums to 1); middle: mean vote length |û_j|i| per bin; "
               f"bottom: mean final routing weight into the class ({_routing_words(ctx)}) per "
               f"bin (gaps = empty bins). "
               f"{weights[:1].upper()}{weights[1:]}-weighted mean cosine: true "
               f"{weighted[0]:.3f}, wrong {weighted[1]:.3f}.")
    return figure_pair(fig, "vote_agreement", caption)


def _routing_words(ctx) -> str:
    """What the model's routing weights into the classes are called (its RoutingWeights)."""
    from reportgen.capsnet.model_words import routing_words

    description = getattr(ctx, "description", None)
    words = routing_words(description) if description is not None else ""
    return words or "coupling coefficients c_ij"


def _symbol(ctx) -> str:
    """The routing weights' letter ("c" for c_ij, "R" for EM's R_ij)."""
    from reportgen.capsnet.model_words import routing_symbol

    description = getattr(ctx, "description", None)
    return (routing_symbol(description) if description is not None else "") or "c"


def _weights_word(ctx) -> str:
    """What weights the weighted means: "coupling" for coupling coefficients c, else the
    routing weights' letter ("R_ij")."""
    symbol = _symbol(ctx)
    return "coupling" if symbol == "c" else f"{symbol}_ij"


def _strongest_other(ctx) -> str:
    from reportgen.capsnet.model_words import strongest_other_words

    description = getattr(ctx, "description", None)
    return strongest_other_words(description) if description is not None else \
        "the other class with the highest score"


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
               f"Vote agreement of the first {kept} evaluation images taken "
               f"one at a time (rows): share of that image's votes per cosine bin ({bins} bins "
               f"over [-1, 1], colour scale 0 … {vmax:.3g} shared by both panels) for the true "
               f"class (left) and the strongest wrong class (right).")
    return figure_pair(fig, "vote_agreement_images", caption)


def render(arrays, params, ctx) -> list[Figure]:
    return _agreement(arrays, params, ctx) + _agreement_images(arrays, params, ctx)


# --- over steps and across models ---------------------------------------------------------------

def render_trend(series, params, ctx) -> list[Figure]:
    """The mean cosines against training step (categorical axis, in the given order)."""
    if len(series) < 2:
        return []
    steps = [str(s) for s, _ in series]
    fig = new_figure(4.8, 3.0)
    with styled():
        ax = fig.subplots(1, 1)
        lines_over_steps(ax, series, COSINES)
        ax.set_ylabel("cosine")
        fig.suptitle(f"Vote agreement over training, {ctx.model}".strip(", "), fontsize=9)
        legends_outside(fig)
    caption = (f"Vote agreement over {len(steps)} training steps, each on the same evaluation "
               f"set: the mean cosine between class capsules and their votes for the true and "
               f"the strongest wrong class.")
    note = interval_note([s for _, s in series], [k for k, _ in COSINES], "shaded")
    return figure_pair(fig, "vote_agreement_trend", f"{caption} {note}".strip())


def render_compare(series, params, ctx) -> list[Figure]:
    """The mean cosines of several models as grouped bars."""
    if len(series) < 2:
        return []
    models = [str(m) for m, _ in series]
    fig = new_figure(4.8, 3.3)
    with styled():
        ax = fig.subplots(1, 1)
        grouped_bars(ax, series, lambda summary: [summary_value(summary, k) for k, _ in COSINES],
                     keys=[k for k, _ in COSINES])
        ax.set_xticks(np.arange(len(COSINES)), [label for _, label in COSINES], rotation=20, ha="right")
        ax.set_ylabel("cosine")
        ax.axhline(0, color="0.5", linewidth=0.6)
        fig.suptitle("Vote agreement, models compared", fontsize=9)
        legend_below(fig)
    caption = ("Vote agreement of " + ", ".join(models) + " (each on its own evaluation set at "
               "the chosen step): the mean cosine between class capsules and their votes for "
               "the true and the strongest wrong class.")
    note = interval_note([s for _, s in series], [k for k, _ in COSINES], "error bars")
    return figure_pair(fig, "vote_agreement_compare", f"{caption} {note}".strip())
