"""A technique's result is checked before anything of it is stored: one row per input for an
input-scope result, numeric (floating arrays as float32), finite unless the technique declares
where NaN may appear. A result breaking a rule fails that technique alone, named, with nothing
of it stored: the next build computes it again rather than reusing a slice of it."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest

from reportgen.engine.result_checks import checked_result
from reportgen.errors import ReportgenError
from reportgen.figures.figure import Figure
from reportgen.techniques.base import Technique


@dataclass(frozen=True)
class Params:
    """No options."""


def _draw(arrays, params, ctx):
    return [Figure(name="x.json", data=b"{}", kind="json")]


def _technique(name, compute, scope="input", **extra):
    return Technique(name=name, title=name.replace("_", " ").capitalize(), layer="model",
                     scope=scope, needs=frozenset() if scope != "dataset"
                     else frozenset({"lengths"}), applies_to=frozenset(), params_type=Params,
                     version=1, compute=compute, render=_draw, **extra)


CALLS = {"wrong_batch": 0, "nan_scores": 0}


def _one_row(batch, params=None):          # one row whatever the batch: a wrong batch axis
    CALLS["wrong_batch"] += 1
    return {"mean": np.zeros((1, 3), np.float32)}


def _nan(batch, params=None):
    CALLS["nan_scores"] += 1
    n = len(batch.images)
    return {"score": np.full((n,), np.nan, np.float32), "fine": np.ones((n, 2))}


def _unused(batch, params=None):
    raise AssertionError("not called")


def test_checks_name_the_technique_the_array_and_what_was_expected():
    t = _technique("plugin_x", _unused)
    out = checked_result(t, {"a": np.ones((2, 3)), "idx": np.arange(2)}, rows=2)
    assert out["a"].dtype == np.float32 and out["idx"].dtype.kind == "i"
    with pytest.raises(ReportgenError) as raised:
        checked_result(t, {"a": np.ones((1, 3), np.float32)}, rows=2)
    message = raised.value.message
    assert "Technique 'plugin_x'" in message and "'a'" in message
    assert "batch axis of 2" in message and "shape (1, 3)" in message
    with pytest.raises(ReportgenError, match=r"'s'.*batch axis of 2.*shape \(\)"):
        checked_result(t, {"s": np.float32(1)}, rows=2)
    with pytest.raises(ReportgenError, match=r"'c'.*float32.*complex128"):
        checked_result(t, {"c": np.ones(2, complex)}, rows=2)
    with pytest.raises(ReportgenError, match=r"'o'.*float32.*object"):
        checked_result(t, {"o": np.array([None, 1], object)}, rows=2)
    with pytest.raises(ReportgenError, match=r"'n'.*finite.*1 NaN and 0 infinite"):
        checked_result(t, {"n": np.array([0.0, np.nan])}, rows=2)
    # float64 beyond float32's range would be stored as inf
    with pytest.raises(ReportgenError, match=r"'big'.*0 NaN and 1 infinite"):
        checked_result(t, {"big": np.array([1e300, 0.0])}, rows=2)
    with pytest.raises(ReportgenError, match="no dict"):
        checked_result(t, [np.ones(2)], rows=2)


def test_nan_only_where_declared_and_never_inf():
    declared = _technique("declares", _unused, may_hold_nan=(("score", "an input without a "
                                                                      "target class"),))
    assert np.isnan(checked_result(declared, {"score": np.array([np.nan, 1.0])})["score"][0])
    with pytest.raises(ReportgenError, match="'other'"):
        checked_result(declared, {"other": np.array([np.nan, 1.0])})
    with pytest.raises(ReportgenError, match="'score'.*1 infinite"):
        checked_result(declared, {"score": np.array([np.inf, 1.0])})
    # undeclared: no NaN in any scope for a plug-in's (or one registered in code)
    for scope in ("input", "checkpoint", "dataset"):
        with pytest.raises(ReportgenError, match="may_hold_nan"):
            checked_result(_technique("over_" + scope, _unused, scope=scope),
                           {"per_class": np.array([np.nan, 0.5])})
    declared_set = _technique("over_the_set", _unused, scope="dataset",
                              may_hold_nan=(("*", "an absent class's accuracy"),))
    assert checked_result(declared_set, {"per_class": np.array([np.nan, 0.5])})
    with pytest.raises(ReportgenError, match="malformed"):
        checked_result(_technique("bad", _unused, may_hold_nan=(("x", ""),)),
                       {"x": np.array([np.nan])})


HOSTILE = (_technique("wrong_batch", _one_row), _technique("nan_scores", _nan))


@pytest.fixture
def hostile(monkeypatch):
    from reportgen import techniques

    monkeypatch.setenv("REPORTGEN_DRAWING_PROCESSES", "0")
    for technique in HOSTILE:
        techniques.register(technique)
    yield
    for technique in HOSTILE:
        techniques.unregister(technique.name)


def _stored_techniques(cache):
    return {json.loads(p.read_text()).get("technique") for p in cache.rglob("meta.json")}


@pytest.mark.slow
def test_a_wrong_shaped_and_a_nan_technique_each_fail_alone_with_nothing_stored(hostile,
                                                                                tmp_path):
    from conftest import TINY_PARAMS
    from family_nets import write_model
    from test_training import _tiny_data

    from reportgen.catalog import Catalog
    from reportgen.commands.build import BuildOptions, build
    from reportgen.pages.input_scripts import read_index
    from reportgen.training.trainer import TrainOptions, train

    data = _tiny_data(tmp_path / "toy.npz", n=30)
    models = tmp_path / "models"
    write_model(models, "Tiny", TINY_PARAMS, data)
    train(Catalog(models).get("Tiny"), TrainOptions(limit=10))
    site, cache = tmp_path / "site", tmp_path / "cache"
    options = BuildOptions(steps="1-1", images="test:0-2", analyses="none",
                           techniques=("predictions", "wrong_batch", "nan_scores"),
                           cache_dir=str(cache), site_dir=str(site))
    summary = build(Catalog(models), options)
    assert summary.site == "built"
    failed = sorted(line for line in summary.failed if "step 1-1" in line)
    assert len(failed) == 2, summary.failed
    nan_line, batch_line = failed
    assert nan_line.startswith("Tiny step 1-1: Nan scores failed (for 3 inputs): Technique "
                               "'nan_scores' returned an unusable array 'score'.")
    assert "3 NaN and 0 infinite of 3 values (shape (3,), float32)" in nan_line
    assert batch_line.startswith("Tiny step 1-1: Wrong batch failed (for 3 inputs): Technique "
                                 "'wrong_batch' returned an unusable array 'mean'.")
    assert "a batch axis of 3" in batch_line and "shape (1, 3) (float32)" in batch_line
    records = read_index(site / "models" / "Tiny")["steps"]["1-1"]["inputs"]["test-0"]
    assert records["predictions"]["figures"] and "failed" not in records["predictions"]
    assert "unusable array 'mean'" in records["wrong_batch"]["failed"]
    assert "unusable array 'score'" in records["nan_scores"]["failed"]
    assert records["wrong_batch"]["figures"] == records["nan_scores"]["figures"] == []
    # the cards' script shows a record's reason as "Failed at this step: ..."
    assert "Failed at this step" in (site / "assets" / "reportgen" / "site-data.js").read_text()
    # nothing of either is stored; the healthy technique is
    stored = _stored_techniques(cache)
    assert "predictions" in stored and not {"wrong_batch", "nan_scores"} & stored
    # the next build computes them again (and fails them the same way), it reuses nothing
    calls = dict(CALLS)
    again = build(Catalog(models), options)
    assert all(CALLS[name] > calls[name] for name in CALLS)
    assert again.computed == 0 and sorted(
        line for line in again.failed if "step 1-1" in line) == failed
    assert not {"wrong_batch", "nan_scores"} & _stored_techniques(cache)
