"""`reportgen models`: the table's columns line up whatever the names' lengths."""

from __future__ import annotations

import shutil
from pathlib import Path

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
