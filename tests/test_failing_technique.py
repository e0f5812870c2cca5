"""A failing technique fails alone: when one technique raises while it computes or draws, its
cards say so in one line at that step, every other technique of the model is computed, drawn
and shown, the build's summary names it (exit code 1), and nothing is stored for it, so the next
build tries again."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from conftest import TINY_PARAMS
from family_nets import write_model
from test_training import _tiny_data

from reportgen import techniques
from reportgen.figures.figure import Figure
from reportgen.pages.input_scripts import read_index
from reportgen.techniques.base import Technique


@dataclass(frozen=True)
class Params:
    """No options."""


def _raises(message):
    def compute(batch, params=None):
        raise RuntimeError(message)
    return compute


def _mean_image(batch, params=None):
    return {"mean": np.asarray(batch.images, np.float32).mean(axis=(1, 2, 3))}


def _draw(arrays, params, ctx):
    return [Figure(name="x.json", data=b"{}", kind="json")]


def _draw_fails(arrays, params, ctx):
    raise ValueError("cannot draw this")


FAILING = (
    Technique(name="fails_computing", title="Fails computing", layer="model", scope="input",
              needs=frozenset(), applies_to=frozenset(), params_type=Params, version=1,
              compute=_raises("boom in compute"), render=_draw),
    Technique(name="fails_drawing", title="Fails drawing", layer="model", scope="input",
              needs=frozenset(), applies_to=frozenset(), params_type=Params, version=1,
              compute=_mean_image, render=_draw_fails),
    Technique(name="fails_over_the_set", title="Fails over the set", layer="model",
              scope="dataset", needs=frozenset({"lengths"}), applies_to=frozenset(),
              params_type=Params, version=1, compute=_raises("boom over the set"),
              render=_draw),
)


@pytest.fixture
def failing(monkeypatch):
    # the build's drawing worker is another process, which knows reportgen's registry only
    monkeypatch.setenv("REPORTGEN_DRAWING_PROCESSES", "0")
    for technique in FAILING:
        techniques.register(technique)
    yield
    for technique in FAILING:
        techniques.unregister(technique.name)


@pytest.mark.slow
def test_a_failing_technique_fails_alone(failing, tmp_path):
    from reportgen.catalog import Catalog
    from reportgen.commands.build import BuildOptions, build
    from reportgen.training.trainer import TrainOptions, train

    data = _tiny_data(tmp_path / "toy.npz", n=30)
    models = tmp_path / "models"
    write_model(models, "Tiny", TINY_PARAMS, data)
    train(Catalog(models).get("Tiny"), TrainOptions(limit=10))
    site = tmp_path / "site"
    options = BuildOptions(steps="1-1", images="test:0-1", analyses="last", eval_images=10,
                           techniques=("predictions", "fails_computing", "fails_drawing",
                                       "fails_over_the_set", "conv_feature_maps"),
                           cache_dir=str(tmp_path / "cache"), site_dir=str(site))
    summary = build(Catalog(models), options)
    assert summary.site == "built"
    failed = sorted(summary.failed)
    assert [line for line in failed if "step 1-1" in line] == [
        "Tiny step 1-1: Fails computing failed (for 2 inputs): RuntimeError: boom in compute",
        "Tiny step 1-1: Fails drawing failed (for 2 inputs): drawing it failed: ValueError: "
        "cannot draw this",
        "Tiny step 1-1: Fails over the set failed: RuntimeError: boom over the set"]
    index = read_index(site / "models" / "Tiny")      # with each input's script
    step = index["steps"]["1-1"]
    records = step["inputs"]["test-0"]
    assert records["fails_computing"]["failed"] == "RuntimeError: boom in compute"
    assert records["fails_computing"]["figures"] == []
    assert records["predictions"]["figures"] and "failed" not in records["predictions"]
    assert any(r["figures"] for key, r in records.items() if key.startswith("conv_feature"))
    assert step["dataset"]["fails_over_the_set"]["failed"] == \
        "RuntimeError: boom over the set"
    pages = "".join(p.read_text("utf-8") for p in (site / "models" / "Tiny").rglob("*.html"))
    assert "Failed at this step: RuntimeError: boom in compute" in pages
    # nothing stored for what failed: the next build computes nothing new, tries the failing
    # computations again and says the same
    again = build(Catalog(models), options)
    assert again.computed == 0 and sorted(again.failed) == failed
