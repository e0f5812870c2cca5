"""The paper figures' text at the size the supplement prints it (captions.tex sets a figure at
its own width, at most \\linewidth; reportgen.figures.print_size): no label under 7 pt. Every
analysis's comparison and trend chart, the training curves and the confusion matrix, read
from their PDFs (font size times the text and transformation matrices)."""

from __future__ import annotations

import pytest

from pdf_text import page_width, text_sizes
from reportgen.figures.print_size import MIN_PRINTED_PT, printed_scale
from reportgen.techniques.base import RenderContext
from test_figures import _compare_summaries

ANALYSES = ["explanation_fidelity", "affnist_benchmark", "capsule_semantics", "routing_entropy",
            "em_routing_entropy", "vote_agreement", "dead_units", "affine_robustness",
            "adversarial_robustness"]


def _smallest(figures) -> tuple[float, str]:
    """The smallest printed text of a result's PDFs and what it says."""
    found = []
    for fig in figures:
        if fig.kind != "pdf":
            continue
        scale = printed_scale(fig.width, page_width(fig.data))
        found += [(size * scale, f"{fig.name}: {text!r}") for text, size in text_sizes(fig.data)
                  if text.strip()]
    assert found, "no text found"
    return min(found)


def _check(figures) -> None:
    size, where = _smallest(figures)
    assert size >= MIN_PRINTED_PT - 1e-6, f"{where} prints at {size:.2f} pt"


@pytest.mark.parametrize("analysis", ANALYSES)
def test_comparison_and_trend_charts_print_no_text_under_7_pt(analysis):
    from reportgen.techniques import get_technique

    technique = get_technique(analysis.removeprefix("em_"))
    series = [(f"MNIST_model_number_{m} (10-1000)", _compare_summaries(m)[analysis])
              for m in range(4)]
    classes = tuple(str(k) for k in range(10))
    _check(technique.render_compare(series, None, RenderContext("all models", "last", ())))
    if technique.render_trend is not None:
        steps = [(f"{e}-100", summary) for e, (_, summary) in enumerate(series)]
        _check(technique.render_trend(steps, None, RenderContext("M", "all", classes)))


def test_training_curves_and_confusion_matrix_print_no_text_under_7_pt():
    from reportgen.figures.model_plots import render_confusion_matrix
    from reportgen.figures.training_curves import render_training_curves

    history = [{"step": f"{e}-0", "images_seen": 1000 * e, "loss": 1 / (1 + e),
                "margin_loss": 0.5 / (1 + e), "reconstruction_loss": 0.1,
                "val_accuracy": 0.1 + 0.15 * e, "train_accuracy": 0.1 + 0.1 * e}
               for e in range(6)]
    _check(render_training_curves(history, "MNIST_Demo", chance=(0.1, "chance 10% = 1/10")))
    matrix = [[40 if i == j else 1 for j in range(10)] for i in range(10)]
    _check(render_confusion_matrix(matrix, [str(k) for k in range(10)], "MNIST_Demo", "5-40"))
