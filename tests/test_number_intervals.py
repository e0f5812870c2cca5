"""The numbers a site exports carry their 95% intervals: a dataset panel's CSV (key, value,
low, high, n, method; the intervals object not repeated as rows, paired differences as rows
of their own), the trend and comparison CSVs gathered from the steps' summaries, and the
panel's caption saying which method made them."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from reportgen.pages.analyses import derived_numbers
from reportgen.pages.assemble import export_figures
from reportgen.pages.captions import interval_words, with_interval_words
from reportgen.pages.sitedata import Panel
from reportgen.results import intervals as iv


def _summary(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    correct = rng.random(200) < 0.8
    aopc = rng.normal(0.3, 0.1, 200)
    summary = {"images": 200, "target": "true", "curve": None}
    iv.attach(summary, "accuracy", iv.proportion(correct))
    iv.attach(summary, "aopc", iv.bootstrap_mean(aopc))
    iv.attach(summary, "curve", [iv.proportion(correct[:100]), iv.proportion(correct[100:])])
    iv.attach_difference(summary, "aopc", "accuracy", iv.paired_difference(aopc, correct))
    return summary


def _rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_the_panel_csv_writes_each_interval_beside_its_score():
    summary = _summary()
    files = {f.kind: f.data.decode() for f in export_figures("demo", summary)}
    rows = {r["key"]: r for r in _rows(files["csv"])}
    assert list(next(iter(rows.values()))) == ["key", "value", "low", "high", "n", "method"]
    accuracy = iv.interval_of(summary, "accuracy")
    assert rows["accuracy"] == {"key": "accuracy", "value": str(accuracy.value),
                                "low": str(accuracy.low), "high": str(accuracy.high),
                                "n": "200", "method": "Wilson"}
    curve = [iv.interval_of(summary, "curve", i) for i in range(2)]
    assert rows["curve"]["value"] == f"{curve[0].value} {curve[1].value}"
    assert rows["curve"]["low"] == f"{curve[0].low} {curve[1].low}"
    assert rows["curve"]["n"] == "100 100"
    assert rows["aopc"]["method"] == iv.BOOTSTRAP
    difference = iv.difference_of(summary, "aopc", "accuracy")
    assert float(rows["aopc - accuracy"]["value"]) == pytest.approx(difference.value)
    assert float(rows["aopc - accuracy"]["high"]) == pytest.approx(difference.high)
    assert rows["images"] == {"key": "images", "value": "200", "low": "", "high": "", "n": "",
                              "method": ""}
    assert not any(k.startswith("intervals") for k in rows)
    # the JSON keeps the intervals object as it is
    assert json.loads(files["json"])["intervals"]["accuracy"]["n"] == 200


def test_the_trend_csv_carries_each_steps_intervals():
    panels = [(step, Panel(technique="demo", variant="", title="Demo", layer="model",
                           caption="", figures=[], numbers=_summary(seed)))
              for seed, step in enumerate(("1-10", "2-20"))]
    text_json, text_csv = derived_numbers(panels[0][1], panels, "step")
    rows = _rows(text_csv)
    assert list(rows[0]) == ["step", "key", "value", "low", "high", "n", "method"]
    for step, panel in panels:
        accuracy = iv.interval_of(panel.numbers, "accuracy")
        row = next(r for r in rows if r["step"] == step and r["key"] == "accuracy")
        assert (float(row["low"]), float(row["high"])) == (accuracy.low, accuracy.high)
    assert json.loads(text_json)["series"][1]["summary"]["intervals"]["aopc"]["method"] == \
        iv.BOOTSTRAP


def test_the_caption_names_the_methods():
    summary = _summary()
    words = interval_words(summary)
    assert words == ("95% intervals: Wilson for accuracies and rates, BCa bootstrap over the "
                     "200 images otherwise; differences paired on the same images.")
    only_means = {"aopc": 0.3}
    iv.attach(only_means, "aopc", iv.bootstrap_mean(np.arange(50.0)))
    assert interval_words(only_means) == "95% intervals: BCa bootstrap over the 50 images."
    pooled = {}
    iv.attach(pooled, "ratio", iv.bootstrap_ratio(np.arange(1.0, 31), np.ones(30)))
    assert "whole statistic" in interval_words(pooled)
    assert interval_words({"images": 3}) == "" and interval_words(None) == ""
    assert with_interval_words("Deletion curves.", summary) == f"Deletion curves. {words}"
    assert with_interval_words(f"Curves. {words}", summary) == f"Curves. {words}"   # once
