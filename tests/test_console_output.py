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


@pytest.mark.slow
def test_build_to_a_file_has_no_progress_spam(tmp_path):
    from reportgen.catalog import Catalog
    from reportgen.training.trainer import TrainOptions, train

    models = tmp_path / "models"
    (models / "Tiny").mkdir(parents=True)
    (models / "Tiny" / "params.toml").write_text(
        TINY_TOML.format(data=_tiny_data(tmp_path / "toy.npz")))
    train(Catalog(models).get("Tiny"), TrainOptions(epochs=1))
    env = {k: v for k, v in os.environ.items()
           if k not in ("REPORTGEN_MODELS", "REPORTGEN_CACHE", "REPORTGEN_DEBUG")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    done = subprocess.run(
        [sys.executable, "-m", "reportgen", "--models-dir", str(models), "build", "--steps",
         "all", "--images", "test:0-1", "--analyses", "none", "--site-dir", "site"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    err = done.stderr
    assert "\r" not in err and "\x1b" not in err, err
    bars = [line for line in err.splitlines() if line.startswith("build Tiny")]
    assert len(bars) == 1 and bars[0].startswith("build Tiny: 4/4 step in "), err
    repeated = [line for line, n in collections.Counter(err.splitlines()).items()
                if n > 1 and line.strip()]
    assert not repeated, err
    # what the build will do, said once before it starts
    plans = [line for line in err.splitlines() if line.startswith("Tiny: ")]
    assert len(plans) == 1, err
    assert plans[0].startswith("Tiny: 4 steps (0-0 … 1-5), 2 inputs, no dataset analyses, "
                               "12 evaluation images"), plans[0]      # the whole (small) test split
    assert "if nothing is cached (estimated from " in plans[0]


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
