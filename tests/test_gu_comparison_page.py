"""The "Capsules vs CNNs" page: Gu 2022's Ch.5 Table 1 and Table 5 for the built models, at the
matched step, his published figures beside ours, every score beside its chance level and the
untrained step's value, the numbers as CSV; in a browser, both tables fit 1280 and 390 px with
every column visible."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest

from reportgen.pages.render import build_site, render_site
from reportgen.pages.sitedata import ModelData, Panel, SiteData, StepData
from reportgen.results.capsules_vs_cnns import TABLE1_REFERENCE, TABLE5_REFERENCE


def _panel(technique, numbers):
    return Panel(technique=technique, variant="", title=technique, layer="model", caption="",
                 figures=[], numbers=numbers)


def _model(name, kind, history, analysed, params=1000, until_accuracy=None):
    """A built model: `history` [(step, val_accuracy)], `analysed` {step: {technique: numbers}},
    `until_accuracy` the target its training run recorded (reportgen train --until-accuracy)."""
    steps = [StepData(step=s, dataset_panels=[_panel(t, n) for t, n in analysed.get(s, {}).items()])
             for s, _ in history]
    return ModelData(name=name, dataset="mnist40", description="", params=params,
                     class_names=[str(k) for k in range(10)], architecture=[],
                     history=[{"step": s, "val_accuracy": a} for s, a in history],
                     steps=steps, inputs=[], kind=kind,
                     training={"until_accuracy": until_accuracy})


CAPS = _model("MNIST40_AffCapsNet", "Aff-CapsNet",
              [("0-0", 0.0875), ("1-50", 0.95), ("2-50", 0.9931), ("3-50", 0.995)],
              {"0-0": {"affnist_benchmark": {"affnist_accuracy": 0.1125, "clean_accuracy": 0.1},
                       "adversarial_robustness": {"accuracy_capsules_pgd_0.1": 0.0625},
                       "capsule_semantics": {"compactness_rotation": 0.6875}},
               "2-50": {"affnist_benchmark": {"affnist_accuracy": 0.8125, "clean_accuracy": 0.98,
                                              "images": 50},
                        "adversarial_robustness": {"accuracy_capsules_fgsm_0.1": 0.375,
                                                   "accuracy_capsules_pgd_0.1": 0.25,
                                                   "clean_accuracy": 0.98, "images": 50},
                        "capsule_semantics": {"compactness_rotation": 0.375,
                                              "compactness_chance_pooled": [0.5, 0.8125]}},
               "3-50": {"affnist_benchmark": {"affnist_accuracy": 0.9, "clean_accuracy": 0.99}}},
              params=7_578_688)
CNN = _model("MNIST40_ConvNet_Avg", "ConvNet-Avg", [("0-0", 0.1), ("1-50", 0.97)],
             {"1-50": {"affnist_benchmark": {"affnist_accuracy": 0.6, "clean_accuracy": 0.96,
                                             "images": 50}}},
             params=5_332_234)
CR = _model("MNIST_ConvNet_CR", "ConvNet-CR", [("1-10", 0.995)],
            {"1-10": {"capsule_semantics": {"compactness_rotation": 0.0123}}})


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("gu")
    render_site(SiteData(title="t", models=[CAPS, CNN, CR], techniques=[]), root / "docs")
    return build_site(root, root / "site", strict=True)


def _rows(html, table_index):
    table = re.findall(r"<table class=\"rg-table rg-gu-table.*?</table>", html, re.S)[table_index]
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1], re.S)
    return [[re.sub(r"<[^>]+>", " ", c).split() for c in re.findall(r"<td.*?</td>", r, re.S)]
            for r in rows]


def wilson_text(right: int, n: int) -> str:
    """"89.5–99.9%": SciPy's Wilson interval of right / n, as the cells print it, its end
    within 3 of n replaced by the one-sided Poisson bound (Brown, Cai & DasGupta 2001)."""
    from scipy.stats import binomtest, chi2

    found = binomtest(right, n).proportion_ci(method="wilson")
    high = found.high if n - right > 3 or right == n else \
        1 - 0.5 * chi2.ppf(0.05, 2 * (n - right)) / n
    return f"{100 * found.low:.1f}–{100 * high:.1f}%"


def test_table1_reads_each_model_at_its_matched_step(site):
    html = (site / "capsules-vs-cnns.html").read_text("utf-8")
    caps, cnn, cr = _rows(html, 0)
    # the first analysed step at or above 99.22%: 2-50 (0.9931), not the later 3-50
    assert caps[2] == ["2-50", "validation", "99.31%"]
    mnist, affnist = TABLE1_REFERENCE["Aff-CapsNet"][1:]
    # each score over the same 50 evaluation images (said once, in the headers): ours, Gu's
    # figure, the untrained step's (its 0-0 analyses; "—" where 0-0 lacks that analysis)
    headers = re.findall(r"<th[^>]*>(.*?)</th>", html.split("<tbody>")[0])
    assert [h for h in headers if "images" in h] == [
        "Clean accuracy (50 images)", "affNIST-like (50 images)", "FGSM ε = 0.1 (50 images)",
        "PGD ε = 0.1 (50 images)"]
    # each with its Wilson interval over the 50 images (SciPy's, independently)
    assert caps[3] == ["98.00%", "95%", "CI", wilson_text(49, 50), "Gu:", f"{mnist:.2f}%",
                       "untrained:", "10.00%"]
    assert caps[4][0] == "81.25%" and caps[4][4:] == ["Gu:", f"{affnist:.2f}%", "untrained:",
                                                      "11.25%"]
    assert caps[5][0] == "37.50%" and caps[5][4:] == ["untrained:", "—"]      # FGSM at 0.1
    assert caps[6][0] == "25.00%" and caps[6][4:] == ["untrained:", "6.25%"]  # PGD at 0.1
    assert caps[1] == ["7,578,688", "Gu:", "7.5M"]
    assert caps[7] == ["10.00%"]                                       # chance: 1 of 10 classes
    # never reached the target: its most accurate analysed step, said so; 0-0 was not analysed
    # for it, which the cells say in words (its history still has the untrained accuracy)
    assert cnn[2] == ["1-50", "validation", "97.00%", "below", "target"]
    assert cnn[3] == ["96.00%", "95%", "CI", wilson_text(48, 50), "Gu:", "99.22%",
                      "untrained:", "not", "analysed"]
    assert cnn[4] == ["60.00%", "95%", "CI", wilson_text(30, 50), "Gu:", "94.11%",
                      "untrained:", "not", "analysed"]
    assert cr[4] == ["—", "untrained:", "not", "analysed"]             # no 40x40 benchmark
    assert "this build did not analyse step 0-0" in html


def test_scores_over_different_images_say_their_counts_in_each_cell(tmp_path):
    """Models whose evaluation sets differ: no count in the headers, each score says its own."""
    small = _model("MNIST40_CapsNet", "CapsNet", [("1-1", 0.5)],
                   {"1-1": {"affnist_benchmark": {"affnist_accuracy": 0.25, "clean_accuracy": 0.5,
                                                  "images": 20}}})
    large = _model("MNIST40_ConvNet_Avg", "ConvNet-Avg", [("1-1", 0.6)],
                   {"1-1": {"affnist_benchmark": {"affnist_accuracy": 0.3, "clean_accuracy": 0.6,
                                                  "images": 200}}})
    render_site(SiteData(title="t", models=[small, large], techniques=[]), tmp_path / "docs")
    page = (tmp_path / "docs" / "capsules-vs-cnns.md").read_text("utf-8")
    assert "Clean accuracy</th>" in page and "(20 images)" not in page
    first, second = _rows(page, 0)
    assert first[3][:7] == ["50.00%", "95%", "CI", wilson_text(10, 20), "on", "20", "images"]
    assert second[4][:7] == ["30.00%", "95%", "CI", wilson_text(60, 200), "on", "200",
                             "images"]
    assert "these models' evaluation sets differ" in page


def test_table1_as_a_live_chart_with_gus_figures_and_chance(site):
    """The table's scores as bars (a model without the benchmark has no affNIST-like bar),
    Gu's published figures as ticks on their bars, chance as a line; drawn by the site's own
    vega-embed."""
    import json

    html = (site / "capsules-vs-cnns.html").read_text("utf-8")
    specs = [json.loads(t) for t in re.findall(
        r'<script type="application/json" data-rg-spec>(.*?)</script>', html, re.S)]
    assert len(specs) == 1
    rows = {(r["model"], r["measure"]): r for r in specs[0]["data"]["values"]}
    caps = rows[(CAPS.name, "clean")]
    mnist, affnist = TABLE1_REFERENCE["Aff-CapsNet"][1:]
    assert (caps["value"], caps["gu"], caps["chance"]) == (0.98, mnist / 100, 0.1)
    # the bar's 95% interval, drawn as a rule through it: the table's own Wilson interval
    assert f"{100 * caps['low']:.1f}–{100 * caps['high']:.1f}%" == wilson_text(49, 50)
    rules = [layer for layer in specs[0]["layer"] if isinstance(layer["mark"], dict)
             and layer["mark"]["type"] == "rule"
             and "y2" in layer["encoding"]]
    assert [r["encoding"]["y2"]["field"] for r in rules] == ["high"]
    assert rows[(CAPS.name, "affNIST-like")]["gu"] == affnist / 100
    assert rows[(CAPS.name, "FGSM ε = 0.1")]["gu"] is None
    assert (CR.name, "affNIST-like") not in rows
    assert "assets/vendor/vega-embed.js" in html and "data-rg-smoothing" not in html
    # a chart of many bars takes the whole row at its own size (in a 470 px box its legend
    # was scaled to ~5 px)
    assert re.search(r'<figure class="rg-chart-box rg-chart-wide" data-rg-chart', html)
    css = (Path(__file__).resolve().parents[1] / "templates" / "assets" /
           "reportgen.css").read_text()
    assert re.search(r"\.rg-chart-box\.rg-chart-wide svg \{\s*max-width: none;", css)


def test_without_a_recorded_target_the_models_are_matched_at_gus(site):
    html = (site / "capsules-vs-cnns.html").read_text("utf-8")
    said = re.search(r'<p class="rg-matched-target">(.*?)</p>', html, re.S).group(1)
    assert re.sub(r"<[^>]+>", "", said) == "Matched at 99.22% (Gu: 99.22%)."
    assert "no model here was trained with" in html


def test_the_target_is_the_accuracy_the_models_were_trained_to():
    """ModelRecords alone (no TensorFlow): the lowest --until-accuracy the runs recorded, the
    matched step the first analysed one at or above it, Gu's 99.22% only when none was."""
    from reportgen.results.capsules_vs_cnns import (MATCHED_ACCURACY, TARGET_GU,
                                                    TARGET_TRAINED, ModelRecord,
                                                    matched_target, table1, table5)

    history = [{"step": s, "val_accuracy": a}
               for s, a in [("0-0", 0.1), ("1-20", 0.88), ("1-40", 0.91), ("2-40", 0.995)]]
    analysed = {s: {"affnist_benchmark": {"affnist_accuracy": a / 2},
                    "capsule_semantics": {"compactness_rotation": a / 10}}
                for s, a in [("1-20", 0.88), ("1-40", 0.91), ("2-40", 0.995)]}

    def record(name, until):
        return ModelRecord(name, "CapsNet", 10, history, analysed, 10, until_accuracy=until)

    trained = [record("A", 0.95), record("B", 0.9), record("C", None)]
    assert matched_target(trained) == (0.9, TARGET_TRAINED)
    assert matched_target([record("C", None)]) == (MATCHED_ACCURACY, TARGET_GU)
    target, _ = matched_target(trained)
    row = table1(trained, target)[0]
    assert (row["step"], row["reached"], row["target"]) == ("1-40", True, 0.9)
    assert row["affnist_accuracy"] == 0.455
    assert table5(trained, target)[0]["compactness"] == 0.091
    # at Gu's target the same history is matched at its 99.5% step
    assert table1(trained)[0]["step"] == "2-40"


def test_the_page_says_the_trained_target_beside_gus(tmp_path):
    analysed = {"1-40": {"affnist_benchmark": {"affnist_accuracy": 0.6, "clean_accuracy": 0.9}},
                "2-40": {"affnist_benchmark": {"affnist_accuracy": 0.7, "clean_accuracy": 0.95}}}
    caps = _model("MNIST40_CapsNet", "CapsNet", [("0-0", 0.1), ("1-40", 0.905), ("2-40", 0.95)],
                  analysed, until_accuracy=0.9)
    cnn = _model("MNIST40_ConvNet_Avg", "ConvNet-Avg", [("0-0", 0.1), ("1-40", 0.85)],
                 {"1-40": {"affnist_benchmark": {"affnist_accuracy": 0.5}}}, until_accuracy=0.9)
    render_site(SiteData(title="t", models=[caps, cnn], techniques=[]), tmp_path / "docs")
    page = (tmp_path / "docs" / "capsules-vs-cnns.md").read_text("utf-8")
    said = re.search(r'<p class="rg-matched-target">(.*?)</p>', page, re.S).group(1)
    assert re.sub(r"<[^>]+>", "", said).startswith("Matched at 90.00% (Gu: 99.22%): ")
    assert "the accuracy the models were trained to" in page
    table1 = list(csv.DictReader(io.StringIO(
        (tmp_path / "docs" / "numbers" / "capsules-vs-cnns-table1.csv").read_text("utf-8"))))
    assert [(r["step"], r["reached"], r["target"], r["affnist_accuracy"]) for r in table1] == [
        ("1-40", "True", "0.9", "0.6"), ("1-40", "False", "0.9", "0.5")]


def test_table5_and_the_csv_behind_both(site):
    html = (site / "capsules-vs-cnns.html").read_text("utf-8")
    caps, cr = _rows(html, 1)
    # ours beside the untrained score and what a random change gives (95th percentile, mean)
    assert caps[2] == ["0.3750", "untrained:", "0.6875"]
    assert caps[3] == ["0.8125", "mean", "0.5000"]
    assert cr[2] == ["0.0123", "untrained:", "not", "analysed"]
    assert cr[4] == [f"{TABLE5_REFERENCE['ConvNet-CR']:.4f}"]
    table1 = list(csv.DictReader(io.StringIO(
        (site / "numbers" / "capsules-vs-cnns-table1.csv").read_text("utf-8"))))
    assert [r["model"] for r in table1] == ["MNIST40_AffCapsNet", "MNIST40_ConvNet_Avg",
                                            "MNIST_ConvNet_CR"]
    assert float(table1[0]["affnist_accuracy"]) == 0.8125 and table1[0]["step"] == "2-50"
    assert float(table1[0]["untrained_pgd_0.1_accuracy"]) == 0.0625
    assert float(table1[0]["chance"]) == 0.1 and table1[0]["untrained_analysed"] == "True"
    assert table1[1]["reached"] == "False" and table1[1]["untrained_analysed"] == "False"
    table5 = list(csv.DictReader(io.StringIO(
        (site / "numbers" / "capsules-vs-cnns-table5.csv").read_text("utf-8"))))
    assert [(r["model"], float(r["compactness"])) for r in table5] == [
        ("MNIST40_AffCapsNet", 0.375), ("MNIST_ConvNet_CR", 0.0123)]
    assert (float(table5[0]["chance"]), float(table5[0]["untrained"])) == (0.8125, 0.6875)


def test_the_page_is_in_the_navigation_only_when_it_compares(site, tmp_path):
    home = (site / "index.html").read_text("utf-8")
    assert "capsules-vs-cnns" in home
    demo = _model("MNIST_Demo", "CapsNet", [("1-10", 0.97)],
                  {"1-10": {"capsule_semantics": {"compactness_rotation": 0.3}}})
    render_site(SiteData(title="t", models=[demo], techniques=[]), tmp_path / "docs")
    assert not (tmp_path / "docs" / "capsules-vs-cnns.md").exists()


@pytest.mark.browser
@pytest.mark.slow
def test_both_tables_show_every_column_at_1280_and_390_px(site):
    """No column hidden behind a horizontal scroll: at 1280 px each table is no wider than its
    container and every header lies inside it; at 390 px the rows stack into cards, every
    cell inside the screen."""
    from browser_support import CHROMIUM, chromium

    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed")
    pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    with chromium() as browser:
        for width in (1280, 390):
            context = browser.new_context(viewport={"width": width, "height": 900})
            page = context.new_page()
            page.goto((site / "capsules-vs-cnns.html").resolve().as_uri())
            tables = page.locator("table.rg-gu-table")
            assert tables.count() == 2
            for i in range(2):
                fit = tables.nth(i).evaluate(
                    """table => {
                        const box = table.parentElement.getBoundingClientRect();
                        const cells = [...table.querySelectorAll(
                            getComputedStyle(table.tHead).display === "none" ? "td" : "th")];
                        return {table: table.scrollWidth, container: box.width,
                                left: box.left, right: box.right,
                                cells: cells.map(c => [c.getBoundingClientRect().left,
                                                       c.getBoundingClientRect().right,
                                                       c.getBoundingClientRect().width])};
                    }""")
                assert fit["table"] <= fit["container"] + 1, (width, i, fit)
                for left, right, cell_width in fit["cells"]:
                    assert cell_width > 0 and fit["left"] - 1 <= left and right <= \
                        fit["right"] + 1, (width, i, left, right, fit)
            assert page.evaluate("document.scrollingElement.scrollWidth") <= width
            if width == 1280:
                # the live chart's legend and axis text print at their own size (>= 9 px)
                page.wait_for_selector("[data-rg-chart] svg text")
                sizes = page.evaluate("""() => [...document.querySelectorAll(
                    '[data-rg-chart] svg text')].map(t => t.getBoundingClientRect().height)
                    .filter(h => h > 0)""")
                assert sizes and min(sizes) >= 9, sorted(sizes)[:5]
            context.close()
