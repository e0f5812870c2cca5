"""`reportgen models`: a table (or JSON) of every model under the models folder.

Invalid model folders (unsafe name, unreadable or invalid params.toml, a model too large for the
machine) are listed too, marked invalid with their reason; they never hide the others. A saved
step whose weights file is damaged (not HDF5, truncated, too few weights: checked without
reading them) or holds weights that are not numbers (NaN, infinity: read once per version of
the file, remembered as the build does) is listed as damaged with its reason, not among the
steps. The listing itself
succeeded, so the exit code stays 0 (`reportgen build` is where an invalid folder counts as a
failure).
"""

from __future__ import annotations

import json

from reportgen.catalog import Catalog
from reportgen.commands.run_group import read_group
from reportgen.console import echo, notice
from reportgen.errors import ReportgenError
from reportgen.model_folder import Step
from reportgen.settings.sweep import differing_settings, setting_text


def _one_line(exc: Exception) -> str:
    if isinstance(exc, ReportgenError):
        return exc.message
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def describe_models(models_dir=None) -> list[dict]:
    """One dict per model folder, sorted by name: name, valid, dataset, params (trainable),
    steps (the loadable ones), damaged_steps ({step, reason, val_accuracy, after_last} of each
    damaged weights file), latest (the last loadable step's) and best (of the loadable steps)
    val accuracy, group (a run of a group: its group.json, {group, base, settings, seed}; else
    None), error (the one-line reason, or None)."""
    from reportgen.capsnet.param_count import count_trainable_params
    from reportgen.commands.work_folder import DIGESTS_FILE
    from reportgen.engine.digests import DigestMemo
    from reportgen.training.checkpoints import nonfinite_weights, weights_file_problem

    catalog = Catalog(models_dir)
    memo = DigestMemo(DIGESTS_FILE)     # what a build learned of each file, and back
    valid, invalid = catalog.scan()
    rows = []
    for entry in valid:
        row = {"name": entry.name, "valid": True, "dataset": None, "params": None, "steps": [],
               "damaged_steps": [], "latest_val_accuracy": None, "best_val_accuracy": None,
               "group": None, "error": None}
        try:  # a valid params.toml can still come with a corrupt history.json
            params = entry.params
            row["dataset"] = params.dataset
            row["params"] = count_trainable_params(params)
            for step in entry.steps:
                path = entry.weights_path(step)
                problem = weights_file_problem(path, row["params"])
                if problem is None:
                    found = memo.fact(path, "nonfinite", nonfinite_weights)
                    problem = None if found is None else f"weights that are not numbers: {found}"
                if problem is None:
                    row["steps"].append(str(step))
                else:
                    row["damaged_steps"].append({"step": str(step), "reason": problem})
            _accuracies(row, entry.history())
        except Exception as exc:  # one model's problem must not hide the others
            row["error"] = _one_line(exc)
        try:   # a damaged group record is said; the model is listed as one of its own
            row["group"] = read_group(entry)
        except ReportgenError as exc:
            row["error"] = row["error"] or exc.message
        rows.append(row)
    for bad in invalid:
        rows.append({"name": bad.name, "valid": False, "dataset": None, "params": None,
                     "steps": [], "damaged_steps": [], "latest_val_accuracy": None,
                     "best_val_accuracy": None, "group": None,
                     "error": bad.reason})
    memo.save()
    return sorted(rows, key=lambda r: r["name"])


def _accuracies(row: dict, history: list[dict]) -> None:
    """The row's accuracies are those of its loadable steps: the latest that of the last
    loadable step (None when its record has none), the best the best of the loadable steps.
    A damaged step saved after it keeps its own accuracy, on its damaged-step entry
    (`val_accuracy`, and `after_last`), so the row never pairs one step with another's."""
    accuracy = {r.get("step"): r["val_accuracy"] for r in history
                if isinstance(r.get("val_accuracy"), (int, float))}
    loadable = [accuracy[s] for s in row["steps"] if s in accuracy]
    if loadable:
        row["best_val_accuracy"] = max(loadable)
    if row["steps"]:
        row["latest_val_accuracy"] = accuracy.get(row["steps"][-1])
    last = Step.parse(row["steps"][-1]) if row["steps"] else None
    for damaged in row["damaged_steps"]:
        damaged["val_accuracy"] = accuracy.get(damaged["step"])
        damaged["after_last"] = last is None or Step.parse(damaged["step"]) > last


def _setting_text(row: dict, key: str) -> str:
    """A row's value of a group's differing setting ("-": not a run that sets it)."""
    settings = (row.get("group") or {}).get("settings", {})
    if key not in settings:
        return "-"
    return setting_text(settings[key])


def _damaged_note(damaged: dict, last: str) -> str:
    """Said of a damaged step saved after the row's last loadable step `last`: the row's step
    and accuracy are not its own."""
    if not damaged.get("after_last"):
        return ""
    acc = damaged.get("val_accuracy")
    own = f", val acc {acc:.4f}" if acc is not None else ""
    where = f"after the last loadable step {last}" if last != "-" else "no loadable step"
    return f" (saved {where}{own}; not the row's)"


def run_models(models_dir, as_json: bool) -> None:
    rows = describe_models(models_dir)
    if as_json:
        echo(json.dumps(rows, indent=2))
        return
    if not rows:
        echo("No models found (a model is a folder with a params.toml).")
        return
    w = max(20, *(len(r["name"]) for r in rows))       # the longest name sets the column
    d = max(14, *(len(str(r.get("dataset") or "")) for r in rows))
    # the settings that differ between the runs of groups, a column each, first
    settings = differing_settings([r["group"] for r in rows])
    shown = {key: [_setting_text(r, key) for r in rows] for key in settings}
    widths = {key: max(len(key), *map(len, shown[key])) for key in settings}
    header = (f"{'model':<{w}} " + "".join(f"{k:>{widths[k]}} " for k in settings) +
              f"{'dataset':<{d}} {'params':>12} {'steps':>6} {'last step':>10} {'val acc':>8}")
    echo(header)
    echo("-" * len(header))
    for i, r in enumerate(rows):
        if not r["valid"]:
            echo(f"{r['name']:<{w}} invalid: {r['error']}")
            continue
        if r["params"] is None:
            echo(f"{r['name']:<{w}} error: {r['error']}")
            continue
        acc = f"{r['latest_val_accuracy']:.4f}" if r["latest_val_accuracy"] is not None else "-"
        last = r["steps"][-1] if r["steps"] else "-"
        differ = "".join(f"{shown[k][i]:>{widths[k]}} " for k in settings)
        echo(f"{r['name']:<{w}} {differ}{r['dataset']:<{d}} {r['params']:>12,} "
             f"{len(r['steps']):>6} {last:>10} {acc:>8}")
        for damaged in r["damaged_steps"]:
            echo(f"{'':<{w}} damaged step {damaged['step']}{_damaged_note(damaged, last)}: "
                 f"{damaged['reason']}")
        if r["error"]:
            echo(f"{'':<{w}} error: {r['error']}")
    damaged = sum(len(r["damaged_steps"]) for r in rows)
    if damaged:
        notice(f"{damaged} saved step{'s are' if damaged > 1 else ' is'} damaged (reason above): "
               "not counted among the steps and cannot be loaded; copy the weights file again "
               "or delete it.")
    bad = sum(not r["valid"] for r in rows)
    if bad:
        notice(f"{bad} model folder{'s are' if bad > 1 else ' is'} invalid (reason above) and "
               "cannot be trained or built; the others are unaffected.")
