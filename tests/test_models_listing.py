"""`reportgen models`: the table's columns line up whatever the names' lengths; a model no
machine like this one can hold (parameters or activations) is listed invalid with its numbers;
damaged weights files are listed as damaged steps with their reason, not as steps."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reportgen.commands.models import run_models

ROOT = Path(__file__).resolve().parents[1]


def test_columns_line_up_for_long_model_names(tmp_path, capsys):
    for name in ("A", "A_model_name_longer_than_twenty_chars"):
        (tmp_path / name).mkdir()
        shutil.copy(ROOT / "models" / "MNIST_Demo" / "params.toml", tmp_path / name)
    run_models(tmp_path, as_json=False)
    lines = [line for line in capsys.readouterr().out.splitlines() if "2,117,072" in line]
    assert len(lines) == 2
    assert len({line.index("2,117,072") for line in lines}) == 1   # same column
    assert all(line.split()[1] == "mnist" for line in lines)       # name and dataset apart


# ------------------------------------------------------------------ models no machine can hold

HUGE = """dataset = "mnist"
input_shape = [28, 28, 1]
[decoder]
units = [3000000, 15000000]
"""
# A modest number of weights (one matrix per class) on a 60000 x 60000 input: the activations.
WIDE = """dataset = "mnist"
input_shape = [60000, 60000, 1]
[class_caps]
weight_sharing = "all"
[decoder]
enabled = false
"""


def _huge_count() -> int:
    """Trainable parameters of HUGE, by hand: conv1 9x9x1x256, primary conv 9x9x256x(32x8),
    1152 primary capsules x 10 classes of 16x8 matrices, decoder 160 -> 3e6 -> 1.5e7 -> 784."""
    conv = 9 * 9 * 1 * 256 + 256
    primary = 9 * 9 * 256 * 256 + 256
    class_caps = 6 * 6 * 32 * 10 * 16 * 8
    decoder = (160 * 3_000_000 + 3_000_000 + 3_000_000 * 15_000_000 + 15_000_000
               + 15_000_000 * 784 + 784)
    return conv + primary + class_caps + decoder


def _wide_values() -> int:
    """float32 values of one WIDE image's forward pass, by hand: the input, conv1's 59992^2 x
    256 map, the primary conv's 29992^2 x 256, the primary capsules (8 values and a length
    each), their votes and couplings for 10 classes (16 values + 1 each), the class capsules."""
    conv1, grid = 60000 - 8, (60000 - 8 - 9) // 2 + 1
    capsules = grid * grid * 32
    return (60000 * 60000 + conv1 * conv1 * 256 + grid * grid * 256 + capsules * 9
            + capsules * 10 * 17 + 10 * 17)


def test_a_model_too_large_for_the_machine_is_listed_invalid_with_its_numbers(tmp_path):
    from reportgen.capsnet.footprint import machine_memory, max_trainable_params
    from reportgen.commands.models import describe_models

    for name, text in (("Huge", HUGE), ("Wide", WIDE)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "params.toml").write_text(text)
    (tmp_path / "Demo").mkdir()
    shutil.copy(ROOT / "models" / "MNIST_Demo" / "params.toml", tmp_path / "Demo")
    rows = {r["name"]: r for r in describe_models(tmp_path)}
    assert rows["Demo"]["valid"] and rows["Demo"]["params"] == 2_117_072
    huge = rows["Huge"]
    assert not huge["valid"] and "\n" not in huge["error"]
    assert _huge_count() == 45_012_264_805_008
    assert f"Received {_huge_count():,} trainable parameters" in huge["error"]
    assert f"at most {max_trainable_params():,} trainable parameters" in huge["error"]
    assert max_trainable_params() == machine_memory() // 16
    wide = rows["Wide"]
    assert not wide["valid"] and f"({_wide_values():,} float32 values" in wide["error"]
    assert "per image" in wide["error"] and "Fix: make the input" in wide["error"]


def test_the_bounds_are_the_machines_memory():
    """Parameters: 16 bytes each (weight, gradient, Adam's two moments) within the memory;
    one image's activations, twice (with their gradients), within it too."""
    import tomllib

    from reportgen.capsnet.footprint import check_footprint
    from reportgen.errors import ReportgenError
    from reportgen.settings.model_params import parse_model_params

    huge = parse_model_params(tomllib.loads(HUGE))
    check_footprint(huge, "Huge", memory=16 * _huge_count())
    with pytest.raises(ReportgenError, match="trainable parameters"):
        check_footprint(huge, "Huge", memory=16 * _huge_count() - 1)
    wide = parse_model_params(tomllib.loads(WIDE))
    needed = 2 * 4 * _wide_values()
    check_footprint(wide, "Wide", memory=max(needed, 16 * 40_000_000))
    with pytest.raises(ReportgenError, match="per image"):
        check_footprint(wide, "Wide", memory=needed - 2)


def test_every_shipped_model_fits_a_machine_of_4_gb():
    """The bounds refuse only the absurd: every published configuration passes on 4 GB."""
    from reportgen.capsnet.footprint import check_footprint
    from reportgen.catalog import Catalog

    for entry in Catalog(ROOT / "models").scan()[0]:
        check_footprint(entry.params, entry.name, memory=4 * 1024 ** 3)


# ------------------------------------------------------------------------ damaged weights files

def test_damaged_weights_files_are_listed_as_damaged_steps_with_their_reason(tmp_path, capsys):
    import h5py
    import numpy as np

    from reportgen.commands.models import describe_models, run_models

    folder = tmp_path / "Demo"
    folder.mkdir()
    shutil.copy(ROOT / "models" / "MNIST_Demo" / "params.toml", folder)
    good = folder / "1-0.weights.h5"                  # as many values as the model's weights
    with h5py.File(good, "w") as f:
        f.create_dataset("layers/w", data=np.zeros(2_117_072, np.float32))
    size = good.stat().st_size
    (folder / "2-0.weights.h5").write_bytes(good.read_bytes()[:size // 2])
    (folder / "3-0.weights.h5").write_bytes(np.random.default_rng(0).bytes(size))
    (folder / "4-0.weights.h5").write_bytes(b"")
    with h5py.File(folder / "5-0.weights.h5", "w") as f:   # HDF5, but another model's
        f.create_dataset("layers/w", data=np.zeros(1000, np.float32))
    shutil.copy(good, folder / "6-0.weights.h5")

    row = describe_models(tmp_path)[0]
    assert row["steps"] == ["1-0", "6-0"]
    assert not any(d["after_last"] for d in row["damaged_steps"])    # all before 6-0
    assert [{k: d[k] for k in ("step", "reason")} for d in row["damaged_steps"]] == [
        {"step": "2-0", "reason": f"truncated ({size // 2:,} of {size:,} bytes)"},
        {"step": "3-0", "reason": "not an HDF5 file (no HDF5 signature at its start)"},
        {"step": "4-0", "reason": "an empty file"},
        {"step": "5-0", "reason": "holds 1,000 weight values, fewer than the model's "
                                  "2,117,072 trainable parameters"}]

    run_models(tmp_path, as_json=False)
    out, err = capsys.readouterr()
    demo = next(line for line in out.splitlines() if line.startswith("Demo"))
    assert demo.split()[-3:] == ["2", "6-0", "-"]          # 2 steps, the last loadable one
    assert f"damaged step 2-0: truncated ({size // 2:,} of {size:,} bytes)" in out
    assert "4 saved steps are damaged" in err


def test_the_batch_counts_in_the_memory_check():
    """A model whose one image fits but whose batch does not (Sabour's network with 40,000
    conv filters with 25 GB available): the per-image check passes, the batch check names the
    largest batch that fits below the margin."""
    from reportgen.capsnet.footprint import (batch_bytes, batch_refusal, check_footprint,
                                             headroom, largest_batch)
    from reportgen.settings.model_params import parse_model_params

    params = parse_model_params({"dataset": "mnist", "input_shape": [28, 28, 1],
                                 "conv": [{"filters": 40_000, "kernel_size": 9}]})
    memory = 25 * 10 ** 9
    check_footprint(params, "params.toml", memory)                 # one image fits
    fits = largest_batch(params, training=True, memory=memory)
    assert 0 < fits < 100                                           # params.toml's batch: no
    usable = memory - headroom(memory)                              # the margin kept
    assert batch_bytes(params, fits, True) <= usable < batch_bytes(params, fits + 1, True)
    assert largest_batch(params, training=False, memory=memory) > fits   # no Adam state
    message = batch_refusal(params, 100, "training X", "--batch-size", memory).message
    assert message.startswith("Training X with batch 100 needs about") and "25.0 GB" in message


def test_the_row_shows_the_accuracy_of_its_last_loadable_step_and_flags_a_later_damaged_one(
        tmp_path, monkeypatch, capsys):
    """A NaN step saved after the last loadable one: the row names the loadable step with its
    own accuracy (not the damaged step's) and the damaged step's line says it came after."""
    import h5py
    import numpy as np

    from reportgen.commands.models import describe_models, run_models

    monkeypatch.chdir(tmp_path)          # the build's digests memo lives in the working folder
    folder = tmp_path / "models" / "Demo"
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "models" / "MNIST_Demo" / "params.toml", folder)
    for step, value in (("1-2", 0.0), ("1-6", np.nan)):
        with h5py.File(folder / f"{step}.weights.h5", "w") as f:
            data = np.zeros(2_117_072, np.float32)
            data[5] = value
            f.create_dataset("layers/w", data=data)
    (folder / "history.json").write_text(json.dumps({"records": [
        {"step": "1-2", "epoch": 1, "batch": 2, "val_accuracy": 0.25},
        {"step": "1-6", "epoch": 1, "batch": 6, "val_accuracy": 0.4650}]}))

    row = describe_models(tmp_path / "models")[0]
    assert row["steps"] == ["1-2"]
    assert row["latest_val_accuracy"] == 0.25 and row["best_val_accuracy"] == 0.25
    [damaged] = row["damaged_steps"]
    assert damaged["step"] == "1-6" and damaged["after_last"]
    assert damaged["val_accuracy"] == 0.4650

    run_models(tmp_path / "models", as_json=False)
    out = capsys.readouterr().out
    demo = next(line for line in out.splitlines() if line.startswith("Demo"))
    assert demo.split()[-3:] == ["1", "1-2", "0.2500"]
    assert "0.4650" not in demo
    flagged = next(line for line in out.splitlines() if "damaged step 1-6" in line)
    assert "after the last loadable step 1-2" in flagged and "val acc 0.4650" in flagged
