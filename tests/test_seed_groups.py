"""Runs that differ only by their seed (reportgen/results/seed_groups.py): their mean with
Student's t interval over the seeds, against SciPy's own, and the groups found from group.json
records."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from reportgen.results import seed_groups as G


def test_the_seed_interval_equals_scipys_t_interval():
    from scipy import stats

    values = [0.951, 0.962, 0.947]
    got = G.seed_interval(values)
    low, high = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values),
                                 scale=stats.sem(values))
    assert got.value == pytest.approx(np.mean(values))
    assert (got.low, got.high) == (pytest.approx(low), pytest.approx(high))
    assert got.n == 3 and got.method == G.SEEDS
    assert G.seed_interval([0.9]) is None and G.seed_interval([0.9, float("nan")]) is None


def test_the_t_interval_covers_the_true_mean_over_seeds():
    rng = np.random.default_rng(3)
    draws = [G.seed_interval(rng.normal(0.9, 0.02, 3)) for _ in range(2000)]
    hits = sum(d.low <= 0.9 <= d.high for d in draws)
    assert 0.93 <= hits / len(draws) <= 0.97


def run(name, group, settings, history=()):
    return SimpleNamespace(name=name, history=list(history),
                           group={"group": group, "base": "Base", "settings": settings})


def test_groups_are_the_runs_that_differ_only_by_seed():
    runs = [run("a0", "g", {"routing_iterations": 1, "seed": 0}),
            run("a1", "g", {"routing_iterations": 1, "seed": 1}),
            run("b0", "g", {"routing_iterations": 2, "seed": 0}),
            run("b1", "g", {"routing_iterations": 2, "seed": 1}),
            run("c", "g", {"routing_iterations": 3}),          # no seed: a sweep point alone
            run("other", "h", {"seed": 0}),                    # alone in its group
            SimpleNamespace(name="plain", group=None, history=[])]
    found = G.seed_groups(runs)
    assert [(g.name, [m.name for m in g.members]) for g in found] == [
        ("Base, routing_iterations = 1", ["a0", "a1"]),
        ("Base, routing_iterations = 2", ["b0", "b1"])]


def test_the_mean_curve_is_taken_where_every_seed_saved_a_step():
    h1 = [{"step": "0-0", "images_seen": 0, "val_accuracy": 0.1},
          {"step": "1-0", "images_seen": 100, "val_accuracy": 0.8},
          {"step": "2-0", "images_seen": 200, "val_accuracy": 0.9}]
    h2 = [{"step": "0-0", "images_seen": 0, "val_accuracy": 0.12},
          {"step": "1-0", "images_seen": 100, "val_accuracy": 0.84}]
    rows = G.mean_curve([h1, h2], "val_accuracy")
    assert [r["x"] for r in rows] == [0.0, 100.0]           # 200: one seed only
    assert rows[1]["value"] == pytest.approx(0.82) and rows[1]["n"] == 2
    assert rows[1]["low"] < 0.8 and rows[1]["high"] > 0.84


def test_compare_overlays_a_seed_groups_mean_in_its_band():
    from reportgen.pages.charts import compare_charts
    from reportgen.pages.sitedata import ModelData

    def model(name, seed, accuracies):
        history = [{"step": f"{i}-0", "images_seen": 100 * i, "val_accuracy": a, "loss": 1 - a}
                   for i, a in enumerate(accuracies)]
        return ModelData(name=name, dataset="mnist", description="", params=1,
                         class_names=[str(d) for d in range(10)], architecture=[],
                         history=history, steps=[], inputs=[],
                         group={"group": "g", "base": "Demo", "settings": {"seed": seed}})

    models = [model("Demo--seed-0", 0, [0.1, 0.80, 0.90]),
              model("Demo--seed-1", 1, [0.1, 0.84, 0.92]),
              model("Demo--seed-2", 2, [0.1, 0.82, 0.91])]
    accuracy = compare_charts(models)[0]
    rows = [r for r in accuracy["spec"]["data"]["values"]
            if r["series"] == "Demo: mean of 3 seeds"]
    expected = G.seed_interval([0.80, 0.84, 0.82])
    assert rows[1]["value"] == pytest.approx(0.82)
    assert (rows[1]["low"], rows[1]["high"]) == (pytest.approx(expected.low),
                                                 pytest.approx(expected.high))
    assert "95% t interval over its seeds" in accuracy["label"]


def test_the_runs_table_gives_a_seed_groups_mean_and_interval():
    from reportgen.pages.runs import runs_table
    from reportgen.pages.sitedata import ModelData

    def model(name, seed, best):
        return ModelData(name=name, dataset="mnist", description="", params=1,
                         class_names=["a", "b"], architecture=[], history=[], steps=[],
                         inputs=[], best_val_accuracy=best, latest_val_accuracy=best,
                         group={"group": "g", "base": "Demo", "settings": {"seed": seed}})

    table = runs_table([(model(f"Demo--seed-{i}", i, b), "") for i, b in
                        enumerate([0.95, 0.97, 0.96])])
    [group] = table["groups"]
    found = G.seed_interval([0.95, 0.97, 0.96])
    assert group["seeds"] == 3 and group["runs"] == ["Demo--seed-0", "Demo--seed-1",
                                                     "Demo--seed-2"]
    assert group["best"] == (f"96.00% (95% CI {100 * found.low:.2f}–"
                             f"{100 * found.high:.2f}%)")
