"""What the "Capsules vs CNNs" page shows: Gu 2022's Ch.5 Table 1 and Table 5 for the built
models (reportgen/results/capsules_vs_cnns.py computes the rows), formatted beside his
published figures, and the same rows as CSV for a paper."""

from __future__ import annotations

import csv
import io

from reportgen.results.capsules_vs_cnns import (ATTACKS, MATCHED_ACCURACY, TABLE5_FACTOR,
                                                compares, record_from_site, table1, table5)

STEM = "capsules-vs-cnns"
TITLE = "Capsules vs CNNs"


def _pct(value) -> str:
    return "—" if value is None else f"{100 * value:.2f}%"


def _ref_pct(value) -> str:
    """Gu's figures are printed in percent already."""
    return "—" if value is None else f"{value:.2f}%"


def _compact(value) -> str:
    return "—" if value is None else f"{value:.4f}"


def comparison(models) -> dict | None:
    """The page's tables for `models` (reportgen.pages.sitedata.ModelData), or None when Gu's
    comparison has nothing to show (no model on the affine benchmark, no CNN baseline)."""
    records = [record_from_site(m) for m in models]
    if not compares(records):
        return None
    chance = {m.name: 1 / len(m.class_names) for m in models if m.class_names}
    accuracy = []
    for row in table1(records):
        accuracy.append({
            **row, "parameters_text": f"{row['parameters']:,}",
            "step_text": row["step"] or "—",
            "clean_text": _pct(row["clean_accuracy"]),
            "affnist_text": _pct(row["affnist_accuracy"]),
            "attacks": [_pct(row[f"{a}_{e:g}_accuracy"]) for a, e in ATTACKS],
            "chance_text": _pct(chance.get(row["model"])),
            "reference_mnist_text": _ref_pct(row["reference_mnist"]),
            "reference_affnist_text": _ref_pct(row["reference_affnist"])})
    compactness = [{**row, "step_text": row["step"] or "—",
                    "ours_text": _compact(row["compactness"]),
                    "reference_text": _compact(row["reference"])} for row in table5(records)]
    return {"target": MATCHED_ACCURACY, "target_text": _pct(MATCHED_ACCURACY),
            "attacks": [f"{a.upper()} ε = {e:g}" for a, e in ATTACKS],
            "accuracy": accuracy, "compactness": compactness, "factor": TABLE5_FACTOR,
            "csv": {"table1": _csv(accuracy, _TABLE1_COLUMNS),
                    "table5": _csv(compactness, _TABLE5_COLUMNS)}}


_TABLE1_COLUMNS = ("model", "kind", "parameters", "step", "reached", "target", "clean_accuracy",
                   "clean_accuracy_eval", "affnist_accuracy",
                   *(f"{a}_{e:g}_accuracy" for a, e in ATTACKS), "reference_parameters",
                   "reference_mnist", "reference_affnist")
_TABLE5_COLUMNS = ("model", "kind", "step", "reached", "factor", "compactness", "reference")


def _csv(rows: list[dict], columns) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else row.get(c) for c in columns])
    return out.getvalue()
