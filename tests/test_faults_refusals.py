"""What reportgen refuses before it writes anything, each tried with a real `reportgen` process:
one line naming the file or value and the fix, exit 2, and nothing written or lost."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.faults, pytest.mark.slow]


def _run(args, cwd, models=None, timeout=240, **env):
    extra = {"REPORTGEN_MODELS": str(models)} if models is not None else {}
    return subprocess.run([sys.executable, "-m", "reportgen", *args], cwd=cwd,
                          env={**os.environ, **extra, **env}, capture_output=True, text=True,
                          timeout=timeout)


def _one_error_line(result) -> str:
    output = result.stdout + result.stderr
    lines = [line for line in output.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1 and "Traceback" not in output, output
    return lines[0]


def _tree(folder: Path) -> dict[str, bytes | None]:
    """Every file (with its bytes) and folder (None) under `folder`: to show that nothing
    was written, moved or lost."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() if p.is_file() else None
            for p in sorted(folder.rglob("*"))}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A project folder with a trained tiny model (models/Tiny), a folder of the user's files
    and a built site (site/)."""
    from reportgen.catalog import Catalog
    from reportgen.training.trainer import TrainOptions, train
    from test_training import TINY_TOML, _tiny_data

    root = tmp_path_factory.mktemp("project")
    (root / "models" / "Tiny").mkdir(parents=True)
    (root / "models" / "Tiny" / "params.toml").write_text(
        TINY_TOML.format(data=_tiny_data(root / "toy.npz")))
    train(Catalog(root / "models").get("Tiny"), TrainOptions(epochs=1))
    (root / "papers").mkdir()
    (root / "papers" / "draft.tex").write_text("\\section{Results}\n")
    result = _run(BUILD + ["--site-dir", "site"], root, root / "models")
    assert result.returncode == 0, result.stdout + result.stderr
    return root


BUILD = ["build", "--steps", "last", "--images", "test:0-1", "--analyses", "none",
         "--technique", "predictions"]


def _refused(project: Path, args: list[str]) -> str:
    """The one error line of the command `args` in `project`, checked to exit 2 and to leave
    every file and folder of the project as it was."""
    before = _tree(project)
    result = _run(args, project, project / "models")
    line = _one_error_line(result)
    assert result.returncode == 2, line
    assert _tree(project) == before, line
    return line


# --------------------------------------------------------------------------------------------
# --cache-dir


@pytest.mark.parametrize("cache,why", [
    ("models", "it is the models folder"),
    ("models/Tiny", "it is inside the models folder"),
    ("models/Tiny/cache", "it is inside the models folder"),
    ("papers", "it holds files the store did not write (draft.tex)"),
    ("site", "it is the site folder"),
    ("site/cache", "it is inside the site folder"),
])
def test_cache_dir_among_the_users_files_is_refused(project, cache, why):
    line = _refused(project, BUILD + ["--cache-dir", cache, "--site-dir", "site"])
    assert f"Refusing --cache-dir '{cache}': {why}" in line


def test_cache_dir_in_a_model_folder_outside_the_models_folder_is_refused(project, tmp_path):
    (tmp_path / "Mine").mkdir()
    (tmp_path / "Mine" / "params.toml").write_text((project / "models" / "Tiny" /
                                                    "params.toml").read_text())
    line = _refused(project, BUILD + ["--cache-dir", str(tmp_path / "Mine" / "store"),
                                      "--site-dir", "site"])
    assert f"it is inside the model folder {tmp_path / 'Mine'}" in line
    assert sorted(p.name for p in (tmp_path / "Mine").iterdir()) == ["params.toml"]


# --------------------------------------------------------------------------------------------
# A pickle asking for code


def test_a_pickle_that_calls_a_function_is_refused_naming_it(tmp_path):
    torch = pytest.importorskip("torch", reason="reading .pt files needs torch")
    ran = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {ran}",)

    path = tmp_path / "epoch_10.pt"
    torch.save({"conv1.weight": torch.zeros(2), "extra": Payload()}, path)
    before = _tree(tmp_path)
    result = _run(["import", str(path), "--from", "gram-ai"], tmp_path, tmp_path / "models")
    line = _one_error_line(result)
    assert result.returncode == 2, line
    assert "holds code that reportgen will not run" in line and str(path) in line
    assert f"{os.system.__module__}.system" in line           # the blocked global, named
    assert "damaged" not in line and "weights_only" not in line and "trusted" not in line
    assert not ran.exists() and _tree(tmp_path) == before    # nothing ran, nothing written


# --------------------------------------------------------------------------------------------
# Options checked against the models' steps and data before any folder is made


@pytest.mark.parametrize("option,words", [
    (["--images", "test:0-100000"], "Test image index 12 is out of range (model Tiny)"),
    (["--steps", "1-99"], "Step 1-99 was not saved (model Tiny)"),
])
def test_an_option_the_model_cannot_meet_is_refused_before_any_folder(project, option, words):
    line = _refused(project, BUILD + ["--cache-dir", "new-cache", "--site-dir", "new-site",
                                      *option])
    assert words in line
    assert not (project / "new-cache").exists() and not (project / "new-site").exists()


def test_more_evaluation_images_than_the_test_split_is_said(project, tmp_path):
    result = _run(BUILD + ["--eval-images", "1000000000", "--cache-dir", str(tmp_path / "c"),
                           "--site-dir", str(tmp_path / "site")], project, project / "models")
    assert result.returncode == 0, result.stdout + result.stderr
    assert ("--eval-images 1,000,000,000 is more than the 12 test images of "
            f"{project / 'toy.npz'}: the evaluation uses all 12.") in result.stderr
    assert "12 evaluation images" in result.stderr       # the plan says what it will do


@pytest.mark.parametrize("command", [BUILD + ["--cache-dir", "new-cache", "--site-dir",
                                              "new-site"], ["train", "Tiny"]])
def test_a_scheduler_that_never_answers_is_said_within_5_seconds(project, command):
    import socket
    import time

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))            # bound, not listening: refused at once
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)                         # the kernel accepts; nobody ever answers
    with closed, silent:
        started = time.monotonic()
        line = _refused(project, command + ["--scheduler",
                                            f"tcp://127.0.0.1:{closed.getsockname()[1]}"])
        at_once = time.monotonic() - started
        assert "Cannot reach the Dask scheduler" in line and "refused" in line
        started = time.monotonic()
        line = _refused(project, command + ["--scheduler",
                                            f"tcp://127.0.0.1:{silent.getsockname()[1]}"])
        waited = time.monotonic() - started
    assert "Cannot reach the Dask scheduler" in line and "nothing answered" in line
    assert waited - at_once < 5, (waited, at_once)   # Python's start-up aside
    assert not (project / "new-cache").exists()


# --------------------------------------------------------------------------------------------
# Memory: the batch the command will use


def test_a_training_batch_beyond_memory_is_refused_naming_the_batch_that_fits(project):
    """The memory available moves between this process and the command's (other processes
    run): a batch 4x the largest that fits here is refused there, naming a largest batch
    within 2x of this one's."""
    from reportgen.capsnet.footprint import largest_batch
    from reportgen.settings.model_params import load_model_params

    fits = largest_batch(load_model_params(project / "models" / "Tiny" / "params.toml"),
                         training=True)
    line = _refused(project, ["train", "Tiny", "--resume", "--epochs", "2", "--batch-size",
                              str(4 * fits)])
    assert f"Training Tiny with batch {4 * fits:,} needs about" in line
    assert "available less a" in line
    named = int(re.search(r"--batch-size (\d+) \(the largest that fits\)", line).group(1))
    assert fits / 2 <= named <= 2 * fits
    assert f"the largest batch that fits is {named:,}" in line


def test_a_build_batch_beyond_memory_is_lowered_and_said(project, tmp_path):
    from reportgen.capsnet.footprint import largest_batch
    from reportgen.settings.model_params import load_model_params

    fits = largest_batch(load_model_params(project / "models" / "Tiny" / "params.toml"),
                         training=False)
    result = _run(BUILD + ["--batch-size", str(4 * fits), "--cache-dir", str(tmp_path / "c"),
                           "--site-dir", str(tmp_path / "site")], project, project / "models")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (f"Tiny: --batch-size {4 * fits} would not fit in this machine's memory; its "
            f"images run 64 at a time.") in result.stderr
