"""What the "Capsules vs CNNs" page shows: Gu 2022's Ch.5 Table 1 and Table 5 for the built
models (reportgen/results/capsules_vs_cnns.py computes the rows), formatted beside his
published figures, and the same rows as CSV for a paper. Every score cell carries its baselines:
chance (a column of its own) and the untrained step's value, or words saying that this build did
not analyse the untrained step."""

from __future__ import annotations

import csv
import io

from reportgen.results.capsules_vs_cnns import (ATTACKS, MATCHED_ACCURACY, TABLE5_FACTOR,
                                                TARGET_TRAINED, accuracy_columns, compares,
                                                differences, group_rows, matched_target,
                                                record_from_site, table1, table5)
from reportgen.results.intervals import Interval, ci_text

STEM = "capsules-vs-cnns"
TITLE = "Capsules vs CNNs"


def _pct(value) -> str:
    return "—" if value is None else f"{100 * value:.2f}%"


def _ref_pct(value) -> str:
    """Gu's figures are printed in percent already."""
    return "—" if value is None else f"{value:.2f}%"


def _compact(value) -> str:
    return "—" if value is None else f"{value:.4f}"


NOT_ANALYSED = "not analysed"      # the untrained step (0-0) was not analysed in this build


def _untrained_text(row: dict, key: str, fmt, always: bool = False) -> str:
    """The untrained step's value of a score, in words when that step was not analysed
    (`always`: the value does not need the analyses, e.g. the history's accuracy)."""
    value = row.get(key)
    if value is not None:
        return fmt(value)
    return "—" if always or row["untrained_analysed"] else NOT_ANALYSED


def _score(value: str, untrained: str, reference: str | None = None,
           images: int | None = None, low=None, high=None, scale: float = 100,
           digits: int = 1, unit: str = "%") -> dict:
    """A score cell: ours with its 95% interval (`low`, `high`), Gu's published figure (when
    his table has one), the untrained step's, and the images it counted (shown in the cell
    when the header cannot say one number for every cell)."""
    ci = "" if low is None or high is None else \
        f"95% CI {scale * low:.{digits}f}–{scale * high:.{digits}f}{unit}"
    return {"value": value, "reference": reference, "untrained": untrained, "images": images,
            "images_text": "", "ci": ci}


def _images_text(count: int | None) -> str:
    return f"{count:,} image{'s' if count != 1 else ''}" if count is not None else ""


def comparison(models) -> dict | None:
    """The page's tables for `models` (reportgen.pages.sitedata.ModelData), or None when Gu's
    comparison has nothing to show (no model on the affine benchmark, no CNN baseline)."""
    # his tables read MNIST and affNIST accuracy: a two-digit model's top-2 is not that
    records = [record_from_site(m) for m in models if getattr(m, "labels_per_image", 1) == 1]
    if not compares(records):
        return None
    target, source = matched_target(records)
    accuracy = []
    rows = table1(records, target)
    for row in rows:
        validated = (f"validation {_pct(row['validation_accuracy'])}"
                     + (f" on {_images_text(row['validation_images'])} held out"
                        if row["validation_images"] else "")) \
            if row["validation_accuracy"] is not None else ""
        accuracy.append({
            **row, "parameters_text": f"{row['parameters']:,}",
            "step_text": row["step"] or "—", "validation_text": validated,
            "clean": _score(_pct(row["clean_accuracy"]),
                            _untrained_text(row, "untrained_clean_accuracy", _pct),
                            _ref_pct(row["reference_mnist"]), row["clean_images"],
                            row["clean_accuracy_low"], row["clean_accuracy_high"]),
            "affnist": _score(_pct(row["affnist_accuracy"]),
                              _untrained_text(row, "untrained_affnist_accuracy", _pct),
                              _ref_pct(row["reference_affnist"]), row["affnist_images"],
                              row["affnist_accuracy_low"], row["affnist_accuracy_high"]),
            "attacks": [_score(_pct(row[f"{a}_{e:g}_accuracy"]),
                               _untrained_text(row, f"untrained_{a}_{e:g}_accuracy", _pct),
                               images=row["attack_images"],
                               low=row[f"{a}_{e:g}_accuracy_low"],
                               high=row[f"{a}_{e:g}_accuracy_high"])
                        for a, e in ATTACKS],
            "chance_text": _pct(row["chance"])})
    # one count for every score: said once, in the headers; else in each cell
    counts = {cell["images"] for row in accuracy
              for cell in (row["clean"], row["affnist"], *row["attacks"])
              if cell["images"] is not None and cell["value"] != "—"}
    shared = counts.pop() if len(counts) == 1 else None
    for row in accuracy:
        for cell in (row["clean"], row["affnist"], *row["attacks"]):
            cell["images_text"] = "" if shared is not None or cell["value"] == "—" \
                else f"on {_images_text(cell['images'])}" if cell["images"] else ""
    compactness = [{**row, "step_text": row["step"] or "—",
                    "ours": _score(_compact(row["compactness"]),
                                   _untrained_text(row, "untrained", _compact),
                                   low=row["compactness_low"], high=row["compactness_high"],
                                   scale=1, digits=4, unit=""),
                    "chance_text": _compact(row["chance"]),
                    "chance_mean_text": _compact(row["chance_mean"]),
                    "reference_text": _compact(row["reference"])}
                   for row in table5(records, target)]
    groups = [_group_text(row) for row in group_rows(rows, models)]
    paired = [{**row, "difference_text": f"{100 * row['value']:+.1f} points",
               "ci": ci_text(Interval(row["value"], row["low"], row["high"], row["n"],
                                      row["method"]), 100, 1),
               "p_text": "< 0.001" if row["p_value"] < 0.001 else f"{row['p_value']:.3f}"}
              for row in differences(records, target)]
    return {"target": target, "target_text": _pct(target),
            "groups": groups, "differences": paired,
            "target_trained": source == TARGET_TRAINED,
            "reference_target_text": _pct(MATCHED_ACCURACY),
            "attacks": [f"{a.upper()} ε = {e:g}" for a, e in ATTACKS],
            "attack_keys": [f"{a}_{e:g}_accuracy" for a, e in ATTACKS],
            "accuracy": accuracy, "compactness": compactness, "factor": TABLE5_FACTOR,
            "images_text": f" ({_images_text(shared)})" if shared is not None else "",
            "counts_differ": len(counts) > 0,
            "untrained_missing": any(not r["untrained_analysed"] for r in accuracy),
            "csv": {"table1": _csv(accuracy, _TABLE1_COLUMNS),
                    "differences": _csv(paired, _DIFFERENCE_COLUMNS),
                    "table5": _csv(compactness, _TABLE5_COLUMNS)}}


_TABLE1_COLUMNS = ("model", "kind", "parameters", "step", "reached", "target",
                   "validation_accuracy", "validation_images", "clean_accuracy", "clean_images",
                   "affnist_accuracy", "affnist_images",
                   *(f"{a}_{e:g}_accuracy" for a, e in ATTACKS), "attack_images", "chance",
                   "untrained_analysed", "untrained_clean_accuracy", "untrained_affnist_accuracy",
                   *(f"untrained_{a}_{e:g}_accuracy" for a, e in ATTACKS),
                   "reference_parameters", "reference_mnist", "reference_affnist",
                   *(f"{key}_{end}" for key, _ in accuracy_columns() for end in ("low", "high")))
_DIFFERENCE_COLUMNS = ("a", "b", "score", "value", "low", "high", "n", "method", "p_value",
                       "only_a", "only_b", "decided")
_TABLE5_COLUMNS = ("model", "kind", "step", "reached", "factor", "compactness",
                   "compactness_low", "compactness_high", "chance_mean",
                   "chance", "untrained_analysed", "untrained", "reference")


def _group_text(row: dict) -> dict:
    """A seed group's row: each accuracy as the mean over its seeds with the t interval over
    them (the seeds counted in the cell when they differ from the group's)."""
    cells = {}
    for key, _ in accuracy_columns():
        value, low, high = row[key], row[f"{key}_low"], row[f"{key}_high"]
        cells[key] = {"value": _pct(value),
                      "ci": "" if low is None else
                      f"95% CI {100 * low:.1f}–{100 * high:.1f}% over seeds",
                      "seeds": row[f"{key}_seeds"]}
    return {**row, "cells": cells, "members_text": ", ".join(row["members"])}


def _csv(rows: list[dict], columns) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else row.get(c) for c in columns])
    return out.getvalue()
