"""MultiMNIST over the test pairs, drawn: the analysis's example pairs (each the pair figure of
reportgen.techniques.multimnist_pair.figures, its caption led by the analysis's numbers) and
top-2 accuracy and segmentation IoU across models."""

from __future__ import annotations

import dataclasses

import numpy as np

from reportgen.figures.figure import Figure, RenderContext
from reportgen.techniques.multimnist_pair.figures import PAIR_HEX, render_pair


def render_examples(result, params, ctx: RenderContext) -> list[Figure]:
    """The multimnist_segmentation analysis's example test pairs, one pair figure each, named
    multimnist_pair_<i>.png."""
    figures = []
    labels = np.asarray(result["example_labels"]).astype(int)
    headline = _headline(result)
    for i in range(len(labels)):
        drawn = render_pair({"image": result["example_images"][i], "labels": labels[i],
                             "top2": np.asarray(result["example_top2"][i]).astype(int),
                             "reconstructions": result["example_reconstructions"][i],
                             "predicted_reconstructions":
                                 result["example_predicted_reconstructions"][i]}, params, ctx)
        figures.extend(dataclasses.replace(f, name=f"multimnist_pair_{i}.png",
                                           caption=f"Test pair {i + 1}{headline}: {f.caption}")
                       for f in drawn)
    return figures


def _headline(result) -> str:
    """", of N test pairs scored: top-2 accuracy … (chance …), segmentation IoU … (reference
    …)": the analysis's numbers beside what they mean, for its example figures' captions."""
    n = int(np.asarray(result.get("correct", ())).size)
    if not n:
        return ""

    def pct(key):
        value = float(np.asarray(result.get(key, np.nan)))
        return "—" if not np.isfinite(value) else f"{100 * value:.1f}%"

    text = (f", of {n:,} test pairs scored: top-2 accuracy {pct('top2_accuracy')} (chance "
            f"{pct('top2_chance')})")
    if np.isfinite(float(np.asarray(result.get("segmentation_iou", np.nan)))):
        text += (f", segmentation IoU {pct('segmentation_iou')} (reference "
                 f"{pct('segmentation_reference')}: each class's typical digit at the centre)")
    return text


def render_compare(entries, params, ctx) -> list[Figure]:
    """Top-2 accuracy and segmentation IoU of each model (its summary), bars side by side, the
    top-2 chance (1/C(K, 2)) as a dashed line."""
    from reportgen.figures.encode import new_figure
    from reportgen.figures.plots import (error_bars, figure_pair, interval_bounds,
                                         interval_note, legend_below, style_axes, styled,
                                         summary_value)

    entries = list(entries)
    if not entries:
        return []
    models = [str(m) for m, _ in entries]
    x = np.arange(len(models))
    fig = new_figure(max(4.0, 1.0 + 0.9 * len(models)), 2.8)
    with styled():
        ax = fig.subplots()
        bars = (("top2_accuracy", "top-2 accuracy", PAIR_HEX[0]),
                ("segmentation_iou", "segmentation IoU", PAIR_HEX[1]),
                ("segmentation_reference", "segmentation reference", "0.75"))
        for i, (key, label, colour) in enumerate(bars):
            ax.bar(x + (i - 1) * 0.27, [summary_value(s, key) for _, s in entries], 0.27,
                   color=colour, label=label)
            error_bars(ax, x + (i - 1) * 0.27, *interval_bounds([s for _, s in entries], key))
        chance = summary_value(entries[0][1], "top2_chance")
        ax.axhline(chance, color="0.4", linestyle="--", linewidth=1, label="top-2 chance")
        ax.set_xticks(x)
        ax.set_xticklabels(models, rotation=30 if len(models) > 3 else 0,
                           ha="right" if len(models) > 3 else "center")
        ax.set_ylim(0, 1.05)
        style_axes(ax)
        legend_below(fig)
    caption = ("MultiMNIST across models (each at its step on this page): top-2 accuracy and "
               "segmentation IoU beside its reference. Details: top-2 accuracy is the share of test pairs whose two "
               "highest class scores are their two labels, chance 1/C(K, 2) (dashed; 1/45 for "
               "10 classes); the segmentation IoU is the mean over both digits of the IoU of "
               "the decoder's reconstruction from that class capsule, thresholded at 0.5, with "
               "the digit alone; its reference (grey) is the IoU of each class's typical "
               "training digit drawn at the centre, what a decoder knowing only the classes "
               "draws. Published top-2: CapsNet 95% (Sabour et al. 2017), 95.18%, "
               "No-R 95.49%, ConvNet-FC with large kernels 97.11% (Gu 2022).")
    note = interval_note([s for _, s in entries], [key for key, _, _ in bars], "error bars")
    return figure_pair(fig, "compare", f"{caption} {note}".strip())
