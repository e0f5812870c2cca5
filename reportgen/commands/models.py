"""`reportgen models`: a table (or JSON) of every model under the models folder."""

from __future__ import annotations

import json

from reportgen.catalog import Catalog
from reportgen.console import echo
from reportgen.errors import ReportgenError


def describe_models(models_dir=None) -> list[dict]:
    """One dict per model: name, dataset, params (trainable), steps, latest/best val accuracy."""
    from reportgen.capsnet.param_count import count_trainable_params

    rows = []
    catalog = Catalog(models_dir)
    for name in catalog.names():
        entry = catalog.get(name)
        row = {"name": name, "dataset": None, "params": None, "steps": [],
               "latest_val_accuracy": None, "best_val_accuracy": None, "error": None}
        try:
            params = entry.params
            row["dataset"] = params.dataset
            row["params"] = count_trainable_params(params)
            row["steps"] = [str(s) for s in entry.steps]
            accs = [r["val_accuracy"] for r in entry.history() if r.get("val_accuracy") is not None]
            if accs:
                row["latest_val_accuracy"], row["best_val_accuracy"] = accs[-1], max(accs)
        except ReportgenError as exc:
            row["error"] = exc.what
        rows.append(row)
    return rows


def run_models(models_dir, as_json: bool) -> None:
    rows = describe_models(models_dir)
    if as_json:
        echo(json.dumps(rows, indent=2))
        return
    if not rows:
        echo("No models found (a model is a folder with a params.toml).")
        return
    header = f"{'model':<20} {'dataset':<14} {'params':>12} {'steps':>6} {'last step':>10} {'val acc':>8}"
    echo(header)
    echo("-" * len(header))
    for r in rows:
        if r["error"]:
            echo(f"{r['name']:<20} error: {r['error']}")
            continue
        acc = f"{r['latest_val_accuracy']:.4f}" if r["latest_val_accuracy"] is not None else "-"
        last = r["steps"][-1] if r["steps"] else "-"
        echo(f"{r['name']:<20} {r['dataset']:<14} {r['params']:>12,} {len(r['steps']):>6} "
             f"{last:>10} {acc:>8}")
