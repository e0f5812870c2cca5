"""`reportgen build` writing to a file or a pipe: no carriage-return redraws or escape codes,
one final line per progress bar, each notice once."""

from __future__ import annotations

import collections
import os
import subprocess
import sys

import pytest

from reportgen import console
from test_training import TINY_TOML, _tiny_data
from trained_tiny import copy_trained_tiny


def test_each_notice_prints_once_per_command(capsys):
    console.notices_once()
    for _ in range(3):
        console.notice("Using the bundled digits.")
    console.notice("another notice")
    assert capsys.readouterr().err.splitlines() == ["Using the bundled digits.", "another notice"]
    console.notices_once()            # the next command starts afresh
    console.notice("Using the bundled digits.")
    assert capsys.readouterr().err == "Using the bundled digits.\n"


def test_progress_without_a_terminal_is_one_final_line(capsys):
    with console.progress(5, "build Tiny", unit="step") as bar:
        for _ in range(5):
            bar.update(1)
            bar.set_postfix(computed=2, reused=3, refresh=False)
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("build Tiny: 5/5 step in ")
    assert lines[0].endswith("(computed=2, reused=3)")


def test_long_work_without_a_terminal_logs_a_line_every_minute(capsys, monkeypatch):
    """A log is not silent between its first and last line: on long work a line every
    LOG_EVERY_SECONDS says how far it is, how long it took and, at the rate so far, what is
    left (the clock is stepped by hand: 4 batches of 30 s)."""
    clock = [1000.0]
    monkeypatch.setattr(console.time, "monotonic", lambda: clock[0])
    with console.progress(8, "train Tiny", unit="batch") as bar:
        for _ in range(4):
            clock[0] += 30.0
            bar.update(1)
        bar.set_postfix(loss="0.25", refresh=False)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["train Tiny: 2/8 batch (25%) after 1 min 00 s, about 3 min 00 s left",
                     "train Tiny: 4/8 batch (50%) after 2 min 00 s, about 2 min 00 s left",
                     "train Tiny: 4/8 batch in 120.0 s (loss=0.25)"]


@pytest.mark.slow
def test_build_to_a_file_has_no_progress_spam(tmp_path, tmp_path_factory):
    import shutil

    from reportgen.commands.build_time import read_calibration

    models = tmp_path / "models"
    copy_trained_tiny(tmp_path_factory, models / "Tiny")
    toml = (models / "Tiny" / "params.toml").read_text()
    # a second model: Tiny's weights under other settings (so none of its results are Tiny's)
    shutil.copytree(models / "Tiny", models / "Other")
    (models / "Other" / "params.toml").write_text(toml.replace("learning_rate = 0.01",
                                                               "learning_rate = 0.02"))
    times = tmp_path / ".reportgen" / "build-times.json"
    times.parent.mkdir()
    times.write_text('{"format": 1, "costs": {"capsnet": {"st')      # cut short: ignored
    env = {k: v for k, v in os.environ.items()
           if k not in ("REPORTGEN_MODELS", "REPORTGEN_CACHE", "REPORTGEN_DEBUG")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"

    def build():
        done = subprocess.run(
            [sys.executable, "-m", "reportgen", "--models-dir", str(models), "build",
             "--steps", "all", "--images", "test:0-1", "--analyses", "none", "--site-dir",
             "site"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done

    done = build()
    err = done.stderr
    assert "\r" not in err and "\x1b" not in err, err
    # the bar's final line (on a loaded machine a minute's line may come before it)
    bars = [line for line in err.splitlines() if line.startswith("build Tiny")
            and " after " not in line]
    assert len(bars) == 1 and bars[0].startswith("build Tiny: 4/4 step in "), err
    assert "build left=" in bars[0]          # the rest of the build, on its bar
    repeated = [line for line, n in collections.Counter(err.splitlines()).items()
                if n > 1 and line.strip()]
    assert not repeated, err
    # what the build will do, said once per model before it starts, then the whole build's time
    lines = err.splitlines()
    plans = [i for i, line in enumerate(lines) if line.startswith(("Tiny: ", "Other: "))]
    assert len(plans) == 2, err
    tiny = next(lines[i] for i in plans if lines[i].startswith("Tiny: "))
    assert tiny.startswith("Tiny: 4 steps (0-0 … 1-5), 2 inputs, no dataset analyses, "
                           "12 evaluation images"), tiny      # the whole (small) test split
    assert "if nothing is cached (estimated from " in tiny
    whole = [i for i, line in enumerate(lines) if line.startswith("Whole build: ")]
    assert len(whole) == 1, err
    assert lines[whole[0]].startswith("Whole build: 2 models, about ")
    assert "if nothing is cached (start-up and site included" in lines[whole[0]]
    first_bar = min(i for i, line in enumerate(lines) if line.startswith("build "))
    assert max(plans) < whole[0] < first_bar, err
    # the damaged record of earlier builds: said, ignored, replaced by this build's
    assert "Ignoring .reportgen/build-times.json (not valid JSON)" in err
    assert any(line.startswith("time: ") and "(estimated before it started: about " in line
               for line in done.stdout.splitlines()), done.stdout
    known, problem = read_calibration(times)
    # the tiny nets' costs, apart from those of models of MNIST_Demo's size
    assert problem is None and set(known) == {"build@-4", "capsnet@-4"}, known
    # 2 models x 4 steps x 2 inputs, counted as what they are
    assert {k: e["units"] for k, e in known["capsnet@-4"].items()} == {"model": 2, "step": 8,
                                                                        "input": 16}
    # a rebuild computes nothing, so it teaches the estimate nothing
    before = times.read_bytes()
    again = build()
    assert "computed 0 " in again.stdout and times.read_bytes() == before


@pytest.mark.slow
def test_training_bar_shows_epoch_and_running_accuracy_of_the_epoch(tmp_path, capsys):
    """The bar's accuracy runs over the whole epoch (not restarted at each save): with saves
    every 2 batches, its final value is the epoch's image-weighted mean of the saves' training
    accuracies."""
    from reportgen.catalog import Catalog
    from reportgen.training.trainer import TrainOptions, train

    models = tmp_path / "models"
    (models / "Tiny").mkdir(parents=True)
    (models / "Tiny" / "params.toml").write_text(
        TINY_TOML.format(data=_tiny_data(tmp_path / "toy.npz")))
    capsys.readouterr()
    history = train(Catalog(models).get("Tiny"), TrainOptions(epochs=2))
    line = next(l for l in capsys.readouterr().err.splitlines() if l.startswith("train Tiny"))
    postfix = dict(item.split("=") for item in line[line.index("(") + 1:-1].split(", "))
    assert postfix["epoch"] == "2/2"
    last = [r for r in history if r["epoch"] == 2]
    seen = [b["images_seen"] - a["images_seen"] for a, b in zip(history[-len(last) - 1:], last)]
    mean = sum(r["train_accuracy"] * k for r, k in zip(last, seen)) / sum(seen)
    assert len(last) >= 2 and float(postfix["acc"]) == pytest.approx(mean, abs=1e-3)
    assert float(postfix["val_acc"]) == pytest.approx(history[-1]["val_accuracy"], abs=1e-4)


def test_final_line_counts_and_total_in_one_format(capsys):
    with console.progress(2500, "affine robustness (50 images × 50 transforms)",
                          unit="passes") as bar:
        bar.update(2500)
    line = capsys.readouterr().err.strip()
    assert line.startswith("affine robustness (50 images × 50 transforms): 2,500/2,500 passes in ")


# -- what a failed build says: each reason once; --debug adds the real traceback -----------------

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    models = tmp_path_factory.mktemp("said") / "models"
    copy_trained_tiny(tmp_path_factory, models / "Tiny")
    return models


def _build_args(models, tmp_path, *extra, pattern="Tiny"):
    return ["--models-dir", str(models), *extra, "build", "--models", pattern, "--steps", "last",
            "--images", "test:0-1", "--analyses", "none", "--cache-dir", str(tmp_path / "cache"),
            "--site-dir", str(tmp_path / "site")]


@pytest.mark.slow
def test_nothing_built_says_each_reason_once(trained, tmp_path, monkeypatch):
    import shutil

    from click.testing import CliRunner

    from reportgen.catalog import Catalog
    from reportgen.cli import main

    monkeypatch.chdir(tmp_path)
    models = tmp_path / "models"
    shutil.copytree(trained, models)
    (models / "Untrained").mkdir()
    shutil.copy(models / "Tiny" / "params.toml", models / "Untrained" / "params.toml")
    broken = models / "Tiny" / Catalog(models).get("Tiny").steps[-1].filename
    broken.write_bytes(b"not a weights file")
    result = CliRunner().invoke(main, _build_args(models, tmp_path, pattern="*"))
    assert result.exit_code == 2, result.output
    said = result.stdout + result.stderr
    failed = [line for line in said.splitlines() if line.startswith("FAILED: Tiny step")]
    assert len(failed) == 1 and str(broken) in failed[0], said
    reason = failed[0].split(": ", 2)[2]
    assert said.count(reason[:60]) == 1, said                  # the failure's reason, once
    assert said.count("reportgen train Untrained") == 1, said  # the skipped model's reason
    assert result.stderr.splitlines()[-1] == (
        f"Error: Nothing was built (1 failed and 1 skipped, listed above); {tmp_path / 'site'}/ "
        f"was left as it was. Fix: fix the problems listed above and build again.")
    assert not (tmp_path / "site").exists()


@pytest.mark.slow
@pytest.mark.parametrize("debug", ["--debug", "REPORTGEN_DEBUG", None])
def test_debug_shows_the_real_traceback_of_each_failed_model(trained, tmp_path, monkeypatch,
                                                             debug):
    from click.testing import CliRunner

    from reportgen import console
    from reportgen.cli import main
    from reportgen.commands import site_assembly

    def gallery_that_breaks(*args, **kwargs):
        raise RuntimeError("the gallery broke")

    monkeypatch.setattr(site_assembly, "input_gallery", gallery_that_breaks)
    monkeypatch.delenv("REPORTGEN_DEBUG", raising=False)
    if debug == "REPORTGEN_DEBUG":
        monkeypatch.setenv("REPORTGEN_DEBUG", "1")
    try:
        result = CliRunner().invoke(main, _build_args(
            trained, tmp_path, *([debug] if debug == "--debug" else [])))
    finally:
        console.show_tracebacks(False)
    assert "FAILED: Tiny: RuntimeError: the gallery broke" in result.stdout
    err = result.stderr
    if debug is None:
        assert "Traceback" not in err
        return
    assert err.count("Traceback (most recent call last):") == 1, err
    trace = err[err.index("Traceback"):]
    assert 'in gallery_that_breaks\n    raise RuntimeError("the gallery broke")' in trace
    assert "in model\n" in trace and trace.rstrip().endswith("RuntimeError: the gallery broke")
