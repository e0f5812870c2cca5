"""Training curves as Vega-Lite specs (reportgen.figures.vega): one drawing path for the
overview's live chart, the Compare page's overlay of every model and the paper figure.

A chart's data is one row per (saved step, series): x = training images seen when every record
has it (else the record's position), the step's name and the value. The page's controls vary
the spec (reportgen's charts.js): SMOOTHING, a time-weighted EMA of each series over x
(smoothing.js; the top-level transform's "shown" then reads it), a log y scale; wheel and drag zoom and pan (double-click resets), the
pointer shows every series' value at the nearest saved step. The overview's chart marks the
step the slider chooses (the `chosen` parameter). Accuracy charts draw chance (1/K, or 1/C(K, 2)
for two digits per image, reportgen.results.findings.chance_of) as a dashed line.
"""

from __future__ import annotations

import csv
import io
import json
import math

from reportgen.figures.figure import Figure
from reportgen.figures.vega import CONFIG, paper_files

# (history key, legend label, colour); CLASSIFICATION stands for the key of the history's
# classification loss, which its model's family names (Family.classification_loss: history.json
# says which under "classification_loss"; histories before it hold "margin_loss")
CLASSIFICATION = "<classification loss>"
LOSSES = (("loss", "total loss", "#3f51b5"), (CLASSIFICATION, "", "#e65100"),
          ("reconstruction_loss", "reconstruction loss", "#2e7d32"))
ACCURACIES = (("val_accuracy", "validation accuracy", "#c2185b"),
              ("train_accuracy", "train accuracy (running)", "#757575"))
CURVE_SERIES = {"loss": LOSSES, "accuracy": ACCURACIES}
HISTORY_COLUMNS = ("step", "epoch", "batch", "images_seen", "loss", CLASSIFICATION,
                   "reconstruction_loss", "train_accuracy", "val_accuracy")
# The legend's words for reportgen's families' classification losses; another family's name
# is shown with spaces for its underscores ("focal_loss" -> "focal loss").
LOSS_LABELS = {"margin_loss": "margin loss", "spread_loss": "spread loss",
               "nll": "negative log-likelihood", "cross_entropy": "cross-entropy"}
# The Compare page's overlay: one colour per model (matplotlib's tab10, as the paper figures).
MODEL_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                 "#7f7f7f", "#bcbd22", "#17becf")
# seed groups' means: dark colours, apart from the runs' tab10
GROUP_COLOURS = ("#111111", "#6d4c41", "#37474f", "#880e4f", "#1a237e")
OVERLAY_SERIES = {"accuracy": ("val_accuracy", "Validation accuracy"),
                  "loss": ("loss", "Total training loss")}
SMOOTHING = (0, 0.02, 0.05, 0.1, 0.2)   # the EMA half-lives the page offers, shares of x's range
WIDTH, HEIGHT = 380, 190        # plotting area (px): with its axis the chart prints at 480 px
INTERACTIVE = ("hover", "chosen")
PLAIN = {"format": "", "formatType": "plain"}   # a text shown as it is (charts.js)   # the names of the layers a printed figure leaves out


def number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(float(value)) else None


def classification_loss_key(history: list[dict]) -> str | None:
    """The key of `history`'s records that holds the classification loss: the first key of a
    record that a registered family names (Family.classification_loss) or reportgen's
    families do (LOSS_LABELS; "margin_loss" in every history written before families named
    theirs); None when no record has one."""
    from reportgen.settings.families import family, registered

    names = set(LOSS_LABELS) | {family(name).classification_loss for name in registered()}
    return next((key for record in history for key in record if key in names), None)


def loss_label(key: str) -> str:
    """A classification loss's words in legends and captions ("margin loss", "cross-entropy")."""
    return LOSS_LABELS.get(key, key.replace("_", " "))


def _keyed(series, history: list[dict]) -> list[tuple[str, str, str]]:
    """`series` with CLASSIFICATION as the history's own key and label (left out when the
    history has none)."""
    key = classification_loss_key(history)
    return [(key, loss_label(key), colour) if name == CLASSIFICATION else (name, label, colour)
            for name, label, colour in series if name != CLASSIFICATION or key is not None]


def history_csv(history: list[dict]) -> bytes:
    """The training history, one row per saved step (empty cells where a value is missing);
    the classification loss's column is named as the history names it ("margin_loss" when it
    has none)."""
    key = classification_loss_key(history) or "margin_loss"
    columns = [key if c == CLASSIFICATION else c for c in HISTORY_COLUMNS]
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    writer.writerow(columns)
    for record in history:
        writer.writerow(["" if record.get(c) is None else record.get(c) for c in columns])
    return rows.getvalue().encode()


def has_curves(history: list[dict]) -> bool:
    """Whether the history has any loss or accuracy value to plot."""
    return any(number(r.get(key)) is not None for r in history
               for key, _, _ in _keyed(LOSSES + ACCURACIES, history))


def _x_of(history: list[dict]) -> tuple[list[float], str]:
    seen = all(number(r.get("images_seen")) is not None for r in history)
    xs = [float(r["images_seen"]) if seen else float(i) for i, r in enumerate(history)]
    return xs, ("training images seen" if seen else "saved step (position)")


def line_chart(rows: list[dict], *, title: str, x_title: str, y_title: str, kind: str,
               series: list[tuple[str, str]], chance: list[tuple[float, str]] = (),
               chosen: str | None = None, step_tooltip: bool = True) -> dict:
    """The Vega-Lite spec of one line chart: `rows` [{x, step, series, value}], `series`
    [(name, colour)] in legend order, `kind` "accuracy" (percent axis) or "loss";
    `chance` [(value, label)] dashed lines; `chosen` a step to mark (the overview's slider);
    `step_tooltip`: the pointer names the step (one model's chart: its steps share an x)."""
    names = [name for name, _ in series]
    y_format = ".0%" if kind == "accuracy" else "~g"
    value_format = ".2%" if kind == "accuracy" else ".4~g"
    colour = {"field": "series", "type": "nominal", "title": None,
              "scale": {"domain": names, "range": [c for _, c in series]}}
    x = {"field": "x", "type": "quantitative", "title": x_title,
         "axis": {"format": ",.0f", "tickCount": 6}}
    y = {"field": "shown", "type": "quantitative", "title": y_title,
         "axis": {"format": y_format}, "scale": {"zero": False}}
    layers: list[dict] = [
        # a series' 95% interval where its rows carry one (validation accuracy: Wilson's
        # over the held-out images it counted), unsmoothed: what each saved step measured
        {"transform": [{"filter": "isValid(datum.low) && isValid(datum.high)"}],
         "mark": {"type": "area", "opacity": 0.18, "clip": True},
         "encoding": {"x": x, "y": {**y, "field": "low"}, "y2": {"field": "high"},
                      "color": colour}},
        {"mark": {"type": "line", "strokeWidth": 2, "clip": True},
         "encoding": {"x": x, "y": y, "color": colour},
         "params": [{"name": "zoom", "select": "interval", "bind": "scales"}]},
        {"mark": {"type": "point", "filled": True, "size": 16, "opacity": 0.6, "clip": True},
         "encoding": {"x": x, "y": {**y, "field": "value"}, "color": colour}},
    ]
    for value, label in chance:
        layers.append({"data": {"values": [{"chance": value, "label": label}]},
                       "transform": [],
                       "layer": [{"mark": {"type": "rule", "strokeDash": [4, 3],
                                           "color": "#666666", "clip": True},
                                  "encoding": {"y": {**y, "field": "chance"}}},
                                 {"mark": {"type": "text", "align": "right", "dy": -6,
                                           "fontSize": 10, "color": "#444444", "clip": True},
                                  "encoding": {"y": {**y, "field": "chance"},
                                               "x": {"value": WIDTH - 4},
                                               "text": {"field": "label"}}}]})
    # the pointer's rule: one row per x (and step, on one model's chart), a text per series
    # named by its position (a series' name is the user's: quotes or brackets in it would
    # read as a field path), "—" where a series has no value there
    by = ["x", "step"] if step_tooltip else ["x"]
    texts = [{"calculate": f"isValid(datum.s{i}) ? format(datum.s{i}, '{value_format}') "
                           f": '—'", "as": f"t{i}"} for i in range(len(names))]
    layers.append(
        {"name": "hover",
         "transform": [{"calculate": f"'s' + indexof({json.dumps(names)}, datum.series)",
                        "as": "key"},
                       {"pivot": "key", "value": "shown", "groupby": by}, *texts],
         "mark": {"type": "rule", "color": "#555555"},
         "encoding": {
             "x": x,
             "opacity": {"condition": {"param": "hover", "empty": False, "value": 0.5},
                         "value": 0},
             # formatType "plain" (charts.js registers it): Vega-Lite reads a tooltip field
             # of the nearest point's rule through the pointer's cell only when it has a
             # format; the text as it is
             "tooltip": [*([{"field": "step", "title": "step", **PLAIN}] if step_tooltip
                           else []),
                         {"field": "x", "type": "quantitative", "title": x_title,
                          "format": ",d"},
                         *({"field": f"t{i}", "title": n, **PLAIN}
                           for i, n in enumerate(names))]},
         "params": [{"name": "hover", "select": {"type": "point", "fields": ["x"],
                                                 "nearest": True, "on": "pointerover",
                                                 "clear": "pointerout"}}]})
    if chosen is not None:
        # the chosen step: a dashed rule, and a triangle above the plot that stays visible
        # where the rule lies on the frame (the first and the last step)
        layers.append({"name": "chosen",
                       "transform": [{"filter": "datum.step === chosen"}],
                       "layer": [{"name": "chosen_rule",
                                  "mark": {"type": "rule", "strokeDash": [6, 3],
                                           "color": "#222222"},
                                  "encoding": {"x": x}},
                                 {"name": "chosen_tick",
                                  "mark": {"type": "point", "shape": "triangle-down",
                                           "filled": True, "size": 70, "color": "#222222",
                                           "clip": False, "yOffset": -6},
                                  "encoding": {"x": x, "y": {"value": 0}}}]})
    spec = {"config": CONFIG, "title": title, "width": WIDTH, "height": HEIGHT,
            "data": {"values": rows},
            "transform": [{"window": [{"op": "mean", "field": "value", "as": "shown"}],
                           "frame": [0, 0], "groupby": ["series"],
                           "sort": [{"field": "x"}]}],
            "layer": layers,
            "usermeta": {"reportgen": {"smoothing": list(SMOOTHING)}}}
    if chosen is not None:
        spec["params"] = [{"name": "chosen", "value": chosen}]
    return spec


def printed(spec: dict) -> dict:
    """The spec as a still figure: without the pointer's rule, the chosen step and the zoom."""
    out = {k: v for k, v in spec.items() if k not in ("params", "usermeta")}
    out["layer"] = [{k: v for k, v in layer.items() if k != "params"}
                    for layer in spec["layer"] if layer.get("name") not in INTERACTIVE]
    return out


def with_interval(row: dict, record: dict, key: str) -> dict:
    """`row` of a validation accuracy with its 95% interval (Wilson's, over the held-out
    images the record says it counted: `val_images`) as `low` / `high`; as it is for any
    other value, or a record that did not count its images."""
    images = number(record.get("val_images"))
    if key != "val_accuracy" or not images or images < 1:
        return row
    from reportgen.results.findings import accuracy_interval

    found = accuracy_interval(row["value"], int(images))
    return {**row, "low": found.low, "high": found.high}


def training_curves_spec(history: list[dict], kind: str, *, accuracy: str = "accuracy",
                         chance: tuple[float, str] | None = None,
                         chosen: str | None = None) -> dict | None:
    """One chart ("loss" or "accuracy") of a model's history; None without values. `accuracy`:
    what the accuracies count ("top-2 accuracy" for images of two digits); `chance` (value,
    label) on the accuracy chart."""
    xs, x_title = _x_of(history)
    rows, series = [], []
    for key, label, colour in _keyed(CURVE_SERIES[kind], history):
        label = label.replace("accuracy", accuracy)
        found = [with_interval({"x": x, "step": str(r.get("step", i)), "series": label,
                                "value": v}, r, key)
                 for i, (x, r) in enumerate(zip(xs, history))
                 if (v := number(r.get(key))) is not None]
        if found:
            rows += found
            series.append((label, colour))
    if not rows:
        return None
    title = "Loss" if kind == "loss" else accuracy[:1].upper() + accuracy[1:]
    return line_chart(rows, title=f"{title} over training", x_title=x_title,
                      y_title="loss" if kind == "loss" else accuracy, kind=kind, series=series,
                      chance=[chance] if chance and kind == "accuracy" else [],
                      chosen=chosen if chosen is not None else rows[-1]["step"])


def overlay_spec(runs: list[tuple[str, list[dict]]], kind: str,
                 chance: list[tuple[float, str]] = (),
                 groups: list[tuple[str, list[dict]]] = ()) -> dict | None:
    """One measure ("accuracy": validation accuracy, "loss": total training loss) of several
    models' histories over the images seen (models of other data-set and batch sizes line up
    by what they saw); None when no model has it. `groups`: (name, rows) of seed groups'
    means (reportgen.results.seed_groups.mean_curve: x, step, value, low, high), each a
    series of its own drawn with its between-seed band."""
    key, title = OVERLAY_SERIES[kind]
    rows, series = [], []
    for name, found in groups:
        if found:
            rows += [{**r, "series": name} for r in found]
            series.append((name, GROUP_COLOURS[len(series) % len(GROUP_COLOURS)]))
    for i, (name, history) in enumerate(runs):
        found = [with_interval({"x": seen, "step": str(r.get("step", "")), "series": name,
                                "value": v}, r, key)
                 for r in history
                 if (seen := number(r.get("images_seen"))) is not None
                 and (v := number(r.get(key))) is not None]
        if found:
            rows += found
            series.append((name, MODEL_COLOURS[i % len(MODEL_COLOURS)]))
    if not rows:
        return None
    return line_chart(rows, title=title, x_title="training images seen",
                      y_title="validation accuracy" if kind == "accuracy" else "loss",
                      kind=kind, series=series, chance=list(chance) if kind == "accuracy"
                      else [], step_tooltip=False)


def _losses_text(history: list[dict]) -> str:
    """The loss terms the history holds, in words ("total loss, margin loss and reconstruction
    loss"): only the model's own (a model trained without a decoder has no reconstruction
    loss; its classification loss as its family names it)."""
    names = [label for key, label, _ in _keyed(LOSSES, history)
             if any(number(r.get(key)) is not None for r in history)] or ["total loss"]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def render_training_curves(history: list[dict], model: str, accuracy: str = "accuracy",
                           chance: tuple[float, str] | None = None) -> list[Figure]:
    """The paper figure of a model's training curves (loss above accuracy, the overview's
    charts as still figures) as PNG, SVG and PDF, with the history as CSV; [] without values."""
    charts = [training_curves_spec(history, kind, accuracy=accuracy, chance=chance)
              for kind in ("loss", "accuracy")]
    charts = [printed(c) for c in charts if c is not None]
    if not charts:
        return []
    spec = {"config": CONFIG, "title": f"{model}: training curves",
            "vconcat": [{k: v for k, v in c.items() if k != "config"} for c in charts],
            "resolve": {"scale": {"color": "independent"}}}
    _, x_title = _x_of(history)
    caption = (f"Training curves of {model} over {len(history)} saved steps (x: {x_title}). "
               f"Top: {_losses_text(history)}, each the mean over the batches "
               f"since the previous saved step. Bottom: validation {accuracy} at each saved "
               f"step and the running training {accuracy}"
               + (f"; dashed: chance ({chance[1]})." if chance else "."))
    return paper_files(spec, "training_curves", caption) + [
        Figure("training_curves.csv", history_csv(history), "csv", caption)]
