"""Groups of runs (`reportgen train NAME --seeds N --sweep KEY=V1,V2`): the options are parsed
and refused before anything is written, each run is a model folder of its own holding the
base's parameters with its settings and a record of its group, a killed group continues where
it stopped, and the listings put the settings that differ first."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from history_values import approx_or_none
from reportgen.catalog import Catalog
from reportgen.cli import main
from reportgen.commands import run_group
from reportgen.errors import ReportgenError
from reportgen.model_folder import ModelFolder
from reportgen.settings import sweep
from reportgen.settings.model_params import load_model_params, parse_model_params
from test_training import TINY_TOML, _tiny_data

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def models_dir(tmp_path) -> Path:
    root = tmp_path / "models"
    (root / "Tiny").mkdir(parents=True)
    (root / "Tiny" / "params.toml").write_text(TINY_TOML.format(data=_tiny_data(
        tmp_path / "toy.npz")))
    return root


def _tiny_raw(models_dir: Path) -> dict:
    return tomllib.loads((models_dir / "Tiny" / "params.toml").read_text())


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


# -- the options ------------------------------------------------------------------------------
def test_seeds_are_a_count_or_a_list():
    assert sweep.parse_seeds("3") == [0, 1, 2]
    assert sweep.parse_seeds("4,0,7") == [4, 0, 7]
    assert sweep.parse_seeds("5,") == [5]
    for bad, said in (("0", "not a number of seeds"), ("-1", "not a number"),
                      ("a", "not a number"), ("1,-2", "not a number"), ("2,2", "seed 2 twice")):
        with pytest.raises(ReportgenError, match=said) as caught:
            sweep.parse_seeds(bad)
        assert "\n" not in caught.value.message and "Fix:" in caught.value.message


def test_sweep_values_are_read_as_toml_and_keys_checked(models_dir):
    raw = _tiny_raw(models_dir)
    assert sweep.parse_sweep("class_caps.routing_iterations=1,2,3", raw) == \
        ("class_caps.routing_iterations", [1, 2, 3])
    assert sweep.parse_sweep("training.learning_rate=1e-3, 3e-4", raw) == \
        ("training.learning_rate", [0.001, 0.0003])
    assert sweep.parse_sweep("decoder.units=[16, 8],[32]", raw) == ("decoder.units",
                                                                   [[16, 8], [32]])
    assert sweep.parse_sweep("class_caps.routing=none,dynamic", raw)[1] == ["none", "dynamic"]
    assert sweep.parse_sweep("conv[0].filters=4,8", raw)[0] == "conv[0].filters"
    # a key as one might guess it: refused, naming the key params.toml has
    for guess in ("routing.iterations", "routing_iterations"):
        with pytest.raises(ReportgenError) as caught:
            sweep.parse_sweep(f"{guess}=1,2", raw)
        assert f"'{guess}' is not a params.toml key" in caught.value.message
        assert "did you mean class_caps.routing_iterations" in caught.value.message
    for bad, said in (("conv[1].filters=4", "not a params.toml key"),   # Tiny has one conv
                      ("seed=1,2", "--seeds"), ("class_caps.dims", "names no values"),
                      ("class_caps.dims=4,,8", "empty value"), ("class_caps.dims=4,4", "twice"),
                      ("em.routing_iterations=2", "not a params.toml key")):  # another family's
        with pytest.raises(ReportgenError, match=said):
            sweep.parse_sweep(bad, raw)


_OPTIONS = {"epochs": None, "batch_size": None, "save_every": None, "learning_rate": None,
            "data": None, "seed": None, "limit": None, "until_accuracy": None, "resume": False,
            "fresh": False}      # `reportgen train`'s options as the command line passes them


def test_a_value_params_toml_refuses_is_said_before_anything_is_written(models_dir):
    """(run_train as the command line calls it, without its TensorFlow import.)"""
    from reportgen.commands.train import run_train

    before = _tree(models_dir.parent)
    for args, said in (
            ({"sweeps": ["class_caps.routing_iterations=2,0"]},
             "class_caps.routing_iterations=0 is refused.*Expected a positive integer"),
            ({"sweeps": ["class_caps.routing=dynamic,bogus"]}, "Expected one of \\['dynamic'"),
            ({"sweeps": ["conv[0].kernel_size=3,40"]}, "conv\\[0\\].kernel_size"),
            ({"seeds": "2", "seed": 1}, "--seed and --seeds exclude each other"),
            ({"sweeps": ["training.learning_rate=0.1"], "learning_rate": 0.2},
             "--learning-rate and --sweep training.learning_rate"),
            ({"seeds": "2", "fresh": True}, "cannot take --fresh"),
            ({"seeds": "2", "scheduler": "local:1"}, "cannot take --scheduler"),
            ({"seeds": "2", "sweeps": ["class_caps.dims=4", "class_caps.dims=6"]},
             "class_caps.dims is given twice")):
        group = {k: args.pop(k) for k in ("seeds", "sweeps", "scheduler") if k in args}
        with pytest.raises(ReportgenError) as caught:
            run_train(models_dir, "Tiny", {**_OPTIONS, **args}, group.get("scheduler"),
                      group.get("seeds"), tuple(group.get("sweeps", ())))
        message = caught.value.message
        assert "\n" not in message and "Fix:" in message and re.search(said, message), message
    assert _tree(models_dir.parent) == before


# -- the plan ---------------------------------------------------------------------------------
def test_each_run_is_the_base_with_its_settings_and_records_its_group(models_dir):
    base = Catalog(models_dir).get("Tiny")
    runs = run_group.plan_group(models_dir, base, [0, 1],
                                ["class_caps.routing_iterations=1,2"], None)
    assert [r.name for r in runs] == ["Tiny--routing_iterations-1--seed-0",
                                      "Tiny--routing_iterations-2--seed-0",
                                      "Tiny--routing_iterations-1--seed-1",
                                      "Tiny--routing_iterations-2--seed-1"]
    assert [r.seed for r in runs] == [0, 0, 1, 1]
    assert not any(r.folder.path.exists() for r in runs)        # planning writes nothing
    assert run_group.create_runs(runs) == runs
    own = base.params.to_dict()
    catalog = Catalog(models_dir)
    for run in runs:
        entry = catalog.get(run.name)                # a model the catalog accepts
        theirs = entry.params.to_dict()
        iterations = run.settings["class_caps.routing_iterations"]
        assert theirs["class_caps"]["routing_iterations"] == iterations
        theirs["class_caps"]["routing_iterations"] = own["class_caps"]["routing_iterations"]
        assert theirs == own                         # nothing else differs from the base
        assert run_group.read_group(entry) == {
            "format": 1, "group": "Tiny over class_caps.routing_iterations, seed",
            "base": "Tiny", "seed": run.seed,
            "settings": {"class_caps.routing_iterations": iterations, "seed": run.seed}}
    assert [e.name for e in catalog.match("Tiny--*")] == sorted(r.name for r in runs)
    # planned again, the folders are this group's runs: nothing is refused or rewritten
    again = run_group.plan_group(models_dir, base, [0, 1],
                                 ["class_caps.routing_iterations=1,2"], None)
    assert run_group.create_runs(again) == []


def test_a_folder_the_group_did_not_make_or_of_other_settings_is_never_written(models_dir):
    base = Catalog(models_dir).get("Tiny")
    mine = models_dir / "Tiny--seed-1"
    mine.mkdir()
    (mine / "notes.txt").write_text("my own")
    before = _tree(models_dir)
    with pytest.raises(ReportgenError, match="is not a run of a group, so it is not written"):
        run_group.plan_group(models_dir, base, [0, 1], [], None)
    assert _tree(models_dir) == before
    (mine / "notes.txt").unlink()
    mine.rmdir()
    runs = run_group.plan_group(models_dir, base, [0, 1], [], None)
    run_group.create_runs(runs)
    # the base edited since: the run's parameters are no longer the base's with its seed
    path = models_dir / "Tiny" / "params.toml"
    path.write_text(path.read_text().replace("dims = 4\n[decoder]", "dims = 6\n[decoder]"))
    before = _tree(models_dir)
    with pytest.raises(ReportgenError, match="parameters differ from Tiny's.*class_caps"):
        run_group.plan_group(models_dir, Catalog(models_dir).get("Tiny"), [0, 1], [], None)
    # a run is not a base of groups of its own
    with pytest.raises(ReportgenError, match="itself a run of a group"):
        run_group.plan_group(models_dir, Catalog(models_dir).get("Tiny--seed-0"), [0, 1], [],
                             None)
    assert _tree(models_dir) == before


def test_a_group_killed_while_writing_a_run_folder_goes_on(models_dir):
    """Killed after making a run's folder, within its group.json's write (a temporary left)
    or before its params.toml: the next start finishes the folder."""
    base = Catalog(models_dir).get("Tiny")
    (models_dir / "Tiny--seed-0").mkdir()
    (models_dir / "Tiny--seed-0" / ".tmp-ab12cd34.json").write_text("{")
    runs = run_group.plan_group(models_dir, base, [0, 1], [], None)
    run_group.create_runs(runs)
    (models_dir / "Tiny--seed-1" / "params.toml").unlink()
    again = run_group.plan_group(models_dir, base, [0, 1], [], None)
    assert [r.name for r in run_group.create_runs(again)] == ["Tiny--seed-1"]
    assert Catalog(models_dir).get("Tiny--seed-1").params == base.params


def test_a_damaged_group_record_is_said_and_the_model_still_listed(models_dir):
    from reportgen.commands.models import describe_models

    base = Catalog(models_dir).get("Tiny")
    run_group.create_runs(run_group.plan_group(models_dir, base, [0], [], None))
    (models_dir / "Tiny--seed-0" / "group.json").write_text('{"group": 1}')
    row = {r["name"]: r for r in describe_models(models_dir)}["Tiny--seed-0"]
    assert row["group"] is None and row["params"] == 6976
    assert "group.json is not a group record" in row["error"]
    with pytest.raises(ReportgenError, match="group.json is not a group record"):
        run_group.plan_group(models_dir, base, [0], [], None)


def test_a_run_name_too_long_for_a_model_name_is_refused(tmp_path):
    root = tmp_path / "models"
    name = "M" * 60
    (root / name).mkdir(parents=True)
    (root / name / "params.toml").write_text(TINY_TOML.format(data="mnist"))
    with pytest.raises(ReportgenError, match="not a model name.*shorter name"):
        run_group.plan_group(root, ModelFolder(name, root / name), [0, 1], [], None)
    assert sorted(p.name for p in root.iterdir()) == [name]


def test_every_bundled_params_toml_survives_the_writer():
    """The writer of a run's params.toml says every value of every bundled model (family
    tables, arrays of tables, strings) as TOML reads it back."""
    for path in sorted((ROOT / "models").glob("*/params.toml")):
        raw = tomllib.loads(path.read_text())
        text = run_group.toml_text(raw)
        assert tomllib.loads(text) == raw, path
        assert parse_model_params(tomllib.loads(text)) == load_model_params(path), path


# -- the listings -----------------------------------------------------------------------------
def _model(name: str, group: dict | None = None, seed: int | None = None, routing: int = 3):
    from reportgen.pages.sitedata import ModelData

    return ModelData(name=name, dataset="d", description="", params=1, class_names=["a"],
                     architecture=[], history=[], steps=[], inputs=[],
                     training={"seed": seed}, routing_iterations=routing, group=group)


def _group(settings: dict) -> dict:
    return {"group": "B over " + ", ".join(settings), "base": "B", "settings": settings,
            "seed": settings.get("seed", 0)}


def test_the_runs_table_puts_the_settings_that_differ_first():
    from reportgen.pages.runs import COLUMNS, runs_table

    alone = _model("A")
    runs = [_model(f"B--m_plus-{m}--seed-{s}", _group({"loss.m_plus": m, "seed": s}), seed=s)
            for s in (1, 0) for m in (0.95, 0.9)]
    other = _model("C")
    table = runs_table([(alone, "a"), *[(m, m.name) for m in runs], (other, "c")])
    keys = [c["key"] for c in table["columns"]]
    assert keys[:3] == ["model", "setting:loss.m_plus", "seed"]
    assert sorted(keys[3:]) == sorted(k for k, _, _ in COLUMNS if k not in ("model", "seed"))
    assert table["columns"][1] == {"key": "setting:loss.m_plus", "title": "loss.m_plus",
                                   "kind": "number"}
    # the group's rows together where its first run was, in the order of their settings
    assert [r["name"] for r in table["rows"]] == [
        "A", "B--m_plus-0.9--seed-0", "B--m_plus-0.9--seed-1", "B--m_plus-0.95--seed-0",
        "B--m_plus-0.95--seed-1", "C"]
    cells = [r["cells"]["setting:loss.m_plus"] for r in table["rows"]]
    assert [c["text"] for c in cells] == ["", "0.9", "0.9", "0.95", "0.95", ""]
    assert [c["sort"] for c in cells[1:5]] == [0.9, 0.9, 0.95, 0.95]
    # without groups the table is as it always was
    plain = runs_table([(alone, "a"), (other, "c")])
    assert [c["key"] for c in plain["columns"]] == [k for k, _, _ in COLUMNS]
    # a setting a column already shows moves that column forward instead of repeating it
    routed = [_model(f"B--routing_iterations-{i}", _group(
        {"class_caps.routing_iterations": i}), routing=i) for i in (1, 2)]
    keys = [c["key"] for c in runs_table([(m, m.name) for m in routed])["columns"]]
    assert keys[:2] == ["model", "routing"] and keys.count("routing") == 1


def test_models_lists_a_groups_differing_settings_first(models_dir):
    base = Catalog(models_dir).get("Tiny")
    run_group.create_runs(run_group.plan_group(models_dir, base, None,
                                               ["class_caps.dims=4,6", "class_caps.routing=none"],
                                               None))
    result = CliRunner().invoke(main, ["--models-dir", str(models_dir), "models"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:4] == ["model", "class_caps.dims", "class_caps.routing", "dataset"]
    rows = {line.split()[0]: line.split()[1:3] for line in lines[2:]}
    assert rows == {"Tiny": ["-", "-"], "Tiny--dims-4--routing-none": ["4", "none"],
                    "Tiny--dims-6--routing-none": ["6", "none"]}
    listed = json.loads(CliRunner().invoke(main, ["--models-dir", str(models_dir), "models",
                                                  "--json"]).output)
    groups = {r["name"]: r["group"] for r in listed}
    assert groups["Tiny"] is None
    assert groups["Tiny--dims-6--routing-none"]["settings"] == {"class_caps.dims": 6,
                                                                "class_caps.routing": "none"}


# -- training a group -------------------------------------------------------------------------
def _interrupt(monkeypatch, model: str, step: str) -> None:
    """Ctrl-C right after `model` saved `step` (the trainer stops as under a kill)."""
    from reportgen.training import trainer

    commit = trainer.commit_step

    def commit_then_stop(entry, saved, *args, **kwargs):
        commit(entry, saved, *args, **kwargs)
        if entry.name == model and str(saved) == step:
            raise KeyboardInterrupt

    monkeypatch.setattr(trainer, "commit_step", commit_then_stop)


@pytest.mark.slow
def test_a_seed_group_trains_stops_and_continues_where_it_stopped(models_dir, monkeypatch,
                                                                  tmp_path_factory):
    from trained_tiny import trained_tiny

    args = ["--models-dir", str(models_dir), "train", "Tiny", "--seeds", "2"]
    _interrupt(monkeypatch, "Tiny--seed-1", "1-2")
    first = CliRunner().invoke(main, args)
    monkeypatch.undo()
    assert first.exit_code == 130, first.output
    assert "Run 1 of 2: Tiny--seed-0 (seed = 0): training." in first.output
    assert "Run 2 of 2: Tiny--seed-1 (seed = 1): training." in first.output
    stopped = ModelFolder.at(models_dir / "Tiny--seed-1")
    assert [r["step"] for r in stopped.history()] == ["0-0", "1-2"]
    done = ModelFolder.at(models_dir / "Tiny--seed-0")
    finished = (models_dir / "Tiny--seed-0" / "history.json").read_bytes()

    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0, again.output
    assert "Run 1 of 2: Tiny--seed-0 (seed = 0): finished at step 1-5, skipped." in again.output
    assert "Run 2 of 2: Tiny--seed-1 (seed = 1): continuing from step 1-2." in again.output
    assert (models_dir / "Tiny--seed-0" / "history.json").read_bytes() == finished
    resumed = stopped.history()
    assert [r["step"] for r in resumed] == ["0-0", "1-2", "1-4", "1-5"]
    # each seed trains as a single run with that seed would: reproducible, and the seeds differ
    for seed, run in ((0, done.history()), (1, resumed)):
        alone = ModelFolder.at(trained_tiny(tmp_path_factory, seed=seed)).history()
        for mine, reference in zip(run, alone, strict=True):
            assert mine["step"] == reference["step"]
            for key in ("loss", "train_accuracy", "val_accuracy"):
                assert mine[key] == approx_or_none(reference[key], rel=1e-5), (seed, key)
    assert done.history()[1]["loss"] != pytest.approx(resumed[1]["loss"], rel=1e-3)


@pytest.mark.slow
def test_a_sweep_killed_with_sigkill_continues_with_one_command(models_dir):
    """The real command killed (kill -9) in its second run, then run again as it was typed."""
    import os
    import signal
    import subprocess
    import sys
    import time

    command = [sys.executable, "-m", "reportgen", "--models-dir", str(models_dir), "train",
               "Tiny", "--sweep", "class_caps.routing_iterations=1,2"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    second = models_dir / "Tiny--routing_iterations-2"
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    deadline = time.monotonic() + 600
    while not (second / "1-2.weights.h5").exists():
        assert proc.poll() is None, proc.stdout.read()[-2000:]
        assert time.monotonic() < deadline, "the second run never saved step 1-2"
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGKILL)
    first_out, _ = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert "Run 2 of 2: Tiny--routing_iterations-2 (class_caps.routing_iterations = 2): " \
           "training." in first_out
    first = models_dir / "Tiny--routing_iterations-1"
    finished = _tree(first)

    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "Run 1 of 2: Tiny--routing_iterations-1 (class_caps.routing_iterations = 1): " \
           "finished at step 1-5, skipped." in again.stdout
    assert re.search(r"Run 2 of 2: Tiny--routing_iterations-2 \(class_caps.routing_iterations "
                     r"= 2\): continuing from step \d-\d\.", again.stdout), again.stdout
    assert _tree(first) == finished
    for folder in (first, second):
        records = ModelFolder.at(folder).history()
        assert [r["step"] for r in records] == ["0-0", "1-2", "1-4", "1-5"]
    assert not [p for p in second.iterdir() if p.name.startswith(".tmp")]
    assert Catalog(models_dir).get(second.name).params.class_caps.routing_iterations == 2
