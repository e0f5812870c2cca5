"""A group of runs of one model (`reportgen train NAME --seeds 3 --sweep KEY=V1,V2`): each run
its own model folder beside NAME, named by the settings it changes
(`NAME--routing_iterations-2--seed-1`, so `build --models 'NAME--*'` takes the group), holding
the base's params.toml with those settings set and group.json: the group, the base model and
the settings that differ from the base's (the seed among them for a group over seeds).

Everything is planned and checked before anything is written: every run's params.toml must be
one the catalog accepts, every name a model name, and a folder that exists already must be a
run of this plan (its group.json and params.toml the ones it would get), so a folder the
command did not make is never written into. The training itself (one run after another, each
resumed like a single `reportgen train --resume`) is reportgen.commands.train's.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reportgen.errors import ReportgenError
from reportgen.model_folder import GROUP_FILE, ModelFolder, Step, is_temporary
from reportgen.settings import sweep
from reportgen.settings.model_params import ModelParams, check_model_name, printable_name

GROUP_FORMAT = 1
SEPARATOR = "--"                 # between the base's name and each setting in a run's name


@dataclass(frozen=True)
class PlannedRun:
    """One run of a group: its folder, the settings that differ from the base's, the seed it
    trains with, its params (validated) and the files it gets."""

    folder: ModelFolder
    settings: dict[str, Any]
    seed: int
    params: ModelParams
    params_text: str
    record: dict

    @property
    def name(self) -> str:
        return self.folder.name

    def words(self) -> str:
        """The settings that differ, as `key = value`."""
        return ", ".join(f"{k} = {json.dumps(v)}" for k, v in self.settings.items())


def read_group(folder: ModelFolder) -> dict | None:
    """The folder's group.json ({group, base, settings, seed}), None when it has none; a
    damaged one is an error naming it."""
    path = folder.group_path
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        problem = str(exc).splitlines()[0]
        data = None
    else:
        problem = None
    if problem is None and not (isinstance(data, dict) and isinstance(data.get("group"), str)
                                and isinstance(data.get("base"), str)
                                and isinstance(data.get("settings"), dict)):
        problem = "not an object with 'group', 'base' and 'settings'"
    if problem:
        raise ReportgenError(f"{printable_name(str(path))} is not a group record.",
                             received=problem,
                             fix=f"Restore it, or delete {GROUP_FILE} to make the folder a "
                                 "model of its own")
    return data


def plan_group(root: Path, base: ModelFolder, seeds: list[int] | None, sweeps: list[str],
               seed_option: int | None) -> list[PlannedRun]:
    """The runs of a group over `seeds` (None: no seed axis; the runs train with
    `seed_option`, else 0) and the `sweeps` (KEY=V1,V2 texts), checked against what exists
    under `root`; nothing is written. Runs with seeds come seed by seed, each seed over every
    combination of the sweeps (the first sweep outermost)."""
    if read_group(base) is not None:
        raise ReportgenError(f"{base.name} is itself a run of a group.",
                             fix=f"sweep its base model instead "
                                 f"(`reportgen train {read_group(base)['base']} ...`)")
    if seeds is not None and seed_option is not None:
        raise ReportgenError("--seed and --seeds exclude each other.",
                             fix="give the group's seeds with --seeds alone (--seeds 0,1,2)")
    raw = tomllib.loads(base.params_path.read_text(encoding="utf-8"))
    axes = [sweep.parse_sweep(text, raw) for text in sweeps]
    keys = [key for key, _ in axes]
    for i, key in enumerate(keys):
        if key in keys[:i]:
            raise ReportgenError(f"--sweep {key} is given twice.",
                                 fix=f"give every value of {key} in one --sweep "
                                     f"({key}=V1,V2,...)")
    labels = _labels(keys)
    group = f"{base.name} over {', '.join(keys + ([sweep.SEED_KEY] if seeds is not None else []))}"
    runs, names = [], {}
    for seed in (seeds if seeds is not None else [None]):
        for values in itertools.product(*(values for _, values in axes)):
            given = dict(zip(keys, values))
            params = sweep.apply_settings(raw, given, str(base.params_path))
            settings = {key: sweep.value_of(params, key) for key in keys}
            parts = [f"{labels[k]}-{_name_text(v)}" for k, v in settings.items()]
            if seed is not None:
                settings[sweep.SEED_KEY] = seed
                parts.append(f"{sweep.SEED_KEY}-{seed}")
            name = SEPARATOR.join([base.name, *parts])
            _check_run_name(name, base.name)
            if name in names:
                raise ReportgenError(f"--sweep values {names[name]} and {settings} give one "
                                     f"folder name, {name}.",
                                     fix="sweep over values that differ in their digits")
            names[name] = settings
            folder = ModelFolder(name, root / name)
            _check_footprint(params, folder)
            run_seed = seed if seed is not None else (seed_option or 0)
            record = {"format": GROUP_FORMAT, "group": group, "base": base.name,
                      "settings": settings, "seed": run_seed}
            text = _header(base.name, settings) + toml_text(sweep_document(raw, given))
            runs.append(PlannedRun(folder, settings, run_seed, params, text, record))
    for run in runs:
        _check_existing(run, seed_option)
    return [_with_recorded_seed(run) for run in runs]


def sweep_document(raw: dict, given: dict) -> dict:
    doc = raw
    for key, value in given.items():
        doc = sweep.with_setting(doc, key, value)
    return doc


def create_runs(runs: list[PlannedRun]) -> list[PlannedRun]:
    """Write the folders of the runs that do not exist yet (group.json first: a folder with it
    is the group's, also when a kill came before its params.toml); return those."""
    from reportgen.training.checkpoints import atomic_write_text

    made = []
    for run in runs:
        folder = run.folder
        if not folder.group_path.exists():
            folder.path.mkdir(parents=True, exist_ok=True)
            atomic_write_text(folder.group_path, json.dumps(run.record, indent=1) + "\n")
        if not folder.params_path.exists():
            atomic_write_text(folder.params_path, run.params_text)
            made.append(run)
    return made


def finished_at(folder: ModelFolder, epochs: int | None, batch_size: int | None,
                until_accuracy: float | None) -> Step | None:
    """The run's last saved step when a `train --resume` with these options would train no
    further (its last epoch's last batch saved, or `until_accuracy` reached), else None."""
    from reportgen.training.run_info import training_run

    records = folder.history()
    if not records:
        return None
    last = Step.parse(records[-1]["step"])
    accuracy = records[-1].get("val_accuracy")
    if until_accuracy is not None and accuracy is not None and accuracy >= until_accuracy:
        return last
    facts = training_run(folder)
    images, batch = facts.get("training_images"), batch_size or facts.get("batch_size")
    if not images or not batch:
        return None
    final = Step(epochs or folder.params.training.epochs, math.ceil(images / batch))
    return last if last >= final else None


# -- the checks -------------------------------------------------------------------------------
def _check_existing(run: PlannedRun, seed_option: int | None) -> None:
    """A folder already there must be this run's: made by a group (its group.json) of the same
    base and settings, its params.toml (when written) the one the run would get."""
    folder, path = run.folder, printable_name(str(run.folder.path))
    if not folder.path.exists() or _only_temporaries(folder):
        return
    fix = (f"move {path} aside (it is kept as it is), or sweep other values")
    recorded = read_group(folder)
    if recorded is None:
        raise ReportgenError(f"{path} exists and is not a run of a group, so it is not "
                             "written into.", fix=fix)
    if recorded.get("base") != run.record["base"] or recorded.get("settings") != run.settings:
        raise ReportgenError(f"{path} is a run of {recorded.get('base')} with "
                             f"{recorded.get('settings')}, not of {run.record['base']} with "
                             f"{run.settings}.", fix=fix)
    seed = recorded.get("seed")
    if seed_option is not None and sweep.SEED_KEY not in run.settings and seed != seed_option:
        raise ReportgenError(f"--seed {seed_option} differs from the seed of the run in {path}.",
                             expected=f"--seed {seed} (or no --seed)",
                             received=f"--seed {seed_option}", fix=fix)
    if folder.params_path.exists():
        try:
            mine = folder.params.to_dict()
        except ReportgenError as exc:
            raise ReportgenError(f"{path} holds a run of this group whose parameter file is "
                                 f"refused: {exc.what}", fix=fix) from exc
        wanted = run.params.to_dict()
        if mine != wanted:
            differ = next(k for k in sorted(set(mine) | set(wanted))
                          if mine.get(k) != wanted.get(k))
            raise ReportgenError(f"{path} holds a run whose parameters differ from "
                                 f"{run.record['base']}'s with {run.words()} (in '{differ}': "
                                 f"was the base edited since?).", fix=fix)


def _only_temporaries(folder: ModelFolder) -> bool:
    """A folder empty or holding nothing but reportgen's temporary files: what a group killed
    between making the run's folder and writing its group.json leaves (the trainer's
    recovery deletes the temporaries); nothing in it can be lost."""
    try:
        names = [p.name for p in folder.path.iterdir()]
    except OSError:
        return False
    return folder.path.is_dir() and all(is_temporary(n) for n in names)


def _with_recorded_seed(run: PlannedRun) -> PlannedRun:
    """A run that exists trains on with the seed it recorded (the --seed of its first start)."""
    recorded = read_group(run.folder) if run.folder.group_path.exists() else None
    if recorded is None or not isinstance(recorded.get("seed"), int) or \
            recorded["seed"] == run.seed:
        return run
    return PlannedRun(run.folder, run.settings, recorded["seed"], run.params, run.params_text,
                      {**run.record, "seed": recorded["seed"]})


def _check_run_name(name: str, base: str) -> None:
    try:
        check_model_name(name)
    except ReportgenError as exc:
        raise ReportgenError(f"The run folder name {name} is not a model name ({exc.expected}).",
                             fix=f"rename {base} to a shorter name, or sweep fewer settings "
                                 "at once") from exc


def _check_footprint(params: ModelParams, folder: ModelFolder) -> None:
    from reportgen.capsnet.footprint import check_footprint

    check_footprint(params, printable_name(str(folder.params_path)))


# -- names and files --------------------------------------------------------------------------
def _labels(keys: list[str]) -> dict[str, str]:
    """Each key's part of a run's name: its last part (`routing_iterations`), or all of it
    (`conv0_filters`) when two keys end alike."""
    def last(key: str) -> str:
        return key.rsplit(".", 1)[-1]

    def whole(key: str) -> str:
        return re.sub(r"[^A-Za-z0-9_]+", "_", key).strip("_")

    ends = [last(k) for k in keys]
    return {k: last(k) if ends.count(last(k)) == 1 and last(k) != sweep.SEED_KEY else whole(k)
            for k in keys}


def _name_text(value: Any) -> str:
    """A value as a model name holds it: 2, 0p001 (the point as 'p'), 1e-05, true, none,
    16x8 (a list)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "x".join(_name_text(v) for v in value)
    if isinstance(value, float):
        return repr(value).replace(".", "p").replace("+", "")
    return re.sub(r"[^A-Za-z0-9_]+", "_", str(value)).strip("_") or "_"


def _header(base: str, settings: dict) -> str:
    lines = [f"# A run of a group of {base}: its parameters, with these settings of the run"]
    lines += [f"#   {k} = {json.dumps(v)}" for k, v in settings.items()]
    lines += [f"# (written by `reportgen train {base} --seeds/--sweep`; {GROUP_FILE} records "
              "the group)", ""]
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if not isinstance(value, float) or math.isfinite(value) else \
            ("nan" if math.isnan(value) else ("inf" if value > 0 else "-inf"))
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)   # a valid TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _is_tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def toml_text(doc: dict) -> str:
    """A TOML document holding `doc` (a parsed params.toml): its values, then its tables and
    arrays of tables, at any depth; checked by reading it back."""
    lines: list[str] = []

    def table(prefix: str, values: dict) -> None:
        for key, value in values.items():
            if not isinstance(value, dict) and not _is_tables(value):
                lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
        for key, value in values.items():
            name = f"{prefix}{_toml_key(key)}"
            if isinstance(value, dict):
                lines.extend(["", f"[{name}]"])
                table(f"{name}.", value)
            elif _is_tables(value):
                for item in value:
                    lines.extend(["", f"[[{name}]]"])
                    table(f"{name}.", item)

    table("", doc)
    text = "\n".join(lines).lstrip("\n") + "\n"
    if tomllib.loads(text) != doc:      # a value this writer cannot say: never a wrong file
        raise ValueError("the run's parameters do not survive being written as TOML")
    return text
