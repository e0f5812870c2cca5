"""Helpers for panels made of several files: naming each figure of a panel, grouping its
downloads, and the numbers (JSON + CSV) behind the plots drawn across steps or models.

A dataset-level analysis often draws several figures (e.g. routing entropy: into the classes
and per routed layer; vote agreement: over the set and per image), each as PNG and SVG, plus its numbers as JSON and CSV; the assembler
names them `<technique>[-<variant>]-<figure>.<kind>` and the numbers `<technique>[-<variant>]
.<kind>`. A trend (over training) or comparison (across models) panel is drawn from the per-step
summaries, which the build does not export again: `derived_numbers` gathers them from the
steps' panels (`Panel.numbers`, the store's data; never read back from the docs folder) so that
every figure of the site has its numbers beside it.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import PurePosixPath

from reportgen.pages.sitedata import FigureFile, ModelData, Panel

PICTURES = ("png", "svg", "jpg", "jpeg", "gif", "webp")   # figure kinds an <img> can show


def figure_label(panel: Panel, figure: FigureFile) -> str:
    """Which figure of the panel a file is: "" for the panel's own (main figure or numbers),
    else the part of the file name after the panel's stem ("entropy", "vote_agreement")."""
    stem = PurePosixPath(figure.path).stem
    prefix = panel.technique + (f"-{panel.variant}" if panel.variant else "")
    if stem == prefix:
        return ""
    for start in (prefix + "-", panel.technique + "-", panel.technique + "_"):
        if stem.startswith(start):
            return stem[len(start):]
    return stem


def groups(panel: Panel) -> list[tuple[str, list[FigureFile]]]:
    """The panel's files grouped by figure label, in order of first appearance; a group with a
    picture comes before the numbers-only group ("")."""
    order: dict[str, list[FigureFile]] = {}
    for fig in panel.figures:
        order.setdefault(figure_label(panel, fig), []).append(fig)
    pictured = [(k, v) for k, v in order.items() if any(f.kind in PICTURES for f in v)]
    rest = [(k, v) for k, v in order.items() if not any(f.kind in PICTURES for f in v)]
    return pictured + rest


def humane(label: str) -> str:
    return label.replace("_", " ").replace("-", " ").strip()


# --------------------------------------------------------------------------------------------
# Numbers behind the trend and comparison plots


def trend_sources(model: ModelData, panel: Panel) -> list[tuple[str, Panel]]:
    """(step, dataset panel) of the same analysis at every step that has it."""
    found = []
    for step in model.steps:
        match = next((p for p in step.dataset_panels if p.technique == panel.technique
                      and p.variant == panel.variant), None)
        if match is not None:
            found.append((step.step, match))
    return found


def compare_sources(models: list[ModelData], panel: Panel) -> list[tuple[str, Panel]]:
    """("model (step)", dataset panel) of each model at its last step with the analysis (the
    build overlays the same ones)."""
    found = []
    for model in models:
        for step in reversed(model.steps):
            match = next((p for p in step.dataset_panels if p.technique == panel.technique
                          and (not panel.variant or p.variant == panel.variant)), None)
            if match is not None:
                found.append((f"{model.name} ({step.step})", match))
                break
    return found


def derived_numbers(panel: Panel, sources: list[tuple[str, Panel]],
                    axis: str) -> tuple[str, str] | None:
    """(JSON, CSV) texts of the summaries a trend or comparison plot was drawn from (the
    sources' `numbers`); None when none of them has numbers. `axis` names the series ("step" or
    "model")."""
    series = [(name, p.numbers) for name, p in sources if isinstance(p.numbers, dict)]
    if not series:
        return None
    data = {"technique": panel.technique, "variant": panel.variant, "title": panel.title,
            "series_by": axis, "series": [{axis: name, "summary": s} for name, s in series]}
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    writer.writerow([axis, *NUMBER_COLUMNS])
    for name, summary in series:
        for row in number_rows(summary):
            writer.writerow([name, *row])
    return json.dumps(data, indent=1, sort_keys=True) + "\n", rows.getvalue()


# A CSV of a summary: each score with its 95% interval beside it (reportgen.results.intervals:
# summary["intervals"][key] = {low, high, n, method}), empty for a number without one.
NUMBER_COLUMNS = ("key", "value", "low", "high", "n", "method")


def number_rows(summary: dict):
    """(key, value, low, high, n, method) rows of a summary: flatten's rows with each score's
    interval (a list-valued score's ends as space-separated lists, as its values), then the
    paired differences it records ("a - b", which have no score key of their own). The
    intervals object itself is not repeated as rows, nor the per-image outcomes kept for
    comparing models (reportgen.results.per_image): they are no scores."""
    from reportgen.results.intervals import INTERVALS
    from reportgen.results.per_image import PER_IMAGE

    intervals = summary.get(INTERVALS) if isinstance(summary, dict) else None
    intervals = intervals if isinstance(intervals, dict) else {}
    body = {k: v for k, v in summary.items() if k not in (INTERVALS, PER_IMAGE)} \
        if isinstance(summary, dict) else summary
    for key, value in flatten(body):
        yield (key, value, *_interval_cells(intervals.get(key)))
    for key, entry in intervals.items():
        if isinstance(entry, dict) and "value" in entry and key not in body:
            yield (key, _cell(entry["value"]), *_interval_cells(entry))


def _interval_cells(entry) -> tuple:
    if not isinstance(entry, dict):
        return ("", "", "", "")
    return (_cell(entry.get("low")), _cell(entry.get("high")), _cell(entry.get("n")),
            entry.get("method") or "")


def _cell(value):
    if isinstance(value, list):
        return " ".join("" if v is None else str(v) for v in value)
    return "" if value is None else value


def flatten(value, prefix: str = ""):
    """(dotted key, value) pairs of a JSON value; lists of plain values stay one row."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        for i, v in enumerate(value):
            yield from flatten(v, f"{prefix}[{i}]")
    elif isinstance(value, list):
        yield prefix, " ".join("" if v is None else str(v) for v in value)
    else:
        yield prefix, "" if value is None else value
