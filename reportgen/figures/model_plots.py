"""Paper figures of a model's overview page: the training curves and the confusion matrix.

The page draws both itself (an inline SVG chart, an HTML table); these are the same numbers as
matplotlib figures (PNG, SVG, PDF; reportgen.figures.plots) with the numbers as CSV, for the
page's downloads and the paper supplement. No TensorFlow here.
"""

from __future__ import annotations

import csv
import io
import math

import numpy as np

from reportgen.figures.encode import new_figure
from reportgen.figures.figure import Figure
from reportgen.figures.plots import figure_pair, style_axes, styled

# (history key, legend label, colour), also the overview's inline chart's (pages/svg_charts.py)
LOSSES = (("loss", "total loss", "#3f51b5"), ("margin_loss", "margin loss", "#e65100"),
          ("reconstruction_loss", "reconstruction loss", "#2e7d32"))
ACCURACIES = (("val_accuracy", "validation accuracy", "#c2185b"),
              ("train_accuracy", "train accuracy (running)", "#757575"))
HISTORY_COLUMNS = ("step", "epoch", "batch", "images_seen", "loss", "margin_loss",
                   "reconstruction_loss", "train_accuracy", "val_accuracy")


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(float(value)) else None


def history_csv(history: list[dict]) -> bytes:
    """The training history, one row per saved step (empty cells where a value is missing)."""
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    writer.writerow(HISTORY_COLUMNS)
    for record in history:
        writer.writerow(["" if record.get(c) is None else record.get(c) for c in HISTORY_COLUMNS])
    return rows.getvalue().encode()


def has_curves(history: list[dict]) -> bool:
    """Whether the history has any loss or accuracy value to plot."""
    return any(_number(r.get(key)) is not None for r in history
               for key, _, _ in LOSSES + ACCURACIES)


def render_training_curves(history: list[dict], model: str,
                           accuracy: str = "accuracy") -> list[Figure]:
    """Loss (left) and accuracy (right) over the saved steps, x = images seen when every record
    has it (else the record's position), ticks labelled with the steps; [] without values.
    `accuracy`: what the accuracies count ("top-2 accuracy" for images of two digits), in the
    legend, the axis and the caption."""
    if not history or not has_curves(history):
        return []
    use_seen = all(_number(r.get("images_seen")) is not None for r in history)
    xs = np.array([float(r["images_seen"]) if use_seen else float(i)
                   for i, r in enumerate(history)])
    fig = new_figure(7.2, 2.8)
    with styled():
        axes = fig.subplots(1, 2)
        for ax, series, ylabel in ((axes[0], LOSSES, "loss"), (axes[1], ACCURACIES, accuracy)):
            drawn = False
            for key, label, colour in series:
                label = label.replace("accuracy", accuracy)
                points = [(x, _number(r.get(key))) for x, r in zip(xs, history)
                          if _number(r.get(key)) is not None]
                if points:
                    px, py = zip(*points)
                    ax.plot(px, py, marker="o", markersize=2.5, linewidth=1.2, color=colour,
                            label=label)
                    drawn = True
            style_axes(ax)
            ax.set_ylabel(ylabel)
            ax.set_xlabel("step (EPOCH-BATCH), spaced by images seen" if use_seen
                          else "step (EPOCH-BATCH)")
            if series is ACCURACIES:
                ax.set_ylim(top=1.0)
            if drawn:
                ax.legend(frameon=False)
        every = max(1, math.ceil(len(history) / 6))
        shown = sorted(set(range(0, len(history), every)) | {len(history) - 1})
        for ax in axes:
            ax.set_xticks(xs[shown], [str(history[i].get("step", i)) for i in shown])
        fig.suptitle(f"{model}: training curves")
        fig.tight_layout()
    spacing = "spaced by images seen" if use_seen else "one point per saved step"
    caption = (f"Training curves of {model} over {len(history)} saved steps (EPOCH-BATCH, "
               f"{spacing}). Left: total, margin and reconstruction loss, each the mean over "
               f"the batches since the previous saved step. Right: validation {accuracy} at "
               f"each saved step and the running training {accuracy}.")
    figures = figure_pair(fig, "training_curves", caption)
    return figures + [Figure("training_curves.csv", history_csv(history), "csv", caption)]


def confusion_csv(matrix, class_names) -> bytes:
    """The confusion matrix with class names: rows = true class, columns = predicted."""
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    names = [str(class_names[i]) if i < len(class_names) else str(i)
             for i in range(len(matrix))]
    writer.writerow(["true \\ predicted", *names])
    for name, row in zip(names, matrix):
        writer.writerow([name, *(int(v) for v in row)])
    return rows.getvalue().encode()


def render_confusion_matrix(matrix, class_names, model: str, step: str) -> list[Figure]:
    """Counts per (true, predicted) class, each cell shaded by its share of the true class's
    images, with the per-class accuracy beside each row; [] for an empty matrix."""
    counts = np.asarray(matrix, dtype=np.int64)
    if counts.ndim != 2 or counts.size == 0:
        return []
    k = counts.shape[0]
    names = [str(class_names[i]) if i < len(class_names) else str(i) for i in range(k)]
    totals = counts.sum(axis=1)
    share = counts / np.maximum(totals, 1)[:, None]
    accuracy = float(np.trace(counts) / max(1, counts.sum()))
    side = 1.6 + 0.42 * k
    fig = new_figure(side + 0.9, side)
    with styled():
        ax = fig.add_subplot()
        image = ax.imshow(share, cmap="Blues", vmin=0.0, vmax=1.0)
        for i in range(k):
            for j in range(k):
                if counts[i, j]:
                    ax.text(j, i, str(counts[i, j]), ha="center", va="center", fontsize=6,
                            color="white" if share[i, j] > 0.55 else "#222222")
        ax.set_xticks(range(k), names, rotation=90 if max(map(len, names)) > 3 else 0)
        ax.set_yticks(range(k), [f"{n} ({share[i, i]:.0%})" for i, n in enumerate(names)])
        ax.set_xlabel("predicted class")
        ax.set_ylabel("true class (per-class accuracy)")
        ax.set_title(f"{model}, step {step}: accuracy {accuracy:.1%}")
        bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        bar.set_label("share of the true class")
        fig.tight_layout()
    caption = (f"Confusion matrix of {model} at step {step} on {int(counts.sum())} evaluation "
               f"images (a stratified sample of the test split): rows are the true class, "
               f"columns the predicted class, each cell the count, "
               f"shaded by its share of the row; per-class accuracy beside each row label; "
               f"overall accuracy {accuracy:.2%}.")
    figures = figure_pair(fig, "confusion_matrix", caption)
    return figures + [Figure("confusion_matrix.csv", confusion_csv(counts.tolist(), names), "csv",
                             caption)]
