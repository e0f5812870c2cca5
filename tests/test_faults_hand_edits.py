"""Hand-edited or damaged files of one model, against a real `reportgen build` of several: the
model with the bad history.json, params.toml value or weights file fails alone, in one line
naming the file and the value; the others build (exit 1, as for any partial failure)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from trained_tiny import copy_trained_tiny

pytestmark = [pytest.mark.faults, pytest.mark.slow]

# model -> (how its folder is damaged, words its FAILED line must hold)
DAMAGE = {
    "RunFacts": ("history", lambda h: h["training"].update(training_images="many"),
                 "'training_images' is a string \"many\", expected a whole number"),
    "Accuracy": ("history", lambda h: h["records"][-1].update(val_accuracy="0.9"),
                 "record 3 (step 1-5): 'val_accuracy' is a string \"0.9\""),
    "Seconds": ("history", lambda h: h["records"][1].update(seconds=[3]),
                "'seconds' is an array [3], expected a finite number >= 0 or null"),
    "Params": ("params", lambda text: text.replace("dims = 4\n", "dims = \"4\"\n", 1),
               "Invalid model parameter 'primary.dims'"),
    "Weights": ("weights", None, "1-5.weights.h5: Is a directory"),
}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """models/Good and one copy of it per kind of damage, all trained once."""
    root = tmp_path_factory.mktemp("hand-edits")
    good = copy_trained_tiny(tmp_path_factory, root / "models" / "Good")
    for name, (kind, edit, _) in DAMAGE.items():
        folder = root / "models" / name
        shutil.copytree(good, folder)
        if kind == "history":
            history = json.loads((folder / "history.json").read_text())
            edit(history)
            (folder / "history.json").write_text(json.dumps(history))
        elif kind == "params":
            (folder / "params.toml").write_text(edit((folder / "params.toml").read_text()))
        else:
            (folder / "1-5.weights.h5").unlink()
            (folder / "1-5.weights.h5").mkdir()
    return root


def test_each_damaged_model_fails_alone_and_the_others_build(project):
    site = project / "site"
    result = subprocess.run(
        [sys.executable, "-m", "reportgen", "build", "--steps", "last", "--images", "test:0-1",
         "--analyses", "none", "--technique", "predictions", "--site-dir", str(site)],
        cwd=project, env={**os.environ, "REPORTGEN_MODELS": str(project / "models")},
        capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output and "Error:" not in output, output
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED: ")]
    assert len(failed) == len(DAMAGE), failed
    for name, (_, _, words) in DAMAGE.items():
        line = next(line for line in failed if line.startswith(f"FAILED: {name}"))
        assert words in line and f"{name}/" in line, line
    assert (site / "models" / "Good").is_dir()                   # the good model was built
    home = (site / "index.html").read_text(encoding="utf-8")
    assert all(name in home for name in DAMAGE)                   # each failure listed on Home
