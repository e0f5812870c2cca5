"""The command line: every --help works (without importing TensorFlow), models --json, errors."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from reportgen.cli import main

COMMANDS = [[], ["train"], ["models"], ["demo"], ["build"], ["serve"], ["publish"],
            ["cache"], ["cache", "info"], ["cache", "clear"]]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a) or "main")
def test_every_command_has_help_with_an_example(args):
    result = CliRunner().invoke(main, [*args, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
    if args and args != ["cache"]:
        assert "Example" in result.output or args[0] == "cache"


def test_help_does_not_import_tensorflow():
    code = ("import sys; from click.testing import CliRunner; from reportgen.cli import main; "
            "r = CliRunner().invoke(main, ['--help']); "
            "print('tensorflow' in sys.modules, r.exit_code)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "0"]


def test_models_json_lists_every_model_with_spec_counts():
    result = CliRunner().invoke(main, ["--models-dir", "models", "models", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["MNIST"]["params"] == 8_215_568
    assert rows["MNIST_LPcaps"]["params"] == 15_293_456
    assert rows["CIFAR10"]["dataset"] == "cifar10"
    for row in rows.values():
        assert {"name", "dataset", "params", "steps"} <= set(row)
        assert isinstance(row["steps"], list)


def test_unknown_model_is_a_clean_error(tmp_path):
    result = CliRunner().invoke(main, ["--models-dir", "models", "train", "NOPE"])
    assert result.exit_code == 2
    assert "Unknown model 'NOPE'" in result.output and "MNIST_Demo" in result.output
    assert "Traceback" not in result.output


def test_unsafe_name_is_refused():
    result = CliRunner().invoke(main, ["--models-dir", "models", "train", "../models/MNIST"])
    assert result.exit_code == 2 and "Unsafe model name" in result.output


def test_bad_params_file_is_named(tmp_path):
    (tmp_path / "Bad").mkdir()
    (tmp_path / "Bad" / "params.toml").write_text(
        'dataset = "mnist"\ninput_shape = [28, 28, 1]\n[primary]\ntypes = "many"\n')
    result = CliRunner().invoke(main, ["--models-dir", str(tmp_path), "train", "Bad"])
    assert result.exit_code == 2
    assert "'primary.types'" in result.output and "Bad/params.toml" in result.output
    listing = CliRunner().invoke(main, ["--models-dir", str(tmp_path), "models"])
    assert "Bad" in listing.output and "error" in listing.output
