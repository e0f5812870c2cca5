"""Trainer: loss goes down, steps and history are consistent, resume, interruption, bad weights."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from reportgen.catalog import Catalog
from reportgen.errors import ReportgenError
from reportgen.training.checkpoints import Step, list_steps, load_weights, save_weights

TINY_TOML = """
dataset = "{data}"
input_shape = [12, 12, 1]
num_classes = 3
[[conv]]
filters = 8
kernel_size = 3
[primary]
types = 4
dims = 4
kernel_size = 3
strides = 2
[class_caps]
dims = 4
[decoder]
units = [16]
[training]
epochs = 1
batch_size = 10
save_every = 2
learning_rate = 0.01
"""


def _tiny_data(path: Path, n: int = 60, seed: int = 0) -> Path:
    """Learnable toy data: class k has a bright horizontal bar in band k, plus noise."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    x = rng.uniform(0, 0.2, size=(n, 12, 12)).astype(np.float32)
    for k in range(3):
        x[y == k, 2 + 3 * k:4 + 3 * k, 1:11] = 1.0
    np.savez(path, x=x, y=y)
    return path


@pytest.fixture
def models_dir(tmp_path):
    data = _tiny_data(tmp_path / "toy.npz")
    root = tmp_path / "models"
    (root / "Tiny").mkdir(parents=True)
    (root / "Tiny" / "params.toml").write_text(TINY_TOML.format(data=data))
    return root


def _train(models_dir, **kw):
    from reportgen.training.trainer import TrainOptions, train

    return train(Catalog(models_dir).get("Tiny"), TrainOptions(**kw))


def test_training_lowers_loss_and_names_steps(models_dir):
    history = _train(models_dir, epochs=3)
    # 48 training images, batch 10 -> 5 batches an epoch; saves at 2, 4 and the epoch's end
    expected = ["0-0"] + [f"{e}-{b}" for e in (1, 2, 3) for b in (2, 4, 5)]
    assert [r["step"] for r in history] == expected
    assert [str(s) for s in list_steps(models_dir / "Tiny")] == expected
    on_disk = json.loads((models_dir / "Tiny" / "history.json").read_text())["records"]
    assert on_disk == history
    assert history[-1]["loss"] < history[1]["loss"]
    assert history[-1]["val_accuracy"] >= history[0]["val_accuracy"]
    for key in ("margin_loss", "reconstruction_loss", "val_accuracy", "train_accuracy"):
        assert all(r[key] is not None for r in history[1:])
    # no temporary files are left behind
    assert not [p for p in (models_dir / "Tiny").iterdir() if p.name.startswith(".tmp")]


def test_resume_after_kill_continues_mid_epoch(models_dir):
    _train(models_dir, epochs=1)
    tiny = models_dir / "Tiny"
    # simulate a run killed after step 1-2: later files never got written
    for name in ("1-4", "1-5"):
        (tiny / f"{name}.weights.h5").unlink()
    history = _train(models_dir, epochs=2, resume=True)
    expected = ["0-0", "1-2", "1-4", "1-5", "2-2", "2-4", "2-5"]
    assert [r["step"] for r in history] == expected
    assert [str(s) for s in list_steps(tiny)] == expected


def test_existing_run_is_never_overwritten_silently(models_dir):
    _train(models_dir, epochs=1)
    with pytest.raises(ReportgenError, match="--resume"):
        _train(models_dir, epochs=1)
    _train(models_dir, epochs=1, fresh=True)
    archived = list((models_dir / "Tiny" / "archive").iterdir())
    assert len(archived) == 1 and (archived[0] / "1-5.weights.h5").is_file()


def test_save_load_round_trip_gives_identical_outputs(models_dir, tmp_path):
    from reportgen.capsnet.architecture import build_capsnet

    entry = Catalog(models_dir).get("Tiny")
    net = build_capsnet(entry.params)
    images = np.random.default_rng(1).uniform(size=(4, 12, 12, 1)).astype(np.float32)
    before = net.model(images)
    save_weights(net, tmp_path / "w.weights.h5")
    other = build_capsnet(entry.params)  # fresh random weights
    load_weights(other, tmp_path / "w.weights.h5")
    after = other.model(images)
    for key in before:
        np.testing.assert_array_equal(np.asarray(before[key]), np.asarray(after[key]))


def test_bad_weights_files_name_themselves(models_dir, tmp_path):
    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.settings.model_params import parse_model_params

    entry = Catalog(models_dir).get("Tiny")
    net = build_capsnet(entry.params)
    with pytest.raises(ReportgenError, match="not found") as err:
        load_weights(net, tmp_path / "missing.weights.h5")
    assert "missing.weights.h5" in err.value.message

    good = tmp_path / "good.weights.h5"
    save_weights(net, good)
    truncated = tmp_path / "cut.weights.h5"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(ReportgenError, match="unreadable") as err:
        load_weights(net, truncated)
    assert str(truncated) in err.value.message

    raw = {"dataset": "mnist", "input_shape": [12, 12, 1], "num_classes": 3,
           "conv": [{"filters": 6, "kernel_size": 3}],
           "primary": {"types": 4, "dims": 4, "kernel_size": 3, "strides": 2},
           "class_caps": {"dims": 4}, "decoder": {"units": [16]}}
    other = build_capsnet(parse_model_params(raw))
    with pytest.raises(ReportgenError, match="does not fit") as err:
        load_weights(other, good)
    assert str(good) in err.value.message


def test_step_names_round_trip_and_sort():
    steps = [Step.parse(s) for s in ["10-5", "2-100", "0-0", "2-20"]]
    assert [str(s) for s in sorted(steps)] == ["0-0", "2-20", "2-100", "10-5"]
    with pytest.raises(ReportgenError, match="EPOCH-BATCH"):
        Step.parse("3_100")


def test_sigint_leaves_only_complete_files_and_resume_works(models_dir):
    """A real `reportgen train` process interrupted with Ctrl-C (SIGINT), then --resume."""
    env = {**os.environ, "REPORTGEN_MODELS": str(models_dir)}
    cmd = [sys.executable, "-m", "reportgen.cli", "train", "Tiny", "--epochs", "200"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    tiny = models_dir / "Tiny"
    deadline = time.time() + 120
    while time.time() < deadline and len(list_steps(tiny)) < 4:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    assert "--resume" in err.decode()
    assert not [p for p in tiny.iterdir() if p.name.startswith(".tmp")]
    steps = list_steps(tiny)
    records = json.loads((tiny / "history.json").read_text())["records"]
    assert [r["step"] for r in records][: len(steps)] == [str(s) for s in steps][: len(records)]
    from reportgen.capsnet.architecture import build_capsnet

    net = build_capsnet(Catalog(models_dir).get("Tiny").params)
    for step in steps:  # every file left behind is complete
        load_weights(net, tiny / step.filename)
    last = steps[-1]
    history = _train(models_dir, epochs=last.epoch + 1, resume=True)
    assert history[-1]["step"] == f"{last.epoch + 1}-5"
