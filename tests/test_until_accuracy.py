"""`reportgen train NAME --until-accuracy A`: training stops at the first saved step whose
validation accuracy is at least A (models compared at matched clean accuracy, as Gu 2022), and
the CNN baselines train through the same command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reportgen.catalog import Catalog
from reportgen.errors import ReportgenError

TOML = """
dataset = "{data}"
input_shape = [12, 12, 1]
num_classes = 3
family = "cnn"
[[conv]]
filters = 8
kernel_size = 3
[[conv]]
filters = 8
kernel_size = 3
strides = 2
[cnn]
head = "avg"
[decoder]
enabled = false
[training]
epochs = 3
batch_size = 10
save_every = 2
learning_rate = 0.01
"""


@pytest.fixture
def models_dir(tmp_path):
    """A tiny ConvNet-Avg and learnable toy data (class k: a bright bar in band k)."""
    rng = np.random.default_rng(0)
    y = np.arange(60) % 3
    x = rng.uniform(0, 0.2, size=(60, 12, 12)).astype(np.float32)
    for k in range(3):
        x[y == k, 2 + 3 * k:4 + 3 * k, 1:11] = 1.0
    np.savez(tmp_path / "toy.npz", x=x, y=y)
    root = tmp_path / "models"
    (root / "Tiny").mkdir(parents=True)
    (root / "Tiny" / "params.toml").write_text(TOML.format(data=tmp_path / "toy.npz"))
    return root


def _run(models_dir, *args):
    env = {**os.environ, "REPORTGEN_MODELS": str(models_dir)}
    return subprocess.run([sys.executable, "-m", "reportgen", "train", "Tiny", *args], env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_stops_at_the_first_step_reaching_the_accuracy(models_dir):
    done = _run(models_dir, "--until-accuracy", "0.9")
    assert done.returncode == 0, done.stderr
    document = json.loads((models_dir / "Tiny" / "history.json").read_text())
    records = document["records"]
    # the target is recorded: "Capsules vs CNNs" matches the models at it
    assert document["training"]["until_accuracy"] == 0.9
    accuracies = [r["val_accuracy"] for r in records]
    assert accuracies[-1] >= 0.9 and all(a < 0.9 for a in accuracies[:-1])
    # 48 images, batch 10: 5 batches an epoch, 3 epochs = 9 saves after 0-0 without the option
    assert len(records) < 10
    steps = sorted(p.name for p in (models_dir / "Tiny").glob("*.weights.h5"))
    assert len(steps) == len(records)                 # the stopping step is saved, nothing after
    assert f"at step {records[-1]['step']}: stopping (--until-accuracy)" in done.stderr
    assert f"last step {records[-1]['step']}" in done.stdout


@pytest.mark.parametrize("value", [0.0, 1.5, -0.2])
def test_out_of_range_is_one_line(models_dir, value):
    from reportgen.training.trainer import TrainOptions, train

    with pytest.raises(ReportgenError, match="until-accuracy") as err:
        train(Catalog(models_dir).get("Tiny"), TrainOptions(until_accuracy=value))
    assert "\n" not in err.value.message
    assert not list(Path(models_dir, "Tiny").glob("*.weights.h5"))


@pytest.mark.slow
def test_the_cli_refuses_out_of_range(models_dir):
    done = _run(models_dir, "--until-accuracy", "1.5")
    assert done.returncode == 2 and "until-accuracy" in done.stderr


def test_the_overview_says_the_target_only_when_the_run_had_one():
    from reportgen.pages.views import training_view

    facts = {f["label"]: f["value"] for f in training_view({"until_accuracy": 0.9})}
    assert facts["Trained until"] == "validation accuracy ≥ 90% (--until-accuracy)"
    assert "Trained until" not in {f["label"] for f in training_view({"until_accuracy": None})}
