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
    from reportgen.engine.model import ModelHandle
    from reportgen.engine.step import plan
    from reportgen.settings.model_params import parse_model_params
    from reportgen.techniques import all_techniques

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
    default = [t for t in all_techniques() if not t.experimental]
    chosen = plan(default, ModelHandle(parse_model_params({**TINY, "dataset": "mnist"})))
    shown = {p["technique"] for p in index["panels"] + index["dataset_panels"]}
    assert shown == {t.name for t, _ in chosen.variants}
    assert "self_attention_coupling" in shown          # the package's own technique
    # the rest say why not, in one plain clause: the 1x1 grid is no map
    assert set(index["not_applicable"]) == {t.name for t, _ in chosen.not_applicable}
    assert "capsule grid of more than one cell" in index["not_applicable"]["rpv"]
    overview = (tmp_path / "site" / "models" / "Tiny" / "index.html").read_text("utf-8")
    assert "What the analyses of this model leave out" in overview
    assert "Mazzia" in overview and "Sabour, S., Frosst" not in overview
    methods = (tmp_path / "site" / "methods.html").read_text("utf-8")
    assert "Mazzia, V., Salvetti, F. and Chiaberge, M. (2021)" in methods
