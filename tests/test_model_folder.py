"""The model-folder layout (reportgen/model_folder.py): step <-> file name, the temporaries the
writers make and the recovery recognises, what a run leaves, the archive's names, what git
ignores, and that the layout's names are spelled out nowhere else."""

from __future__ import annotations

import ast
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from reportgen.catalog import Catalog, ModelEntry
from reportgen.model_folder import (ARCHIVE_DIR, GROUP_FILE, HISTORY_FILE, PARAMS_FILE,
                                    STATE_FILE, TEMP_PREFIX, TEMP_SUFFIXES, WEIGHTS_SUFFIX, ModelFolder, Step,
                                    is_temporary, is_training_product, list_steps)
from reportgen.training.checkpoints import atomic_path

ROOT = Path(__file__).resolve().parents[1]
# Names other code must not spell out: they read them from reportgen.model_folder.
LAYOUT_NAMES = (WEIGHTS_SUFFIX, HISTORY_FILE, STATE_FILE, ARCHIVE_DIR, TEMP_PREFIX, PARAMS_FILE,
                GROUP_FILE)
DEFINED_IN = {"reportgen/model_folder.py": set(LAYOUT_NAMES),
              # the parameter file's name is defined beside its schema, one layer below
              "reportgen/settings/model_params.py": {PARAMS_FILE}}
KNOWN_COPIES: dict = {}


@pytest.fixture
def folder(tmp_path) -> ModelFolder:
    (tmp_path / "Tiny").mkdir()
    (tmp_path / "Tiny" / PARAMS_FILE).write_text('dataset = "mnist"\ninput_shape = [28, 28, 1]\n')
    return ModelFolder.at(tmp_path / "Tiny")


def test_step_and_weights_file_name_round_trip(folder):
    for step in (Step(0, 0), Step(3, 100), Step(12, 7)):
        assert Step.from_filename(step.filename) == step
        assert folder.weights_path(step) == folder.path / f"{step}.weights.h5"
    for name in (".tmp-step-1-5.weights.h5", "1-5.weights.h5.bak", "x-1.weights.h5",
                 "1-5.npz", "1.weights.h5", "-1-5.weights.h5"):
        assert Step.from_filename(name) is None, name
    for name in ("10-1", "2-30", "2-4", "0-0", ".tmp-step-3-3"):
        (folder.path / f"{name}.weights.h5").write_bytes(b"")
    (folder.path / "notes.weights.h5").write_bytes(b"")
    assert [str(s) for s in folder.steps] == ["0-0", "2-4", "2-30", "10-1"]  # numeric order
    assert list_steps(folder.path) == folder.steps


def test_the_writers_temporaries_are_what_the_recovery_recognises(folder):
    for suffix in TEMP_SUFFIXES:
        with atomic_path(folder.path / f"target{suffix}") as tmp:
            assert tmp.parent == folder.path
            assert is_temporary(tmp.name), tmp.name
            assert not is_training_product(tmp.name)
    pending = folder.pending_path(Step(1, 5))
    assert pending.name == ".tmp-step-1-5.weights.h5"
    assert is_temporary(pending.name) and is_training_product(pending.name)
    # a user's files that merely look similar are never reportgen's
    for name in (".tmp-notes.txt", ".tmp-ab12.npz", ".tmpab_12xyz.npz", ".tmp-ABCD1234.npz",
                 "1-5.weights.h5", PARAMS_FILE, ".tmp-step-1-5.npz"):
        assert not is_temporary(name), name


def test_what_a_training_run_leaves(folder):
    products = [folder.weights_path(Step(2, 3)), folder.history_path, folder.state_path,
                folder.pending_path(Step(2, 4))]
    assert [p.name for p in products] == ["2-3.weights.h5", "history.json", "train_state.npz",
                                          ".tmp-step-2-4.weights.h5"]
    assert all(p.parent == folder.path and is_training_product(p.name) for p in products)
    # a group's record, like params.toml, defines the run: `--fresh` leaves it
    for name in (PARAMS_FILE, GROUP_FILE, "notes.txt", ".tmp-k3j9v0qq.json", ARCHIVE_DIR):
        assert not is_training_product(name), name
    assert folder.params_path == folder.path / "params.toml"
    assert folder.lock_path == folder.path  # the lock is on the folder: no lock file


def test_archive_folders_are_named_by_utc_time_and_sort_in_time_order(folder):
    when = datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=timezone.utc)
    assert folder.archive_dir(when) == folder.path / "archive" / "20240102T030405.000006Z"
    assert folder.archive_dir(when, uncommitted=True).name == "20240102T030405.000006Z-uncommitted"
    plus_two = timezone(timedelta(hours=2))
    assert folder.archive_dir(when.astimezone(plus_two)) == folder.archive_dir(when)
    later = folder.archive_dir(when + timedelta(microseconds=1))
    assert later.parent == folder.archive_root and later.name > folder.archive_dir(when).name


def test_the_catalog_hands_out_model_folder_values(folder):
    entry = Catalog(folder.path.parent).get("Tiny")
    assert ModelEntry is ModelFolder and entry == folder
    assert entry.params.input_shape == (28, 28, 1) and entry.history() == []


def test_git_ignores_every_training_product_and_never_params_toml():
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists() or not (ROOT / ".gitignore").is_file():
        pytest.skip("not a git checkout")
    model = ModelFolder.at(Path("models") / "AnyModel")
    when = datetime(2024, 1, 2, tzinfo=timezone.utc)
    ignored = [model.weights_path(Step(3, 100)), model.history_path, model.state_path,
               model.pending_path(Step(3, 100)), model.path / f"{TEMP_PREFIX}ab_12xyz.npz",
               model.archive_dir(when) / Step(1, 1).filename,
               model.archive_dir(when, uncommitted=True) / HISTORY_FILE]
    kept = [model.params_path]
    out = subprocess.run([git, "check-ignore", "--no-index", "--non-matching", "--verbose",
                          *map(str, ignored + kept)], cwd=ROOT, capture_output=True, text=True)
    verdict = {line.split("\t")[1]: not line.startswith("::") for line in out.stdout.splitlines()}
    assert verdict == {**{str(p): True for p in ignored}, **{str(p): False for p in kept}}


def test_layout_names_are_spelled_out_only_in_model_folder():
    """A string constant (not a docstring) that is, starts or ends with a layout name."""
    found = set()
    for path in sorted((ROOT / "reportgen").rglob("*.py")):
        if "tests" in path.relative_to(ROOT / "reportgen").parts[:-1]:
            continue        # a package's own tests, free to spell them like tests/
        where = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                        ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr)
                      and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in docstrings):
                for name in LAYOUT_NAMES:
                    text = node.value
                    if (text == name or (len(text) < 40 and name in text
                                         and (text.startswith(name) or text.endswith(name)))):
                        if name not in DEFINED_IN.get(where, ()):
                            found.add((where, name))
    unexpected = sorted(found - set(KNOWN_COPIES))
    assert unexpected == [], "read these names from reportgen.model_folder"
