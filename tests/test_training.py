"""Trainer: loss goes down, steps and history are consistent, resume (optimizer state, same
numbers as an uninterrupted run), recovery after an interruption, damaged files."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from history_values import approx_or_none
from reportgen.catalog import Catalog
from reportgen.errors import ReportgenError
from reportgen.model_folder import ModelFolder
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


@pytest.mark.slow
def test_training_lowers_loss_and_names_steps(models_dir):
    history = _train(models_dir, epochs=3)
    # 48 training images, batch 10 -> 5 batches an epoch; saves at 2, 4 and the epoch's end
    expected = ["0-0"] + [f"{e}-{b}" for e in (1, 2, 3) for b in (2, 4, 5)]
    assert [r["step"] for r in history] == expected
    assert [str(s) for s in list_steps(models_dir / "Tiny")] == expected
    doc = json.loads((models_dir / "Tiny" / "history.json").read_text())
    assert doc["records"] == history
    # the run's facts, as the model's overview shows them (reportgen/training/run_info.py)
    from reportgen.training.run_info import training_run

    assert doc["training"] == {"data": str(models_dir.parent / "toy.npz"),
                               "dataset": doc["dataset"], "training_images": 48, "limit": None,
                               "epochs": 3, "batch_size": 10, "learning_rate": 0.01,
                               "save_every": 2, "seed": 0, "until_accuracy": None,
                               "held_out": "one split per data set", "optimizer": "adam",
                               "momentum": None, "weight_decay": 0.0}
    walls = [r["wall_seconds"] for r in history]
    assert walls == sorted(walls) and walls[-1] > 0
    facts = training_run(ModelFolder.at(models_dir / "Tiny"))
    assert facts["epochs_trained"] == 3 and facts["wall_seconds"] == walls[-1]
    assert facts["training_images"] == 48 and facts["learning_rate"] == 0.01
    assert history[-1]["loss"] < history[1]["loss"]
    assert history[-1]["val_accuracy"] >= history[0]["val_accuracy"]
    for key in ("margin_loss", "reconstruction_loss", "val_accuracy", "train_accuracy"):
        assert all(r[key] is not None for r in history[1:])
    # no temporary files are left behind
    assert not [p for p in (models_dir / "Tiny").iterdir() if p.name.startswith(".tmp")]


def _interrupt_after(monkeypatch, step: str) -> None:
    """Make the trainer stop with Ctrl-C right after it saved `step` (as a user would)."""
    from reportgen.training import trainer

    commit = trainer.commit_step

    def commit_then_stop(model_dir, saved, *args, **kwargs):
        commit(model_dir, saved, *args, **kwargs)
        if str(saved) == step:
            raise KeyboardInterrupt

    monkeypatch.setattr(trainer, "commit_step", commit_then_stop)


def _weights_arrays(path: Path) -> dict[str, np.ndarray]:
    import h5py

    arrays = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: arrays.__setitem__(name, obj[()])
                     if isinstance(obj, h5py.Dataset) else None)
    return arrays


@pytest.mark.slow
def test_resume_restores_the_saved_optimizer_state(models_dir, monkeypatch):
    from reportgen.training.trainer import TrainOptions, open_run

    _interrupt_after(monkeypatch, "1-4")
    with pytest.raises(KeyboardInterrupt):
        _train(models_dir, epochs=1)
    monkeypatch.undo()
    tiny = models_dir / "Tiny"
    with np.load(tiny / "train_state.npz") as state:
        assert str(state["step"]) == "1-4"
        saved = [state[f"opt_{i}"] for i in range(sum(k.startswith("opt_") for k in state.files))]
    run = open_run(Catalog(models_dir).get("Tiny"), TrainOptions(epochs=1, resume=True))
    variables = {v.path: np.asarray(v) for v in run.optimizer.variables}
    assert len(variables) == len(saved) > 2
    for (path, value), array in zip(variables.items(), saved):
        np.testing.assert_array_equal(value, array, err_msg=path)
    (iteration,) = [v for p, v in variables.items() if p.endswith("/iteration")]
    assert iteration == 4                                    # 4 batches, not a fresh optimizer
    moments = [v for p, v in variables.items() if p.endswith(("_momentum", "_velocity"))]
    assert moments and all(np.any(m != 0) for m in moments)
    assert run.start == Step(1, 4) and [r["step"] for r in run.history] == ["0-0", "1-2", "1-4"]


@pytest.mark.slow
def test_resumed_run_computes_the_same_steps_as_an_uninterrupted_one(tmp_path, monkeypatch):
    """Same seed and data order: interrupted mid-epoch and resumed == never interrupted."""
    data = _tiny_data(tmp_path / "toy.npz")
    for name in ("Straight", "Resumed"):
        (tmp_path / "models" / name).mkdir(parents=True)
        (tmp_path / "models" / name / "params.toml").write_text(TINY_TOML.format(data=data))
    catalog = Catalog(tmp_path / "models")
    from reportgen.training.trainer import TrainOptions, train

    straight = train(catalog.get("Straight"), TrainOptions(epochs=2))
    _interrupt_after(monkeypatch, "1-2")
    with pytest.raises(KeyboardInterrupt):
        train(catalog.get("Resumed"), TrainOptions(epochs=2))
    monkeypatch.undo()
    resumed = train(catalog.get("Resumed"), TrainOptions(epochs=2, resume=True))
    assert [r["step"] for r in resumed] == [r["step"] for r in straight]
    for a, b in zip(resumed, straight):
        for key in ("loss", "margin_loss", "reconstruction_loss", "train_accuracy",
                    "val_accuracy"):
            assert a[key] == approx_or_none(b[key]), (a["step"], key)
    for step in ("1-4", "2-5"):  # the first step after the resume, and the last
        got = _weights_arrays(tmp_path / "models" / "Resumed" / f"{step}.weights.h5")
        want = _weights_arrays(tmp_path / "models" / "Straight" / f"{step}.weights.h5")
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-7)


@pytest.mark.slow
def test_resume_says_the_learning_rate_changed_only_when_the_user_changed_it(models_dir,
                                                                           capsys):
    """A decayed run resumed as it was trained says nothing about its rate (the optimizer's
    rate at the saved step is the decayed one); --learning-rate on resume is said."""
    from reportgen.training.trainer import TrainOptions, open_run

    params = models_dir / "Tiny" / "params.toml"
    params.write_text(params.read_text().replace("[training]",
                                                 "[training]\nlearning_rate_decay = 0.1"))
    _train(models_dir, epochs=1)
    capsys.readouterr()
    entry = Catalog(models_dir).get("Tiny")
    open_run(entry, TrainOptions(epochs=2, resume=True))
    assert "Learning rate changed" not in capsys.readouterr().err
    run = open_run(entry, TrainOptions(epochs=2, resume=True, learning_rate=1e-4))
    assert "Learning rate changed from 0.01 to 0.0001." in capsys.readouterr().err
    assert float(np.asarray(run.optimizer.learning_rate)) == np.float32(1e-4)


@pytest.mark.slow
def test_resume_after_weights_removed_by_hand_says_the_optimizer_is_fresh(models_dir, capsys):
    _train(models_dir, epochs=1)
    tiny = models_dir / "Tiny"
    for name in ("1-4", "1-5"):  # the newest steps deleted by hand: the state is 1-5's
        (tiny / f"{name}.weights.h5").unlink()
    capsys.readouterr()
    history = _train(models_dir, epochs=2, resume=True)
    assert "belongs to step 1-5, whose weights file is gone" in capsys.readouterr().err
    expected = ["0-0", "1-2", "1-4", "1-5", "2-2", "2-4", "2-5"]
    assert [r["step"] for r in history] == expected
    assert [str(s) for s in list_steps(tiny)] == expected
    assert _records(tiny) == history


def _records(folder: Path) -> list[dict]:
    return json.loads((folder / "history.json").read_text())["records"]


@pytest.mark.slow
def test_recovery_completes_a_committed_step_and_deletes_only_its_temporaries(models_dir):
    """The folder as a kill leaves it after step 1-5's commit (train_state.npz names 1-5; its
    weights still pending, history.json one record short), with leftovers of killed writes and
    files of the user's that only look temporary."""
    from reportgen.training.run_state import recover

    _train(models_dir, epochs=1)
    tiny = models_dir / "Tiny"
    complete = _records(tiny)
    weights = (tiny / "1-5.weights.h5").read_bytes()
    (tiny / "1-5.weights.h5").rename(tiny / ".tmp-step-1-5.weights.h5")
    (tiny / "history.json").write_text(json.dumps({"records": complete[:-1]}))
    ours = [".tmp-ab_12xyz.npz", ".tmp-k3j9v0qq.json", ".tmp-zz000000.weights.h5",
            ".tmp-step-2-1.weights.h5"]
    theirs = ["notes.txt", ".tmp-notes.txt", ".tmp-ab12.npz", ".tmpab_12xyz.npz", "x.npz"]
    for name in ours + theirs:
        (tiny / name).write_bytes(b"half written")
    committed, notices = recover(ModelFolder.at(tiny))
    assert str(committed.step) == "1-5"
    assert (tiny / "1-5.weights.h5").read_bytes() == weights
    assert _records(tiny) == complete
    assert any("Completed step 1-5" in n for n in notices)
    left = {p.name for p in tiny.iterdir()}
    assert not left & set(ours)
    assert set(theirs) <= left
    assert all((tiny / name).read_bytes() == b"half written" for name in theirs)
    # idempotent: a second start finds nothing to do
    assert recover(ModelFolder.at(tiny))[1] == []


@pytest.mark.slow
def test_weights_without_a_history_record_are_archived_not_trained_over(models_dir, capsys):
    """An older reportgen wrote the weights before the state: a kill could leave a weights file
    with no record. --resume moves it aside (never deletes it) and recomputes the step."""
    _train(models_dir, epochs=1)
    tiny = models_dir / "Tiny"
    stray = (tiny / "1-4.weights.h5").read_bytes()
    (tiny / "2-2.weights.h5").write_bytes(stray)
    capsys.readouterr()
    history = _train(models_dir, epochs=2, resume=True)
    assert "Moved 1 weights file(s) without a history record (2-2)" in capsys.readouterr().err
    (archived,) = (tiny / "archive").iterdir()
    assert archived.name.endswith("-uncommitted")
    assert (archived / "2-2.weights.h5").read_bytes() == stray
    assert [str(s) for s in list_steps(tiny)] == [r["step"] for r in history]
    assert (tiny / "2-2.weights.h5").read_bytes() != stray


@pytest.mark.slow
def test_damaged_state_history_or_weights_stop_with_one_line(models_dir):
    _train(models_dir, epochs=1)
    tiny = models_dir / "Tiny"
    originals = {name: (tiny / name).read_bytes()
                 for name in ("train_state.npz", "history.json", "1-5.weights.h5")}

    def error_for(name: str, damaged: bytes) -> str:
        (tiny / name).write_bytes(damaged)
        try:
            with pytest.raises(ReportgenError) as err:
                _train(models_dir, epochs=2, resume=True)
        finally:
            (tiny / name).write_bytes(originals[name])
        message = err.value.message
        assert "\n" not in message and str(tiny / name) in message and "Fix: " in message
        return message

    assert "Fix: Delete" in error_for("train_state.npz", originals["train_state.npz"][:200])
    message = error_for("history.json", b'{"records": [{"step": "0-')
    assert "rewrites it from train_state.npz" in message
    message = error_for("1-5.weights.h5", originals["1-5.weights.h5"][:4000])
    assert "unreadable" in message and "--resume" in message
    # history.json deleted as the fix says: rebuilt from the state, and the run continues
    (tiny / "history.json").unlink()
    history = _train(models_dir, epochs=2, resume=True)
    assert history[:4] == json.loads(originals["history.json"])["records"]
    assert history[-1]["step"] == "2-5"


@pytest.mark.slow
def test_resume_keeps_the_runs_data_order(models_dir):
    _train(models_dir, epochs=1, seed=3)
    with pytest.raises(ReportgenError, match="--batch-size differs") as err:
        _train(models_dir, epochs=2, resume=True, batch_size=7)
    assert "Expected --batch-size 10" in err.value.message
    with pytest.raises(ReportgenError, match="--seed differs"):
        _train(models_dir, epochs=2, resume=True, seed=0)
    history = _train(models_dir, epochs=2, resume=True)        # the run's own seed: 3
    assert history[-1]["step"] == "2-5"
    with np.load(models_dir / "Tiny" / "train_state.npz") as state:
        assert json.loads(str(state["settings"]))["seed"] == 3


def test_one_training_per_model_at_a_time(models_dir):
    from reportgen.training.run_state import training_lock

    with training_lock(ModelFolder.at(models_dir / "Tiny")):
        with pytest.raises(ReportgenError, match="Another `reportgen train Tiny` is running"):
            _train(models_dir, epochs=1)


@pytest.mark.slow
def test_existing_run_is_never_overwritten_silently(models_dir):
    _train(models_dir, epochs=1)
    with pytest.raises(ReportgenError, match="--resume"):
        _train(models_dir, epochs=1)
    tiny = models_dir / "Tiny"
    (tiny / "notes.txt").write_text("mine")
    (tiny / ".tmp-x1y2z3w4.npz").write_bytes(b"left by a killed write")
    before = {p.name: p.read_bytes() for p in tiny.iterdir() if p.name.endswith((".h5", ".json",
                                                                                   "state.npz"))}
    _train(models_dir, epochs=1, fresh=True)
    archived = list((tiny / "archive").iterdir())
    assert len(archived) == 1
    assert {p.name: p.read_bytes() for p in archived[0].iterdir()} == before
    assert (tiny / "notes.txt").read_text() == "mine"
    assert not (tiny / ".tmp-x1y2z3w4.npz").exists()


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


@pytest.mark.slow
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


def test_training_run_of_an_older_run_reads_what_it_left(tmp_path):
    """A run of an older reportgen: no "training" section in history.json; the settings of
    train_state.npz, the history's data set and batch size; the rest is None (the overview
    says "not recorded"). A damaged state only loses what it held."""
    from reportgen.training.run_info import FIELDS, training_run

    folder = tmp_path / "Old"
    folder.mkdir()
    (folder / "params.toml").write_text(TINY_TOML.format(data="toy.npz"))
    records = [{"step": "0-0", "epoch": 0, "batch": 0, "seconds": 0.1},
               {"step": "2-5", "epoch": 2, "batch": 5, "seconds": 9.5}]
    (folder / "history.json").write_text(json.dumps(
        {"model": "Old", "dataset": "toy data", "batch_size": 10, "records": records}))
    settings = {"data": "toy.npz", "seed": 3, "batch_size": 10, "limit": 40,
                "learning_rate": 0.002, "save_every": 5}
    np.savez(folder / "train_state.npz", step=np.array("2-5"), format=np.array(2),
             settings=np.array(json.dumps(settings)), history=np.array("{}"))
    entry = ModelFolder.at(folder)
    facts = training_run(entry)
    assert set(facts) == set(FIELDS)
    assert facts == {"data": "toy.npz", "dataset": "toy data", "training_images": None,
                     "limit": 40, "epochs": None, "epochs_trained": 2, "batch_size": 10,
                     "learning_rate": 0.002, "save_every": 5, "seed": 3, "wall_seconds": None,
                     "until_accuracy": None, "held_out": None, "optimizer": None,
                     "momentum": None, "weight_decay": None}
    (folder / "train_state.npz").write_bytes(b"PK\x03\x04 damaged")
    facts = training_run(entry)
    assert facts["learning_rate"] is None and facts["batch_size"] == 10
