"""The paper figure of a model overview's confusion matrix (the page draws it as an HTML table):
the same numbers as a matplotlib figure (PNG, SVG, PDF; reportgen.figures.plots) with the
numbers as CSV, for the page's downloads and the paper supplement. The training curves are
Vega-Lite charts (reportgen.figures.training_curves). No TensorFlow here.
"""

from __future__ import annotations

import csv
import io

import numpy as np

from reportgen.figures.encode import new_figure
from reportgen.figures.figure import Figure
from reportgen.figures.plots import figure_pair, styled


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
