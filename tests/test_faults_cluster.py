"""Cluster builds under faults, with real processes: a worker killed with -9 in the middle of a
step (its task reruns elsewhere, the site equals the in-process build's), a user error reported
once with its (model, step) and never retried, Ctrl-C cancelling the cluster's work.

Workers note each task they start in REPORTGEN_CLUSTER_HOOK_DIR; with
REPORTGEN_CLUSTER_PAUSE_AFTER=N the first task to store N results writes `paused` (its pid) and
waits there, so a test acts at that moment instead of sleeping (reportgen.cluster.tasks)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cluster_fixture import (BUILD, command, computed, copy_models, env, reference, run,
                             trained_models, tree)
from test_cluster import assert_same_site

pytestmark = [pytest.mark.faults, pytest.mark.slow]


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 300) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file() and path.read_text():
            return path.read_text()
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the build ended before {path.name} appeared:\n{out}{err}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"{path.name} did not appear within {timeout} s")


def _started(hooks: Path) -> list[tuple[int, str]]:
    """(worker pid, 'model step') of every task started, in no particular order."""
    out = []
    for p in hooks.glob("started-*"):
        _, pid, rest = p.name.split("-", 2)
        model_step = rest.rsplit("-", 1)[0]            # Tiny_A-1-5
        model, step = model_step.split("-", 1)
        out.append((int(pid), f"{model} {step}"))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def _paused_build(tmp_path: Path, models: Path, pause_after: int):
    """(hooks folder, work folder, process) of a build on local:2 whose first task to store
    `pause_after` results waits for the test (reportgen.cluster.tasks)."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.Popen(
        command(models, *BUILD, "--scheduler", "local:2", "--cache-dir", "cache"), cwd=work,
        env=env(REPORTGEN_CLUSTER_HOOK_DIR=str(hooks),
                REPORTGEN_CLUSTER_PAUSE_AFTER=str(pause_after)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    return hooks, work, proc


def test_a_worker_killed_mid_step_is_replaced_and_the_site_is_the_same(tmp_path,
                                                                       tmp_path_factory):
    expected, reference_output = reference(tmp_path_factory)
    models = trained_models(tmp_path_factory)
    hooks, work, proc = _paused_build(tmp_path, models, pause_after=2)
    # the worker has stored two results of its step, not all of them
    victim, killed_step = _wait_for(hooks / "paused", proc).split(" ", 1)
    victim = int(victim)
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, out + err
    # what the killed worker stored before it died is kept (whole) and reused by the rerun
    summary = next(x for x in (out + err).splitlines() if x.startswith("computed "))
    assert f"computed {computed(reference_output) - 2} · reused 2 ·" in summary
    assert_same_site(tree(work / "site"), expected)
    # the killed task ran again, in another process
    assert [pid for pid, step in _started(hooks) if step == killed_step and pid != victim]

    from reportgen.cache.store import ArtifactStore

    store = ArtifactStore(work / "cache")
    entries = [p.parent.name for p in (work / "cache" / "arrays").glob("*/*/meta.json")]
    # every result, and each of the four steps' evaluation lengths (not counted as results)
    assert len(entries) == computed(reference_output) + 4
    assert all(store.get_arrays(key) is not None for key in entries)   # each one whole
    assert [p for p in (work / "cache" / "tmp").iterdir() if not p.name.startswith("build")] == []


def test_a_user_error_is_reported_once_with_its_step_and_not_retried(tmp_path,
                                                                     tmp_path_factory):
    models = copy_models(tmp_path_factory, tmp_path / "models")
    last = sorted((models / "Tiny_B").glob("*.weights.h5"),
                  key=lambda p: tuple(int(x) for x in p.name.split(".")[0].split("-")))[-1]
    last.write_bytes(b"not an HDF5 file" * 64)
    step = last.name.split(".")[0]
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    proc = run(tmp_path / "work", models, *BUILD, "--scheduler", "local:2", "--cache-dir",
               f"file://{tmp_path}/store", REPORTGEN_CLUSTER_HOOK_DIR=str(hooks))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out                    # partial failure: the rest was built
    failed = [line for line in out.splitlines() if line.startswith("FAILED:")]
    assert len(failed) == 1 and failed[0].startswith(f"FAILED: Tiny_B step {step}: ")
    assert "is unreadable (truncated or not HDF5)" in failed[0] and "Traceback" not in out
    assert [s for _, s in _started(hooks)].count(f"Tiny_B {step}") == 1    # never retried
    assert (tmp_path / "work" / "site" / "models" / "Tiny_A" / "index.html").is_file()


def test_ctrl_c_cancels_the_cluster_work_and_stops_its_workers(tmp_path, tmp_path_factory):
    models = trained_models(tmp_path_factory)
    hooks, work, proc = _paused_build(tmp_path, models, pause_after=1)
    paused = int(_wait_for(hooks / "paused", proc).split()[0])
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "Interrupted." in err and "Traceback" not in err
    assert not (work / "site").exists()
    workers = {pid for pid, _ in _started(hooks)} | {paused}
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in workers if _alive(pid)]
