"""Compare's table of the models' training runs side by side (README "The site"): data,
training images and --limit, epochs, batch size, learning rate, seed, routing iterations,
trainable parameters, wall time and best validation accuracy beside its chance. Each cell
carries the value its column sorts by (assets/reportgen/sort-table.js); what a run did not
record reads "not recorded" and sorts last.
"""

from __future__ import annotations

from reportgen.pages.charts import chance_line
from reportgen.pages.sitedata import ModelData
from reportgen.pages.views import NOT_RECORDED, duration
from reportgen.results.findings import accuracy_name

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


def runs_table(models_and_links: list[tuple[ModelData, str]]) -> dict:
    """{columns: [{key, title, kind}], rows} of every model (with its overview's URL)."""
    return {"columns": [{"key": k, "title": title, "kind": kind} for k, title, kind in COLUMNS],
            "rows": [run_row(model, href) for model, href in models_and_links]}
