"""Compare's table of the models' training runs side by side (README "The site"): data,
training images and --limit, epochs, batch size, learning rate, seed, routing iterations,
trainable parameters, wall time and best validation accuracy beside its chance. Each cell
carries the value its column sorts by (assets/reportgen/sort-table.js); what a run did not
record reads "not recorded" and sorts last.

Runs of a group (`reportgen train NAME --seeds/--sweep`, their ModelData.group) put the
settings that differ between them first: a column per such setting right after the model (an
existing column moved there when it shows that setting: the seed, the routing iterations, ...),
and the rows of a group together, in the order of those settings.
"""

from __future__ import annotations

from reportgen.pages.charts import chance_line
from reportgen.pages.sitedata import ModelData
from reportgen.pages.views import NOT_RECORDED, duration
from reportgen.results.findings import accuracy_name
from reportgen.settings.sweep import differing_settings, setting_text

COLUMNS = (("model", "Model", "text"), ("data", "Data", "text"),
           ("images", "Training images", "number"), ("epochs", "Epochs", "number"),
           ("batch", "Batch", "number"), ("rate", "Learning rate", "number"),
           ("seed", "Seed", "number"), ("routing", "Routing iterations", "number"),
           ("params", "Parameters", "number"), ("time", "Wall time", "number"),
           ("best", "Best val. accuracy", "number"))


def _cell(value, text: str | None = None, note: str = "") -> dict:
    """{text, sort, note, recorded}: what a cell shows and the value it sorts by."""
    if value is None:
        return {"text": NOT_RECORDED, "sort": "", "note": note, "recorded": False}
    return {"text": text if text is not None else str(value), "sort": value, "note": note,
            "recorded": True}


def run_row(model: ModelData, overview: str) -> dict:
    """One model's row: {name, href, cells: {column: cell}}."""
    t = model.training or {}
    images, limit = t.get("training_images"), t.get("limit")
    epochs, trained = t.get("epochs"), t.get("epochs_trained")
    rate, wall = t.get("learning_rate"), t.get("wall_seconds")
    best = model.best_val_accuracy
    chance, _ = chance_line(model)
    iterations = model.routing_iterations
    cells = {
        "model": _cell(model.name),
        "data": _cell(t.get("data") or t.get("dataset") or model.dataset or None,
                      note=t.get("dataset") if t.get("data") else ""),
        "images": _cell(images, f"{images:,}" if isinstance(images, int) else None,
                        note=f"--limit {limit:,}" if isinstance(limit, int) else ""),
        "epochs": _cell(trained if trained is not None else epochs,
                        f"{trained} of {epochs}" if epochs is not None and trained is not None
                        and trained != epochs else None),
        "batch": _cell(t.get("batch_size")),
        "rate": _cell(rate, f"{rate:g}" if isinstance(rate, (int, float)) else None),
        "seed": _cell(t.get("seed")),
        "routing": {"text": str(iterations) if iterations else "no iterative routing",
                    "sort": iterations or 0, "note": "", "recorded": True},
        "params": _cell(model.params, f"{model.params:,}" if isinstance(model.params, int)
                        else None),
        "time": _cell(wall, duration(wall) if isinstance(wall, (int, float)) else None),
        "best": _cell(best, f"{100 * best:.2f}%" if isinstance(best, (int, float)) else None,
                      note=f"{accuracy_name(model.labels_per_image)}; chance "
                           f"{100 * chance:.1f}%"),
    }
    return {"name": model.name, "href": overview, "cells": cells}


# a group's setting that a column above already shows (its values are the run's own)
_SHOWN_BY = {"seed": "seed", "class_caps.routing_iterations": "routing",
             "training.learning_rate": "rate", "training.batch_size": "batch",
             "training.epochs": "epochs"}
_SETTING = "setting:"          # the key prefix of a setting's own column


def runs_table(models_and_links: list[tuple[ModelData, str]]) -> dict:
    """{columns: [{key, title, kind}], rows} of every model (with its overview's URL)."""
    columns = [{"key": k, "title": title, "kind": kind} for k, title, kind in COLUMNS]
    rows = [run_row(model, href) for model, href in models_and_links]
    settings = differing_settings([model.group for model, _ in models_and_links])
    groups = seed_group_rows([model for model, _ in models_and_links])
    if not settings:
        return {"columns": columns, "rows": rows, "groups": groups}
    first = []
    for key in settings:
        shown = _SHOWN_BY.get(key)
        if shown is not None:
            first.append(next(c for c in columns if c["key"] == shown))
            continue
        values = [(m.group or {}).get("settings", {}).get(key, None) for m, _ in models_and_links]
        kind = "number" if all(isinstance(v, (int, float)) and not isinstance(v, bool)
                               for v in values if v is not None) else "text"
        first.append({"key": _SETTING + key, "title": key, "kind": kind})
        for row, value in zip(rows, values):
            row["cells"][_SETTING + key] = _setting_cell(value)
    rest = [c for c in columns if c not in first]
    models = [model for model, _ in models_and_links]
    first_at: dict[str, int] = {}
    for i, model in enumerate(models):
        if model.group:
            first_at.setdefault(model.group.get("group", ""), i)
    order = sorted(range(len(rows)),
                   key=lambda i: _group_order(models[i], settings, i, first_at))
    return {"columns": [rest[0], *first, *rest[1:]], "rows": [rows[i] for i in order],
            "groups": groups}


def seed_group_rows(models: list[ModelData]) -> list[dict]:
    """[{name, seeds, runs, latest, best}] of each seed group (reportgen.results.seed_groups):
    the latest and the best validation accuracy as the mean over its seeds with the 95% t
    interval over them, the number of seeds stated."""
    from reportgen.results.intervals import ci_text
    from reportgen.results.seed_groups import seed_groups, seed_interval

    def over_seeds(values) -> str:
        found = seed_interval(values)
        if found is None:
            return NOT_RECORDED
        return f"{100 * found.value:.2f}% ({ci_text(found, 100, 2, '%')})"

    return [{"name": group.name, "seeds": len(group.members),
             "runs": [m.name for m in group.members],
             "latest": over_seeds([m.latest_val_accuracy for m in group.members]),
             "best": over_seeds([m.best_val_accuracy for m in group.members])}
            for group in seed_groups(models)]


def _setting_cell(value) -> dict:
    if value is None:       # a model of its own, or a group that keeps this setting
        return {"text": "", "sort": "", "note": "", "recorded": True}
    return _cell(value, setting_text(value))


def _group_order(model: ModelData, settings: list[str], position: int,
                 first_at: dict[str, int]) -> tuple:
    """A group's rows together, where its first run was, in the order of their settings;
    every other row where it was."""
    group = model.group
    if not group:
        return (position, ())
    values = group.get("settings", {})
    return (first_at[group.get("group", "")], tuple(_sortable(values.get(k)) for k in settings))


def _sortable(value) -> tuple:
    if value is None:
        return (0, 0, "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (1, value, "")
    return (2, 0, str(value))
