"""The pages of a two-digit (MultiMNIST) model name its accuracy "top-2 accuracy" beside its
chance, 1/C(10, 2) = 1/45 = 2.2%, wherever they show it (overview, Home, Compare), while a
single-label model's stays plain "accuracy"; and Gu's MNIST/affNIST comparison leaves it out."""

from __future__ import annotations

import json
import re

from site_fixture import make_site


def _two_digit(model) -> None:
    """Make a fixture model's steps those of a two-digit model: top-2 accuracy, per class the
    share of its images whose top-2 holds it, no confusion matrix."""
    model.labels_per_image = 2
    for i, step in enumerate(model.steps):
        step.confusion_matrix = None
        step.per_class_accuracy = [0.5 + 0.04 * c for c in range(len(model.class_names))]
        step.predicted_pair = {"images": 200, "pair": [0, 1], "predicted": 12, "labelled": 5}
        step.accuracy = 0.3 + 0.2 * i


def test_a_two_digit_models_accuracy_is_top2_beside_1_in_45(tmp_path):
    from reportgen.pages.render import render_site

    docs = tmp_path / "docs"
    site = make_site(docs)
    pair, single = site.models
    _two_digit(pair)
    pair.history[-1]["val_images"] = 1000
    render_site(site, docs, theme="mkdocs")
    chance = "2.2% = 1/45"
    from scipy.stats import binomtest

    right = round(pair.history[-1]["val_accuracy"] * 1000)
    ci = binomtest(right, 1000).proportion_ci(method="wilson")      # Wilson, from SciPy
    overview = (docs / "models" / "MNIST_Demo" / "index.md").read_text()
    facts = overview[overview.index('<dl class="rg-facts">'):overview.index("</dl>")]
    assert f"<dt>Latest val. top-2 accuracy</dt><dd>{100 * pair.latest_val_accuracy:.2f}% " \
           f'<span class="rg-muted">(95% CI {100 * ci.low:.1f}–{100 * ci.high:.1f}%, 1,000 ' \
           f'held-out images, step {pair.history[-1]["step"]}; chance {chance})</span></dd>' \
           in facts
    assert "<dt>Best val. top-2 accuracy</dt>" in facts
    evaluation = overview[overview.index('id="evaluation"'):overview.index('id="inputs"')]
    assert evaluation.startswith('id="evaluation">Per-class top-2 accuracy</h2>')
    last = pair.steps[-1]
    step_ci = binomtest(round(last.accuracy * 200), 200).proportion_ci(method="wilson")
    assert (f"Step <b>{last.step}</b>: top-2 accuracy <b>{100 * last.accuracy:.2f}%</b> "
            f"(95% CI {100 * step_ci.low:.1f}–{100 * step_ci.high:.1f}%, Wilson; chance "
            f"{chance}) on 200 evaluation images") in evaluation
    assert "Not evaluated" not in evaluation and "predicted&nbsp;&#8594;" not in evaluation
    shares = re.findall(r'<span class="rg-acc-text">([\d.]+)%</span>', evaluation)
    assert shares == [f"{100 * s:.1f}" for s in last.per_class_accuracy] * len(pair.steps)
    curves = overview[overview.index('id="training-curves"'):overview.index('id="evaluation"')]
    assert "validation top-2 accuracy" in curves and f"chance {chance}" in curves
    assert 'aria-label="Top-2 accuracy over training"' in curves
    # the single-label model keeps its words and its confusion matrix
    other = next(p for p in (docs / "models").iterdir() if p.name != "MNIST_Demo")
    plain = (other / "index.md").read_text()
    assert "<dt>Latest val. accuracy</dt>" in plain and "top-2" not in plain
    assert "predicted&nbsp;&#8594;" in plain
    home = (docs / "index.md").read_text()
    rows = home[home.index("<tbody>"):home.index("</tbody>")].split("<tr>")
    [pair_row] = [r for r in rows if "MNIST_Demo" in r]
    assert f'<div class="rg-muted">top-2 accuracy; chance {chance}</div>' in pair_row
    assert all("top-2" not in r for r in rows if "rg-model-link" in r and r is not pair_row)
    compare = (docs / "compare.md").read_text()
    series = {v.get("series") for t in re.findall(
        r'<script type="application/json" data-rg-spec>(.*?)</script>', compare, re.S)
        for v in json.loads(t).get("data", {}).get("values", [])}
    assert "MNIST_Demo (top-2 accuracy)" in series and f'"label": "chance {chance}"' in compare
    assert "MNIST_Demo" in series                                 # the loss chart's row


def test_gu_comparison_leaves_out_two_digit_models(tmp_path):
    """Gu 2022's Table 1 reads MNIST and affNIST accuracy: top-2 accuracy on digit pairs is
    not that, so a two-digit model gets no row, whatever its kind."""
    from reportgen.pages.gu_comparison import comparison

    site = make_site(tmp_path / "docs")
    pair, cnn = site.models
    pair.kind, cnn.kind = "CapsNet", "ConvNet-Avg"       # a CNN baseline: the page is drawn
    assert [r["model"] for r in comparison(site.models)["accuracy"]] == [pair.name, cnn.name]
    _two_digit(pair)
    assert [r["model"] for r in comparison(site.models)["accuracy"]] == [cnn.name]
