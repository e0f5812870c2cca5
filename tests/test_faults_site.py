"""Fault tests for the site folder (README: `build`): real `reportgen build` processes refused,
failing, racing in one project folder, waiting for each other, stopped and killed.

Synchronisation is deterministic: a build is stopped (SIGSTOP) or killed (SIGKILL) once its
private working folder holds the figures of its first step, i.e. in the middle of its work.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote

import pytest
from markupsafe import escape

from reportgen.pages.input_scripts import read_index
from test_training import TINY_TOML, _tiny_data

pytestmark = [pytest.mark.faults, pytest.mark.slow]

QUICK = ("--steps", "last", "--images", "test:0-1", "--analyses", "none")
LONG = ("--steps", "all", "--images", "test:0-3", "--analyses", "none")   # 4 steps x 4 images
ALL_STEPS = ["0-0", "1-2", "1-4", "1-5"]


# ------------------------------------------------------------------ helpers


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A trained tiny model (steps 0-0, 1-2, 1-4, 1-5) and a good site built from it."""
    from reportgen.catalog import Catalog
    from reportgen.commands.build import run_build
    from reportgen.training.trainer import TrainOptions, train

    root = tmp_path_factory.mktemp("faults_site")
    models = root / "models"
    (models / "Tiny").mkdir(parents=True)
    (models / "Tiny" / "params.toml").write_text(TINY_TOML.format(data=_tiny_data(root / "toy.npz")))
    train(Catalog(models).get("Tiny"), TrainOptions(epochs=1))
    assert [str(s) for s in Catalog(models).get("Tiny").steps] == ALL_STEPS
    with contextlib.chdir(root):
        run_build(models_dir=models, models="Tiny", steps="last", images="test:0-1",
                  analyses="none", cache_dir=str(root / "cache"), site_dir="good-site")
    return root


class Build:
    """`python -m reportgen build ...` in `cwd`, its output in files (readable while it runs)."""

    def __init__(self, cwd: Path, name: str, *args: str, models: Path, logs: Path | None = None):
        self.cwd, self.name = cwd, name
        logs = logs or cwd
        env = {k: v for k, v in os.environ.items()
               if k not in ("REPORTGEN_MODELS", "REPORTGEN_CACHE", "REPORTGEN_DEBUG")}
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        self.out_path, self.err_path = logs / f"{name}.out", logs / f"{name}.err"
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "reportgen", "--models-dir", str(models), "build", *args],
                cwd=cwd, stdout=out, stderr=err, env=env)
        self.pid = self.proc.pid

    @property
    def err(self) -> str:
        return self.err_path.read_text()

    @property
    def out(self) -> str:
        return self.out_path.read_text()

    def wait(self, timeout: float = 240) -> int:
        return self.proc.wait(timeout)

    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.startswith("Error:")]

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(30)


def wait_until(predicate, build: Build, what: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if build.proc.poll() is not None:
            pytest.fail(f"{build.name} ended ({build.proc.returncode}) before {what}: {build.err}")
        time.sleep(0.02)
    pytest.fail(f"timed out waiting for {what}")


def mid_build(cwd: Path) -> bool:
    """A build's private working folder holds its first step's figures."""
    return any(cwd.glob(".reportgen/builds/*/mkdocs/docs/artifacts/Tiny/0-0/*"))


def digest(folder: Path) -> dict[str, str]:
    """sha256 of every file under `folder`, by relative path."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def check_complete(site: Path) -> dict:
    """Every file the pages and the per-model indexes reference exists; returns the model's
    index (models/Tiny/index.json)."""
    missing = []
    for html in site.rglob("*.html"):
        if html.name == "404.html":          # absolute links, for a server's root
            continue
        for ref in re.findall(r'(?:src|href)="([^"]*)"', html.read_text("utf-8")):
            path = unquote(ref.split("#")[0].split("?")[0])
            if not path or re.match(r"^[a-z]+:|^//", path):
                continue
            if not (html.parent / path).exists():
                missing.append(f"{html.relative_to(site)} -> {ref}")
    index = read_index(site / "models" / "Tiny")
    refs = set(re.findall(r'"((?:artifacts|models)/[^"]+\.(?:png|svg|json|csv|js))"',
                          json.dumps(index)))
    missing += [ref for ref in sorted(refs) if not (site / unquote(ref)).is_file()]
    assert refs and not missing, missing[:10]
    return index


def inputs_of(site: Path) -> set[str]:
    return {p.name for p in (site / "artifacts" / "Tiny" / "inputs").iterdir()}


def steps_of(index: dict) -> list[str]:
    return index["step_names"]


def no_leftovers(cwd: Path, site_name: str = "site") -> None:
    beside = sorted(p.name for p in cwd.iterdir() if p.name.startswith(f".{site_name}."))
    assert beside == [], beside
    builds = cwd / ".reportgen" / "builds"
    assert not builds.exists() or not list(builds.iterdir()), list(builds.iterdir())


# ------------------------------------------------------------------ quick failures, in parallel


@pytest.fixture(scope="module")
def quick_runs(project, tmp_path_factory):
    """Builds that must fail before (or without) touching anything, started together: each
    with its folders' digests before and after."""
    root = tmp_path_factory.mktemp("quick")
    logs = tmp_path_factory.mktemp("quick_logs")
    models = project / "models"
    broken_one = root / "broken_one"
    shutil.copytree(models, broken_one)
    (broken_one / "Tiny" / "1-2.weights.h5").write_bytes(b"not hdf5")
    notes = root / "notes"
    (notes / "drafts").mkdir(parents=True)
    (notes / "todo.txt").write_text("buy milk\n")
    (notes / "drafts" / "paper.md").write_text("# Capsules\n")
    for name in ("bad-image", "no-model", "partial"):
        shutil.copytree(project / "good-site", root / name / "site")
    runs = {
        "notes": (root, ("--site-dir", "notes", *QUICK), models, notes),
        "models": (root, ("--site-dir", str(models), *QUICK), models, models),
        "bad-image": (root / "bad-image", ("--image", "typo.png", *QUICK), models, None),
        "no-model": (root / "no-model", ("--models", "Tyni*", *QUICK), models, None),
        "partial": (root / "partial", ("--steps", "all", "--images", "test:0-1",
                                       "--analyses", "none"), broken_one, None),
    }
    def state(folder: Path):
        """The folder's files and what lies beside it (reportgen's own working folder aside)."""
        return digest(folder), sorted(p.name for p in folder.parent.iterdir()
                                      if p.name != ".reportgen")

    before, builds = {}, {}
    for name, (cwd, args, models_dir, folder) in runs.items():
        before[name] = state(folder or cwd / "site")
        builds[name] = Build(cwd, name, *args, models=models_dir, logs=logs)
    try:
        for build in builds.values():
            build.wait()
    finally:
        for build in builds.values():
            build.kill()
    after = {name: state(folder or cwd / "site") for name, (cwd, _, _, folder) in runs.items()}
    return {name: (builds[name], before[name], after[name], runs[name][0]) for name in runs}


@pytest.mark.parametrize("name, folder", [("notes", "notes"), ("models", "models")])
def test_a_user_folder_or_the_models_folder_is_refused_untouched(quick_runs, name, folder):
    build, before, after, _ = quick_runs[name]
    assert build.proc.returncode == 2
    assert len(build.err.splitlines()) == 1, build.err       # one line, no traceback
    line = build.error_lines()[0]
    assert line.startswith("Error: Refusing to write the site into '") and folder in line
    assert "Fix: choose another --site-dir" in line
    assert before == after                      # every file byte for byte, nothing beside it
    assert "computed" not in build.out          # refused before any model work


@pytest.mark.parametrize("name, message", [
    ("bad-image", "Image file 'typo.png' does not exist"),
    ("no-model", "No model matches 'Tyni*'"),
])
def test_a_failed_build_keeps_the_previous_site_byte_for_byte(quick_runs, name, message):
    build, before, after, cwd = quick_runs[name]
    assert build.proc.returncode == 2, build.err
    errors = build.error_lines()
    assert len(errors) == 1 and message in errors[0], build.err
    assert before == after
    no_leftovers(cwd)


def test_a_partial_failure_builds_the_rest_and_shows_it_on_home(quick_runs):
    build, before, after, cwd = quick_runs["partial"]
    assert build.proc.returncode == 1, build.err
    assert "FAILED: Tiny step 1-2: " in build.out and "1-2.weights.h5" in build.out
    site = cwd / "site"
    index = check_complete(site)
    assert steps_of(index) == ["0-0", "1-4", "1-5"]
    home = (site / "index.html").read_text("utf-8")
    reason = build.out.split("FAILED: Tiny step 1-2: ", 1)[1].splitlines()[0]
    assert "Failed in this build" in home and "<b>Tiny step 1-2</b>" in home
    assert "1-2.weights.h5" in reason and str(escape(reason)) in home     # the whole line
    assert before != after
    no_leftovers(cwd)


# ------------------------------------------------------------------ races


def test_concurrent_builds_in_one_project_folder_keep_to_their_own_files(project, tmp_path):
    models = project / "models"
    long = Build(tmp_path, "long", "--site-dir", "site-a", "--cache-dir", "cache-a", *LONG,
                 models=models)
    try:
        wait_until(lambda: mid_build(tmp_path), long, "the long build's first figures")
        os.kill(long.pid, signal.SIGSTOP)            # the short build runs in the middle of it
        own = list(tmp_path.glob(".reportgen/builds/*/mkdocs"))
        short = Build(tmp_path, "short", "--site-dir", "site-b", "--cache-dir", "cache-b",
                      "--steps", "last", "--images", "test:5", "--analyses", "none",
                      models=models)
        assert short.wait() == 0, short.err
        assert all(folder.is_dir() for folder in own)   # the stopped build's folder survived
        os.kill(long.pid, signal.SIGCONT)
        assert long.wait() == 0, long.err
    finally:
        long.kill()
    index_a = check_complete(tmp_path / "site-a")
    index_b = check_complete(tmp_path / "site-b")
    assert inputs_of(tmp_path / "site-a") == {f"test-{i}.png" for i in range(4)}
    assert inputs_of(tmp_path / "site-b") == {"test-5.png"}
    assert steps_of(index_a) == ALL_STEPS and steps_of(index_b) == ["1-5"]
    # site-b holds its own step only (besides the inputs and the model's training curves)
    names = {p.name for p in (tmp_path / "site-b" / "artifacts" / "Tiny").iterdir()}
    assert "1-5" in names and names - {"1-5"} <= {"inputs", "overview"}, names
    assert {p.name for p in (tmp_path / "site-b" / "artifacts" / "Tiny" / "overview").iterdir()
            } <= {"training_curves.png", "training_curves.svg", "training_curves.pdf",
                  "training_curves.csv"}
    no_leftovers(tmp_path, "site-a")
    no_leftovers(tmp_path, "site-b")


def test_a_second_build_of_the_same_site_waits_or_with_no_wait_refuses(project, tmp_path):
    models = project / "models"
    lock = tmp_path / ".site.reportgen-lock"
    holder = Build(tmp_path, "holder", "--site-dir", "site", *QUICK, models=models)
    try:
        wait_until(lambda: lock.is_file() and lock.read_text().split()[:1] == [str(holder.pid)],
                   holder, "the first build's lock")
        os.kill(holder.pid, signal.SIGSTOP)
        refused = Build(tmp_path, "refused", "--site-dir", "site", "--no-wait", *QUICK,
                        models=models)
        waiter = Build(tmp_path, "waiter", "--site-dir", "site", "--steps", "last",
                       "--images", "test:7", "--analyses", "none", models=models)
        assert refused.wait() == 2
        assert refused.err.strip() == (f"Error: Another build is writing site/ (pid {holder.pid})."
                                       " Fix: wait for it to finish, leave out --no-wait to wait "
                                       "for it, or choose another --site-dir.")
        wait_until(lambda: f"waiting for another build of site/ (pid {holder.pid}) ..."
                   in waiter.err, waiter, "the waiting message")
        assert not (tmp_path / "site").exists()       # nobody wrote while the holder held it
        os.kill(holder.pid, signal.SIGCONT)
        assert holder.wait() == 0, holder.err
        assert waiter.wait() == 0, waiter.err
    finally:
        holder.kill()
    index = check_complete(tmp_path / "site")        # the waiter's site, built after the holder's
    assert inputs_of(tmp_path / "site") == {"test-7.png"} and steps_of(index) == ["1-5"]
    no_leftovers(tmp_path)


def test_kill_9_mid_build_keeps_the_old_site_and_the_next_build_cleans_up(project, tmp_path):
    models = project / "models"
    shutil.copytree(project / "good-site", tmp_path / "site")
    before = digest(tmp_path / "site")
    killed = Build(tmp_path, "killed", "--site-dir", "site", *LONG, models=models)
    try:
        wait_until(lambda: mid_build(tmp_path), killed, "the build's first figures")
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
    finally:
        killed.kill()
    assert digest(tmp_path / "site") == before
    assert list((tmp_path / ".reportgen" / "builds").iterdir())   # what the kill left behind
    again = Build(tmp_path, "again", "--site-dir", "site", *LONG, models=models)
    assert again.wait() == 0, again.err
    index = check_complete(tmp_path / "site")
    assert inputs_of(tmp_path / "site") == {f"test-{i}.png" for i in range(4)}
    assert steps_of(index) == ALL_STEPS
    no_leftovers(tmp_path)
