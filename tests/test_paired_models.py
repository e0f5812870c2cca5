"""Two models compared on the same images: per-image outcomes kept in a summary, the paired
difference with its interval and McNemar's exact test, decided wording, seed groups as mean ±
t interval over seeds, and the "Differences on the same images" table of Capsules vs CNNs."""

from __future__ import annotations

import csv
import html
import io
import math
import re

import numpy as np
import pytest

from reportgen.pages.render import render_site
from reportgen.pages.sitedata import ModelData, Panel, SiteData, StepData
from reportgen.results import intervals as iv
from reportgen.results import per_image
from reportgen.results.capsules_vs_cnns import ModelRecord, differences, group_rows, table1

LABELS = np.arange(60) % 10


def _exact_mcnemar(only_a: int, only_b: int) -> float:
    """The two-sided exact McNemar p-value from its definition: twice the smaller binomial
    tail of the discordant images at p = 1/2, at most 1."""
    n = only_a + only_b
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def test_outcomes_round_trip_and_pair_only_on_the_same_images():
    rng = np.random.default_rng(1)
    correct = rng.random(60) < 0.7
    summary = per_image.attach_outcomes({}, "clean_accuracy", correct, LABELS)
    images, got = per_image.outcomes_of(summary, "clean_accuracy")
    assert np.array_equal(got, correct) and images.startswith("60:")
    other = per_image.attach_outcomes({}, "clean_accuracy", correct, LABELS[::-1])
    assert not per_image.pairable(per_image.outcomes_of(summary, "clean_accuracy"),
                                  per_image.outcomes_of(other, "clean_accuracy"))
    assert per_image.outcomes_of(summary, "missing") is None
    with pytest.raises(ValueError, match="one per image"):
        per_image.attach_outcomes({}, "x", correct[:5], LABELS)


@pytest.mark.parametrize("only_a, only_b", [(0, 6), (3, 9), (7, 7), (0, 0), (12, 1)])
def test_mcnemar_is_the_exact_binomial_test_of_the_discordant_images(only_a, only_b):
    both = 20
    a = np.array([True] * only_a + [False] * only_b + [True] * both + [False] * 5)
    b = np.array([False] * only_a + [True] * only_b + [True] * both + [False] * 5)
    assert per_image.mcnemar_exact(a, b) == pytest.approx(
        _exact_mcnemar(only_a, only_b) if only_a + only_b else 1.0, rel=1e-12)


def test_the_comparison_is_paired_and_its_words_follow_the_interval():
    rng = np.random.default_rng(0)
    b = rng.random(200) < 0.6
    a = b | (rng.random(200) < 0.5)        # a gets right all b does, and more
    found = per_image.compare(a, b)
    expected = iv.paired_difference(a.astype(float), b.astype(float))
    assert found.difference == expected
    assert found.difference.value == pytest.approx(a.mean() - b.mean())
    assert (found.only_a, found.only_b) == (int((a & ~b).sum()), 0)
    assert found.decided and found.difference.low > 0
    assert found.words("A", "B", "accuracy").startswith("A's accuracy is above B's by ")
    # a difference of one image in 40: the interval includes 0, and the sentence says so
    c = np.array([True] * 30 + [False] * 10)
    d = c.copy()
    d[0] = False
    close = per_image.compare(c, d)
    assert close.difference.low <= 0 <= close.difference.high and not close.decided
    sentence = close.words("A", "B", "accuracy")
    assert "cannot be told apart on these 40 images" in sentence
    needed = iv.images_to_tell(close.difference, 0.0)
    assert f"about {needed:,} images would be needed" in sentence
    same = per_image.compare(c, c)
    assert "they get the same images right" in same.words("A", "B", "accuracy")


def _summaries(clean, affnist):
    affnist_summary = {"images": LABELS.size, "affnist_accuracy": float(affnist.mean()),
                       "clean_accuracy": float(clean.mean())}
    per_image.attach_outcomes(affnist_summary, "affnist_accuracy", affnist, LABELS)
    per_image.attach_outcomes(affnist_summary, "clean_accuracy", clean, LABELS)
    return {"affnist_benchmark": affnist_summary}


def _record(name, kind, clean, affnist, group=None):
    return ModelRecord(name=name, kind=kind, parameters=1, classes=10,
                       history=[{"step": "1-1", "val_accuracy": 0.99}],
                       summaries={"1-1": _summaries(clean, affnist)})


def test_differences_pair_each_capsule_model_with_each_cnn():
    rng = np.random.default_rng(3)
    clean = rng.random((3, 60)) < 0.95
    affnist = np.stack([rng.random(60) < p for p in (0.9, 0.5, 0.85)])
    records = [_record("Caps", "Aff-CapsNet", clean[0], affnist[0]),
               _record("CNN", "ConvNet-FC", clean[1], affnist[1]),
               _record("Caps2", "CapsNet", clean[2], affnist[2])]
    rows = differences(records, target=0.99)
    # capsules against the CNN only (not Caps against Caps2), per score that has outcomes
    assert {(r["a"], r["b"]) for r in rows} == {("Caps", "CNN"), ("Caps2", "CNN")}
    assert {r["score"] for r in rows} == {"clean_accuracy", "affnist_accuracy"}
    row = next(r for r in rows if r["a"] == "Caps" and r["score"] == "affnist_accuracy")
    expected = iv.paired_difference(affnist[0].astype(float), affnist[1].astype(float))
    assert (row["value"], row["low"], row["high"], row["n"]) == \
        (expected.value, expected.low, expected.high, 60)
    assert row["p_value"] == pytest.approx(_exact_mcnemar(int((affnist[0] & ~affnist[1]).sum()),
                                                          int((~affnist[0] & affnist[1]).sum())))
    assert row["decided"] == expected.excludes(0.0)
    # another evaluation sample: nothing pairs
    shuffled = _record("CNN", "ConvNet-FC", clean[1], affnist[1])
    for summary in shuffled.summaries["1-1"].values():
        summary[per_image.PER_IMAGE]["images"] = per_image.fingerprint(LABELS[::-1])
    assert differences([records[0], shuffled], target=0.99) == []


class _Run:
    def __init__(self, name, seed):
        self.name = name
        self.group = {"group": "G", "base": "Caps", "settings": {"seed": seed}, "seed": seed}


def test_seed_groups_are_the_mean_with_the_t_interval_over_seeds():
    from scipy import stats

    rng = np.random.default_rng(5)
    records, runs = [], []
    for seed in range(3):
        clean = rng.random(60) < 0.9 + 0.03 * seed
        records.append(_record(f"Caps--seed-{seed}", "CapsNet", clean, rng.random(60) < 0.6))
        runs.append(_Run(f"Caps--seed-{seed}", seed))
    rows = table1(records, target=0.99)
    (group,) = group_rows(rows, runs)
    values = [r["clean_accuracy"] for r in rows]
    low, high = stats.t.interval(0.95, 2, loc=np.mean(values), scale=stats.sem(values))
    assert group["seeds"] == 3 and group["members"] == [r.name for r in runs]
    assert group["clean_accuracy"] == pytest.approx(np.mean(values))
    assert (group["clean_accuracy_low"], group["clean_accuracy_high"]) == \
        (pytest.approx(low), pytest.approx(high))
    assert group["fgsm_0.1_accuracy"] is None and group["fgsm_0.1_accuracy_seeds"] == 0


def _model_data(name, kind, clean, affnist, group=None):
    panels = [Panel(technique=t, variant="", title=t, layer="model", caption="", figures=[],
                    numbers=n) for t, n in _summaries(clean, affnist).items()]
    return ModelData(name=name, dataset="mnist40", description="", params=1000,
                     class_names=[str(k) for k in range(10)], architecture=[],
                     history=[{"step": "1-1", "val_accuracy": 0.99}],
                     steps=[StepData(step="1-1", dataset_panels=panels)], inputs=[], kind=kind,
                     training={}, group=group)


def test_the_page_shows_the_differences_and_the_seed_groups(tmp_path):
    rng = np.random.default_rng(7)
    models = []
    for seed in range(2):
        models.append(_model_data(f"Caps--seed-{seed}", "Aff-CapsNet", rng.random(60) < 0.95,
                                  rng.random(60) < 0.9, group=_Run("", seed).group))
    models.append(_model_data("CNN", "ConvNet-FC", rng.random(60) < 0.95, np.zeros(60, bool)))
    render_site(SiteData(title="t", models=models, techniques=[]), tmp_path / "docs")
    page = html.unescape((tmp_path / "docs" / "capsules-vs-cnns.md").read_text("utf-8"))
    assert "Differences on the same images" in page and "Over seeds" in page
    # the CNN gets no affNIST-like digit right: each capsule run is above it, said so
    assert re.search(r"Caps--seed-0's affNIST-like accuracy is above CNN's by [\d.]+ points "
                     r"\(95% CI [\d.]+–[\d.]+ on the difference, McNemar p < 0\.001, 60 images",
                     page)
    table = list(csv.DictReader(io.StringIO(
        (tmp_path / "docs" / "numbers" / "capsules-vs-cnns-differences.csv").read_text())))
    assert {(r["a"], r["b"], r["score"]) for r in table} == {
        (f"Caps--seed-{s}", "CNN", k) for s in range(2)
        for k in ("clean_accuracy", "affnist_accuracy")}
    assert all(r["low"] and r["high"] and r["method"] == iv.BOOTSTRAP for r in table)
