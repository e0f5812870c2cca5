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
    assert listing.exit_code == 0
    assert "Bad" in listing.output and "invalid:" in listing.output
    assert "'primary.types'" in listing.output


def _hostile_models(root):
    """One valid model beside folders that are not: unsafe names and a garbage params.toml."""
    good = (root.parent / "good.toml")
    good.write_text('dataset = "mnist"\ninput_shape = [28, 28, 1]\n')
    for name in ("Good", "a<b", "has space", "-dash", "Modèle", "Garbage"):
        (root / name).mkdir(parents=True)
        (root / name / "params.toml").write_text(
            "\x00 = = [[" if name == "Garbage" else good.read_text())
    return root


def test_models_lists_invalid_folders_with_their_reason_and_the_rest_normally(tmp_path):
    root = _hostile_models(tmp_path / "models")
    result = CliRunner().invoke(main, ["--models-dir", str(root), "models"])
    assert result.exit_code == 0, result.output
    lines = {line.split("  ")[0]: line for line in result.stdout.splitlines()[2:]}
    assert set(lines) == {"Good", "a<b", "has space", "-dash", "Modèle", "Garbage"}
    assert "mnist" in lines["Good"] and "8,215,568" in lines["Good"]
    for name in ("a<b", "has space", "-dash", "Modèle"):
        assert "invalid: Unsafe model name" in lines[name] and repr(name) in lines[name]
    assert "invalid:" in lines["Garbage"] and "not valid TOML" in lines["Garbage"]
    assert "5 model folders are invalid" in result.stderr

    rows = {r["name"]: r for r in json.loads(CliRunner().invoke(
        main, ["--models-dir", str(root), "models", "--json"]).stdout)}
    assert rows["Good"]["valid"] is True and rows["Good"]["error"] is None
    assert rows["Good"]["params"] == 8_215_568
    assert rows["a<b"]["valid"] is False and "a_b" in rows["a<b"]["error"]   # the rename hint
    assert rows["Garbage"]["valid"] is False and "Garbage/params.toml" in rows["Garbage"]["error"]
    assert all("\n" not in r["error"] for r in rows.values() if r["error"])


def test_a_corrupt_history_is_one_line_and_keeps_the_model_listed(tmp_path):
    root = _hostile_models(tmp_path / "models")
    (root / "Good" / "history.json").write_text('{"records": [{"step": "1-')
    result = CliRunner().invoke(main, ["--models-dir", str(root), "models"])
    assert result.exit_code == 0
    row = [line for line in result.stdout.splitlines() if line.startswith("Good")][0]
    assert "8,215,568" in row                             # still listed with its numbers
    error = [line for line in result.stdout.splitlines() if "history.json" in line]
    assert len(error) == 1 and "is corrupt" in error[0] and "invalid JSON" in error[0]


@pytest.mark.parametrize("args", [["models"], ["models", "--json"], ["train", "MNIST_Demo"],
                                  pytest.param(["build", "--models", "*"], marks=pytest.mark.slow),  # enters the build
                                  ["demo"]],
                         ids=lambda a: " ".join(a))
@pytest.mark.parametrize("via_env", [False, True], ids=["option", "env"])
def test_missing_models_folder_is_one_line_for_every_command(args, via_env, tmp_path,
                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    if via_env:
        monkeypatch.setenv("REPORTGEN_MODELS", "nowhere")
        result = CliRunner().invoke(main, args)
    else:
        result = CliRunner().invoke(main, ["--models-dir", "nowhere", *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("Error: Models folder nowhere does not exist")
    assert str(tmp_path / "nowhere") in lines[0] and "Fix: " in lines[0]
    assert "No model matches" not in lines[0]
    assert not (tmp_path / "nowhere").exists() and not (tmp_path / "site").exists()


def test_models_glob_takes_several_patterns_separated_by_commas():
    from reportgen.catalog import Catalog

    catalog = Catalog("models")
    names = [e.name for e in catalog.match("MNIST,MNIST_Demo, MNIST_EM")]
    assert names == sorted(names) and set(names) == {"MNIST", "MNIST_Demo", "MNIST_EM"}
    both = {e.name for e in catalog.match("MNIST40_Conv*,MNIST_EM")}
    assert both == {"MNIST40_ConvNet_Avg", "MNIST40_ConvNet_FC", "MNIST_EM"}
    assert [e.name for e in catalog.match("MNIST")] == ["MNIST"]     # a glob, not a prefix
    with pytest.raises(Exception, match="No model matches"):
        catalog.match("NOPE,ALSO_NOPE")


def test_an_error_quoting_a_sentence_ends_it_with_one_full_stop():
    """A received value that is itself a message (ending in '.') is not followed by '..'."""
    from reportgen.errors import ReportgenError

    error = ReportgenError("Nothing was built.", expected="a valid model.",
                           received="Broken: bad params.toml.", fix="fix it.")
    assert error.message == ("Nothing was built. Expected a valid model. Received Broken: bad "
                             "params.toml. Fix: fix it.")


# -- usage errors: one line, with the fix ------------------------------------------------------

@pytest.mark.parametrize("args, message, command", [
    (["train", "MNIST_Demo", "--epochs", "0"],
     "Invalid value for '--epochs': 0 is not in the range x>=1", "main train"),
    (["build", "--eval-images", "many"],
     "Invalid value for '--eval-images': 'many' is not a valid integer range", "main build"),
    (["build", "--bogus"], "No such option '--bogus'", "main build"),
    (["--bogus", "models"], "No such option '--bogus'", "main"),
    (["train"], "Missing argument 'NAME'", "main train"),
    (["nosuch"], "No such command 'nosuch'", "main"),
    (["cache", "clear", "--wait"], "No such option '--wait'. Did you mean '--no-wait'?",
     "main cache clear"),
], ids=lambda a: " ".join(a) if isinstance(a, list) else None)
def test_a_usage_error_is_one_line_naming_the_fix_and_exits_2(args, message, command):
    result = CliRunner().invoke(main, ["--models-dir", "models", *args])
    assert result.exit_code == 2
    assert result.stdout == ""
    stop = "" if message.endswith("?") else "."
    assert result.stderr.splitlines() == [f"Error: {message}{stop} Fix: see `{command} --help`."]


def test_a_command_alone_still_prints_its_help():
    for args in ([], ["cache"]):
        result = CliRunner().invoke(main, args)
        assert "Usage:" in result.output and "Commands:" in result.output
        assert "Error" not in result.output


# -- the rename hint of an invalid folder never names an existing model ------------------------

def test_the_rename_hint_drops_accents_and_never_names_an_existing_model(tmp_path):
    import re

    from reportgen.settings.model_params import SAFE_NAME

    root = tmp_path / "models"
    good = 'dataset = "mnist"\ninput_shape = [28, 28, 1]\n'
    for name in ("MNIST", "MNIST_é", "Modèle", "modele", "Modele_2", "Ünïcode name", "_x_"):
        (root / name).mkdir(parents=True)
        (root / name / "params.toml").write_text(good)
    rows = {r["name"]: r for r in json.loads(CliRunner().invoke(
        main, ["--models-dir", str(root), "models", "--json"]).stdout)}
    hints = {name: re.search(r"to a plain name such as (\S+)\.", row["error"]).group(1)
             for name, row in rows.items() if not row["valid"]}
    assert hints == {"MNIST_é": "MNIST_e", "Modèle": "Modele_3", "Ünïcode name": "Unicode_name",
                     "_x_": "x"}
    existing = {p.name.casefold() for p in root.iterdir()}
    assert all(SAFE_NAME.fullmatch(h) and h.casefold() not in existing for h in hints.values())


# -- files a run writes follow the user's umask ------------------------------------------------

@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002])
def test_history_and_state_files_get_the_permissions_of_any_new_file(tmp_path, umask):
    import os
    import stat

    import numpy as np

    from reportgen.model_folder import ModelFolder, Step
    from reportgen.training.checkpoints import atomic_write_text
    from reportgen.training.run_state import commit_step

    folder = ModelFolder.at(tmp_path / "Tiny")
    folder.path.mkdir()
    previous = os.umask(umask)
    try:
        (tmp_path / "plain.txt").write_text("any file")
        commit_step(folder, Step(1, 2), lambda path: path.write_bytes(b"weights"),
                    [np.zeros(3, np.float32)], {"records": []}, {"seed": 0})
        atomic_write_text(folder.path / "params.toml", "dataset = 'mnist'\n")
    finally:
        os.umask(previous)
    plain = stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode)
    assert plain == 0o666 & ~umask
    written = [folder.history_path, folder.state_path, folder.weights_path(Step(1, 2)),
               folder.path / "params.toml"]
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in written} == {
        p.name: plain for p in written}
    assert sorted(p.name for p in folder.path.iterdir()) == sorted(p.name for p in written)
