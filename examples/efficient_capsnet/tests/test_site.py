"""The package as a researcher uses it: a tiny model of the family trained and built by
reportgen's own command line, with every default analysis. Each analysis either runs or the
site says why it does not apply (here: the 1x1 primary grid makes no map), the build reports no
failure, and the pages cite the family's paper and say what its description leaves out."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import TINY, params_toml


def _reportgen(*args, cwd):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([sys.executable, "-m", "reportgen", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=1800)


@pytest.mark.slow
def test_a_tiny_model_trains_and_builds_with_every_default_analysis(tmp_path):
    from reportgen.sdk import parse_model_params
    from reportgen.sdk.testing import default_plan

    folder = tmp_path / "models" / "Tiny"
    folder.mkdir(parents=True)
    (folder / "params.toml").write_text(params_toml(TINY, {
        "epochs": 1, "batch_size": 16, "learning_rate": 0.002, "save_every": 1000}))
    trained = _reportgen("train", "Tiny", "--limit", "320", cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr
    built = _reportgen("build", "--models", "Tiny", "--steps", "last", "--images", "test:0-1",
                       "--eval-images", "20", cwd=tmp_path)
    assert built.returncode == 0, built.stderr + built.stdout
    assert "FAILED" not in built.stdout + built.stderr

    index = json.loads((tmp_path / "site" / "models" / "Tiny" / "index.json").read_text())
    computed, not_applicable = default_plan(parse_model_params({**TINY, "dataset": "mnist"}))
    shown = {p["technique"] for p in index["panels"] + index["dataset_panels"]}
    assert shown == computed
    assert "self_attention_coupling" in shown          # the package's own technique
    # the rest say why not, in one plain clause: the 1x1 grid is no map
    assert set(index["not_applicable"]) == set(not_applicable)
    assert "capsule grid of more than one cell" in index["not_applicable"]["rpv"]
    overview = (tmp_path / "site" / "models" / "Tiny" / "index.html").read_text("utf-8")
    assert "What the analyses of this model leave out" in overview
    assert "Mazzia" in overview and "Sabour, S., Frosst" not in overview
    methods = (tmp_path / "site" / "methods.html").read_text("utf-8")
    assert "Mazzia, V., Salvetti, F. and Chiaberge, M. (2021)" in methods
