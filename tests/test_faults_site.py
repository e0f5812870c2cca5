"""Fault tests for the site folder (README: `build`, "What reportgen guarantees"): real
`reportgen build` processes refused, failing, racing in one project folder, waiting for each
other, stopped and killed; sites holding files reportgen did not write (at any depth, or an
older reportgen's without a file list) refused untouched; a deleted or edited file built again;
the same pages from another cache left alone; a kill between the two renames of the swap
undone by the next build, even a refused one.

Synchronisation is deterministic: a build is stopped (SIGSTOP) or killed (SIGKILL) once its
private working folder holds the figures of its first step, i.e. in the middle of its work, or
(KILLED_BETWEEN_RENAMES) kills itself just before the rename that moves the new site in.
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
from reportgen.pages.site_files import MARKER
from trained_tiny import copy_trained_tiny

pytestmark = [pytest.mark.faults, pytest.mark.slow]

QUICK = ("--steps", "last", "--images", "test:0-1", "--analyses", "none")
# Two steps of two images: a build stopped or killed after its first step's figures still has a
# step to go (more only makes the test longer).
LONG_STEPS = ["0-0", "1-5"]
LONG_INPUTS = {"test-0.png", "test-1.png"}
LONG = ("--steps", ",".join(LONG_STEPS), "--images", "test:0-1", "--analyses", "none")
ALL_STEPS = ["0-0", "1-2", "1-4", "1-5"]


# ------------------------------------------------------------------ helpers


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A trained tiny model (steps 0-0, 1-2, 1-4, 1-5) and a good site built from it."""
    from reportgen.catalog import Catalog
    from reportgen.commands.build import run_build

    root = tmp_path_factory.mktemp("faults_site")
    models = root / "models"
    copy_trained_tiny(tmp_path_factory, models / "Tiny")
    assert [str(s) for s in Catalog(models).get("Tiny").steps] == ALL_STEPS
    with contextlib.chdir(root):
        run_build(models_dir=models, models="Tiny", steps="last", images="test:0-1",
                  analyses="none", cache_dir=str(root / "cache"), site_dir="good-site")
    return root


class Build:
    """`python -m reportgen build ...` in `cwd`, its output in files (readable while it runs)."""

    def __init__(self, cwd: Path, name: str, *args: str, models: Path, logs: Path | None = None,
                 launcher: tuple[str, ...] = ("-m", "reportgen")):
        self.cwd, self.name = cwd, name
        logs = logs or cwd
        env = {k: v for k, v in os.environ.items()
               if k not in ("REPORTGEN_MODELS", "REPORTGEN_CACHE", "REPORTGEN_DEBUG")}
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        self.out_path, self.err_path = logs / f"{name}.out", logs / f"{name}.err"
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, *launcher, "--models-dir", str(models), "build", *args],
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
    for name in ("bad-image", "no-model", "partial", "old-marker", "unmarked", "added"):
        shutil.copytree(project / "good-site", root / name / "site")
    old = root / "old-marker" / "site"          # an earlier reportgen's marker: no file list
    marker = json.loads((old / MARKER).read_text())
    del marker["files"]
    (old / MARKER).write_text(json.dumps(marker))
    (old / "CNAME").write_text("capsules.example.org\n")
    (old / "models" / "notes.md").write_text("# what the figures show\n")
    (root / "unmarked" / "site" / MARKER).unlink()       # made before the marker
    (root / "unmarked" / "site" / "models" / "thesis.tex").write_text("\\chapter{Capsules}\n")
    (root / "added" / "site" / "models" / "Tiny" / "notes.md").write_text("# Tiny\n")
    for name in ("parent-refused", "parent-built", "parent-file"):
        (root / name).mkdir()
    (root / "parent-file" / "notes.txt").write_text("mine\n")
    warm = ("--cache-dir", str(project / "cache"))
    runs = {
        "notes": (root, ("--site-dir", "notes", *QUICK), models, notes),
        "models": (root, ("--site-dir", str(models), *QUICK), models, models),
        "bad-image": (root / "bad-image", ("--image", "typo.png", *QUICK), models, None),
        "no-model": (root / "no-model", ("--models", "Tyni*", *QUICK), models, None),
        "partial": (root / "partial", ("--steps", "all", "--images", "test:0-1",
                                       "--analyses", "none"), broken_one, None),
        "old-marker": (root / "old-marker", QUICK, models, None),
        "unmarked": (root / "unmarked", QUICK, models, None),
        "added": (root / "added", QUICK, models, None),
        "parent-refused": (root / "parent-refused", ("--site-dir", "out/deeper/site", "--models",
                                                     "Tyni*", *QUICK), models,
                           root / "parent-refused" / "out"),
        "parent-built": (root / "parent-built", ("--site-dir", "out/deeper/site", *warm, *QUICK),
                         models, root / "parent-built" / "out"),
        "parent-file": (root / "parent-file", ("--site-dir", "notes.txt/site", *QUICK), models,
                        root / "parent-file"),
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


@pytest.mark.parametrize("name, why, named", [
    ("old-marker", "an older reportgen made it without listing the files it wrote, so they "
                   "cannot be told from files you added", "(CNAME, models/notes.md, "),
    ("unmarked", "without listing the files it wrote", "(models/thesis.tex, "),
    ("added", "it holds files reportgen did not write", "(models/Tiny/notes.md)"),
])
def test_a_site_holding_files_reportgen_did_not_write_is_refused_untouched(quick_runs, name,
                                                                           why, named):
    build, before, after, cwd = quick_runs[name]
    assert build.proc.returncode == 2, build.err
    assert len(build.err.splitlines()) == 1, build.err       # one line, no traceback
    line = build.error_lines()[0]
    assert line.startswith("Error: Refusing to write the site into 'site': ") and why in line
    assert named in line
    if name != "added":      # every file is unknown: a few named, then how many more
        assert re.search(r" and [\d,]+ more\)", line), line
    assert "Fix: " in line and "choose another --site-dir (a new folder" in line
    assert before == after                      # every file byte for byte, nothing beside it
    assert "computed" not in build.out          # refused before any model work


def test_missing_parent_folders_of_the_site_are_made_and_only_for_a_site(quick_runs):
    built, _, _, cwd = quick_runs["parent-built"]
    assert built.proc.returncode == 0, built.err
    check_complete(cwd / "out" / "deeper" / "site")
    assert sorted(p.name for p in (cwd / "out" / "deeper").iterdir()) == ["site"]
    refused, before, after, cwd = quick_runs["parent-refused"]
    assert refused.proc.returncode == 2 and "No model matches 'Tyni*'" in refused.err
    assert before == after and not (cwd / "out").exists()    # a refused build made no folder


def test_a_site_folder_inside_a_file_is_one_line(quick_runs):
    build, before, after, cwd = quick_runs["parent-file"]
    assert build.proc.returncode == 2
    assert build.err.splitlines() == [
        f"Error: Cannot write the lock file {cwd / 'notes.txt' / '.site.reportgen-lock'} beside "
        f"the site folder notes.txt/site/. Expected a folder you may write to at "
        f"{cwd / 'notes.txt'}. Received {cwd / 'notes.txt'} is not a folder. Fix: choose a "
        f"--site-dir in a folder you may write to."]
    assert before == after


# ------------------------------------------------------------------ repair and up to date


def stamps(folder: Path) -> dict[str, tuple[int, int]]:
    """Each file's inode and modification time: what a build that writes nothing keeps."""
    return {p.relative_to(folder).as_posix(): (p.stat().st_ino, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_deleted_figure_and_an_edited_page_are_built_again_then_left_alone(project,
                                                                               tmp_path):
    good, site = project / "good-site", tmp_path / "site"
    shutil.copytree(good, site)
    figure = sorted((site / "artifacts" / "Tiny").rglob("*.png"))[0]
    figure.unlink()
    (site / "index.html").write_text("<html>edited by hand</html>")
    args = ("--site-dir", "site", "--cache-dir", str(project / "cache"), *QUICK)
    repair = Build(tmp_path, "repair", *args, models=project / "models")
    assert repair.wait() == 0, repair.err
    assert (f"site/: 2 files reportgen wrote were deleted or changed since it was built "
            f"({figure.relative_to(site).as_posix()}, index.html); building it again."
            in repair.err), repair.err
    assert digest(site) == digest(good)      # every file as first written, the marker too
    no_leftovers(tmp_path)
    before = stamps(site)
    again = Build(tmp_path, "again", *args, models=project / "models")
    assert again.wait() == 0, again.err
    assert "site/ is up to date (no page or figure changed)." in again.err
    assert stamps(site) == before            # nothing rendered, linked or replaced


def test_a_figure_edited_in_place_in_the_site_is_drawn_again(project, tmp_path):
    """The site's figure files are hard links of the store's (reportgen.pages.linked_figures):
    a figure rewritten in place (as some image editors save) changes the store's file too,
    which the next build finds by its sha256, names, draws again and puts back in the site."""
    good, site, cache = project / "good-site", tmp_path / "site", tmp_path / "cache"
    shutil.copytree(project / "cache", cache)          # its own files, to be damaged
    args = ("--site-dir", "site", "--cache-dir", str(cache), *QUICK)
    first = Build(tmp_path, "first", *args, models=project / "models")
    assert first.wait() == 0, first.err
    assert digest(site) == digest(good)
    figure = sorted((site / "artifacts" / "Tiny").rglob("*.png"))[0]
    stored = [p for p in cache.rglob("*.png") if p.samefile(figure)]
    assert len(stored) == 1                          # the store's file, not a copy
    with open(figure, "r+b") as f:                   # in place: the inode stays
        f.seek(60)
        byte = f.read(1)
        f.seek(60)
        f.write(bytes([byte[0] ^ 0xFF]))
    repair = Build(tmp_path, "repair", *args, models=project / "models")
    assert repair.wait() == 0, repair.err
    assert "Damaged in the artifact store" in repair.err and "drawing it again" in repair.err
    assert digest(site) == digest(good)
    again = Build(tmp_path, "again", *args, models=project / "models")
    assert again.wait() == 0, again.err
    assert "Damaged" not in again.err and "site/ is up to date" in again.err


def test_the_same_pages_from_another_cache_leave_the_site_as_it_is(project, tmp_path):
    good, site = project / "good-site", tmp_path / "site"
    shutil.copytree(good, site)
    before = stamps(site)
    other = Build(tmp_path, "other", "--site-dir", "site", "--cache-dir", "other-cache", *QUICK,
                  models=project / "models")
    assert other.wait() == 0, other.err
    assert re.search(r"computed [1-9]", other.out) and "reused 0" in other.out   # its own cache
    assert "site/ is up to date (no page or figure changed)." in other.err
    assert stamps(site) == before and digest(site) == digest(good)


# the swap's second rename (the new site in) never happens: the process dies just before it
KILLED_BETWEEN_RENAMES = """
import os, signal
rename = os.rename
def rename_or_die(source, target, *args, **kwargs):
    if ".reportgen-new-" in os.fspath(source):
        os.kill(os.getpid(), signal.SIGKILL)
    return rename(source, target, *args, **kwargs)
os.rename = rename_or_die
from reportgen.cli import main
main()
"""


def test_a_kill_between_the_renames_is_undone_by_the_next_build_even_a_refused_one(project,
                                                                                      tmp_path):
    models, site = project / "models", tmp_path / "site"
    shutil.copytree(project / "good-site", site)
    before = digest(site)
    other_images = ("--site-dir", "site", "--cache-dir", str(project / "cache"), "--steps",
                    "last", "--images", "test:2", "--analyses", "none")
    killed = Build(tmp_path, "killed", *other_images, models=models,
                   launcher=("-c", KILLED_BETWEEN_RENAMES))
    assert killed.wait() == -signal.SIGKILL, killed.err
    assert not site.exists()
    beside = sorted(p.name.split("-")[1] for p in tmp_path.iterdir()
                    if p.name.startswith(".site.reportgen-"))
    assert beside == ["lock", "new", "old"]          # the old site renamed away, the new staged
    typo = Build(tmp_path, "typo", "--site-dir", "site", "--models", "Tyni*", *QUICK,
                 models=models)
    assert typo.wait() == 2
    errors = typo.error_lines()
    assert len(errors) == 1 and errors[0].startswith("Error: No model matches 'Tyni*'"), typo.err
    assert f"Restored {site}" in typo.err
    assert digest(site) == before                    # the old site, byte for byte
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".site.")] == []
    again = Build(tmp_path, "again", *other_images, models=models)
    assert again.wait() == 0, again.err
    check_complete(site)
    assert inputs_of(site) == {"test-2.png"}
    no_leftovers(tmp_path)


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
    assert inputs_of(tmp_path / "site-a") == LONG_INPUTS
    assert inputs_of(tmp_path / "site-b") == {"test-5.png"}
    assert steps_of(index_a) == LONG_STEPS and steps_of(index_b) == ["1-5"]
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
    assert inputs_of(tmp_path / "site") == LONG_INPUTS
    assert steps_of(index) == LONG_STEPS
    no_leftovers(tmp_path)
