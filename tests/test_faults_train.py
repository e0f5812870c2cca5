"""`reportgen train` killed with SIGKILL at chosen moments and resumed: nothing is lost.

One run of the real command (a subprocess) is killed (kill -9) four times, each `--resume`
picking up what the kill before left: right after a weights file appears; while
train_state.npz is being written; after the commit but before history.json and the weights file
are in place; between two epochs. The two mid-write moments last well under a millisecond, so
those runs go through a wrapper that holds the write open (the state's temporary file half
written; the commit done with history.json still a temporary file) and the test kills once the
wrapper says it holds it. After every kill the folder is checked as the kill left it; then a
last `--resume` runs to the end, and the folder must equal an uninterrupted run of the same
command: the same steps, a history record for every weights file, the same weights and optimizer
state (the trainer is deterministic on CPU for a given seed, so a resumed run reproduces the
uninterrupted run's numbers; compared to 1e-6), no temporary file left, nothing else touched.
One run killed four times instead of four runs keeps the module to six TensorFlow start-ups.
"""

from __future__ import annotations

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
from reportgen.training.checkpoints import Step, list_steps
from reportgen.training.run_state import STATE_FILE, is_temporary
from test_training import TINY_TOML

pytestmark = [pytest.mark.faults, pytest.mark.slow]

# the tiny CapsNet of test_training, three epochs with a step saved after every batch
TOML = TINY_TOML.replace("epochs = 1", "epochs = 3").replace("save_every = 2", "save_every = 1")
assert "epochs = 3" in TOML and "save_every = 1" in TOML
# 48 training images (60, 20% held out), batch 10: 5 batches an epoch, a step saved after each
EXPECTED = ["0-0"] + [f"{e}-{b}" for e in (1, 2, 3) for b in range(1, 6)]
TRAIN = ["train", "Tiny"]
TIMEOUT = 120

# Runs `python -m reportgen ...` with one write held open at the chosen moment (argv[1]), after
# touching argv[2] so the test knows it is there. It only wraps reportgen's own functions.
WRAPPER = r"""
import runpy, sys, time
from pathlib import Path
moment, marker, target = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
del sys.argv[1:4]
import reportgen.training.run_state as rs
import reportgen.training.trainer as tr

def hold():
    marker.touch()
    time.sleep(600)

if moment == "state":  # train_state.npz half written to its temporary file
    write_state = rs._write_state
    def _write_state(path, step, *args):
        write_state(path, step, *args)
        if str(step) == target:
            data = Path(path).read_bytes()
            Path(path).write_bytes(data[: len(data) // 2])
            hold()
    rs._write_state = _write_state
elif moment == "history":  # committed; history.json still a temporary file, weights pending
    atomic_path = rs.atomic_path
    write_text = rs.atomic_write_text
    def atomic_write_text(final, text):
        if Path(final).name == "history.json" and f'"step": "{target}"' in text:
            with atomic_path(final) as tmp:
                tmp.write_text(text)
                hold()
        write_text(final, text)
    rs.atomic_write_text = atomic_write_text
elif moment == "epoch":  # between two epochs: the last step of the epoch is saved
    epoch_order = tr._epoch_order
    def _epoch_order(n, seed, epoch):
        if epoch == int(target):
            hold()
        return epoch_order(n, seed, epoch)
    tr._epoch_order = _epoch_order
sys.argv[0] = "reportgen"
runpy.run_module("reportgen", run_name="__main__")
"""


def _toy_data(path: Path, n: int = 60) -> Path:
    """Class k has a bright horizontal bar in band k, plus noise (learnable in a few steps)."""
    rng = np.random.default_rng(0)
    y = np.arange(n) % 3
    x = rng.uniform(0, 0.2, size=(n, 12, 12)).astype(np.float32)
    for k in range(3):
        x[y == k, 2 + 3 * k:4 + 3 * k, 1:11] = 1.0
    np.savez(path, x=x, y=y)
    return path


def _models_dir(root: Path, data: Path) -> Path:
    (root / "models" / "Tiny").mkdir(parents=True)
    (root / "models" / "Tiny" / "params.toml").write_text(TOML.format(data=data))
    return root / "models"


def _env(models: Path) -> dict:
    return {**os.environ, "REPORTGEN_MODELS": str(models), "TF_CPP_MIN_LOG_LEVEL": "3"}


def _run(models: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "reportgen", *TRAIN, *args], env=_env(models),
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def _start(models: Path, *args: str, hold: tuple[str, Path, str] | None = None
           ) -> subprocess.Popen:
    """`reportgen train Tiny ARGS`; with hold=(moment, marker, target), through WRAPPER."""
    cmd = ([sys.executable, "-c", WRAPPER, hold[0], str(hold[1]), hold[2]] if hold
           else [sys.executable, "-m", "reportgen"]) + TRAIN + list(args)
    return subprocess.Popen(cmd, env=_env(models), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _kill_when(proc: subprocess.Popen, path: Path) -> str:
    """SIGKILL `proc` as soon as `path` exists (polled every 2 ms); return its stderr."""
    deadline = time.monotonic() + TIMEOUT
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"train ended before {path.name} appeared: {proc.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{path.name} did not appear in {TIMEOUT} s")
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return err


def _records(folder: Path) -> list[dict]:
    return json.loads((folder / "history.json").read_text())["records"]


def _weights(path: Path) -> dict[str, np.ndarray]:
    import h5py

    arrays = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: arrays.__setitem__(name, obj[()])
                     if isinstance(obj, h5py.Dataset) else None)
    return arrays


def _optimizer(folder: Path) -> dict[str, np.ndarray]:
    with np.load(folder / STATE_FILE, allow_pickle=False) as state:
        return {"step": str(state["step"]),
                **{k: state[k] for k in state.files if k.startswith("opt_")}}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The same command, never interrupted."""
    root = tmp_path_factory.mktemp("reference")
    data = _toy_data(root / "toy.npz")
    models = _models_dir(root, data)
    _run(models)
    return data, models / "Tiny"


def _assert_consistent_now(tiny: Path) -> str:
    """What holds at every instant, also right after a kill and before any recovery: every
    weights file has its history record, and train_state.npz is the newest weights file's step
    or the step it commits, whose weights wait under their pending name. Returns the state's
    step."""
    steps = list_steps(tiny)
    recorded = [r["step"] for r in _records(tiny)]
    assert {str(s) for s in steps} <= set(recorded), (steps, recorded)
    state_step = _optimizer(tiny)["step"]
    if state_step != str(steps[-1]):
        assert Step.parse(state_step) > steps[-1]
        assert (tiny / f".tmp-step-{state_step}.weights.h5").is_file()
    return state_step


def _assert_same_as_reference(tiny: Path, reference: Path) -> None:
    assert sorted(p.name for p in tiny.iterdir() if p.name.startswith(".tmp")) == \
        [".tmp-notes.txt"]                               # the user's file, not reportgen's
    assert [str(s) for s in list_steps(tiny)] == EXPECTED
    records, expected = _records(tiny), _records(reference)
    assert [r["step"] for r in records] == EXPECTED
    for got, want in zip(records, expected):
        for key in ("images_seen", "loss", "margin_loss", "reconstruction_loss",
                    "train_accuracy", "val_accuracy"):
            assert got[key] == approx_or_none(want[key]), (got["step"], key)
    for step in EXPECTED:  # every weights file, saved before or after a kill
        got, want = _weights(tiny / f"{step}.weights.h5"), _weights(reference / f"{step}.weights.h5")
        assert got.keys() == want.keys()
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-7,
                                       err_msg=f"{step} {name}")
    got, want = _optimizer(tiny), _optimizer(reference)
    assert got["step"] == want["step"] == EXPECTED[-1]
    assert got.keys() == want.keys()
    for name in want:  # Adam's iteration count, learning rate, moments and velocities
        if name != "step":
            np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-7,
                                       err_msg=name)


def _next(step: str, ahead: int) -> str:
    return EXPECTED[EXPECTED.index(step) + ahead]


def test_killed_four_times_then_resumed_equals_an_uninterrupted_run(tmp_path, reference):
    data, ref = reference
    models = _models_dir(tmp_path, data)
    tiny = models / "Tiny"
    # files reportgen did not create, one of them named like a temporary file: never touched
    (tiny / "notes.txt").write_text("mine")
    (tiny / ".tmp-notes.txt").write_text("also mine")

    # 1. right after a weights file appears
    _kill_when(_start(models), tiny / "1-2.weights.h5")
    committed = _assert_consistent_now(tiny)
    assert Step.parse(committed) >= Step(1, 2)

    # 2. while the train state is written: its temporary file half written, weights pending
    target = _next(committed, 2)
    err = _kill_when(_start(models, "--resume", hold=("state", tmp_path / "held2", target)),
                     tmp_path / "held2")
    assert f"Resuming Tiny from step {committed}" in err and "fresh optimizer" not in err
    leftovers = {p.name for p in tiny.iterdir() if is_temporary(p.name)}
    assert f".tmp-step-{target}.weights.h5" in leftovers
    assert [n for n in leftovers if n.endswith(".npz")]
    committed = _assert_consistent_now(tiny)
    assert committed == _next(target, -1)                 # the target was never committed
    assert str(list_steps(tiny)[-1]) == committed

    # 3. after the commit (train_state.npz names the step), history.json being written
    target = _next(committed, 2)
    assert Step.parse(target).epoch <= 2
    err = _kill_when(_start(models, "--resume", hold=("history", tmp_path / "held3", target)),
                     tmp_path / "held3")
    assert f"Resuming Tiny from step {committed}" in err and "fresh optimizer" not in err
    assert not [p for p in tiny.iterdir() if p.name.endswith(".npz") and is_temporary(p.name)]
    assert (tiny / f".tmp-step-{target}.weights.h5").is_file()
    assert not (tiny / f"{target}.weights.h5").exists()
    assert _assert_consistent_now(tiny) == target          # committed ...
    assert _records(tiny)[-1]["step"] == _next(target, -1)  # ... but not yet in history.json

    # 4. between epochs 2 and 3; its start completes step `target` from the state
    err = _kill_when(_start(models, "--resume", hold=("epoch", tmp_path / "held4", "3")),
                     tmp_path / "held4")
    assert f"Completed step {target}" in err and f"Resuming Tiny from step {target}" in err
    assert _assert_consistent_now(tiny) == "2-5"
    assert [str(s) for s in list_steps(tiny)] == EXPECTED[:11]
    assert [r["step"] for r in _records(tiny)] == EXPECTED[:11]

    # 5. to the end
    err = _run(models, "--resume").stderr
    assert "Resuming Tiny from step 2-5" in err and "fresh optimizer" not in err
    _assert_same_as_reference(tiny, ref)
    assert (tiny / "notes.txt").read_text() == "mine"
    assert (tiny / ".tmp-notes.txt").read_text() == "also mine"
    assert not (tiny / "archive").exists()
