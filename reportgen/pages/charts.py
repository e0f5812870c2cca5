"""The live charts of the pages: the Vega-Lite specs of reportgen.figures.training_curves with
what the templates say beside them, and the scripts that draw them (README "The site").

The page holds each spec as JSON (`<script type="application/json">`, Jinja2's tojson);
assets/reportgen/charts.js draws them with vega-embed from assets/vendor/vega-embed.js, which
`render_site` writes from vl-convert's offline bundle (reportgen.figures.vega.embed_bundle).
"""

from __future__ import annotations

from reportgen.figures.training_curves import overlay_spec, training_curves_spec
from reportgen.pages.sitedata import ModelData
from reportgen.results.findings import accuracy_name, chance_of



def chance_line(model: ModelData) -> tuple[float, str]:
    """(chance accuracy, its label) of a model: 1/K, or 1/C(K, 2) for two digits per image."""
    return chance_words(len(model.class_names) or 1, model.labels_per_image)


def chance_words(classes: int, labels_per_image: int = 1) -> tuple[float, str]:
    chance, fraction = chance_of(classes, labels_per_image)
    return chance, f"chance {100 * chance:.1f}% = {fraction}"


def model_charts(model: ModelData, chosen: str | None) -> list[dict]:
    """The overview's charts [{spec, label}]: loss, and accuracy with its chance line."""
    return history_charts(model.history, len(model.class_names) or 1, model.labels_per_image,
                          chosen)


def history_charts(history: list[dict], classes: int, labels_per_image: int,
                   chosen: str | None) -> list[dict]:
    """The overview's charts of a training history (the built one, or a run's as it trains:
    reportgen.commands.live_training)."""
    accuracy = accuracy_name(labels_per_image)
    charts = [(training_curves_spec(history, "loss", chosen=chosen),
               "Loss over training"),
              (training_curves_spec(history, "accuracy", accuracy=accuracy,
                                    chance=chance_words(classes, labels_per_image),
                                    chosen=chosen),
               f"{accuracy[:1].upper()}{accuracy[1:]} over training")]
    return [{"spec": spec, "label": label} for spec, label in charts if spec is not None]


def compare_charts(models: list[ModelData]) -> list[dict]:
    """Compare's overlay of every model: validation accuracy (each model's chance a dashed line;
    a two-digit model's legend entry says its accuracy is top-2) and total training loss."""
    scored, chances = [], {}
    for model in models:
        name = model.name
        if model.labels_per_image == 2:
            name = f"{name} ({accuracy_name(2)})"
        scored.append((name, model.history))
        value, label = chance_line(model)
        chances.setdefault(round(value, 6), (value, label))
    groups = {kind: group_curves(models, key) for kind, key in
              (("accuracy", "val_accuracy"), ("loss", "loss"))}
    seeds = " (a seed group's mean in its band: the 95% t interval over its seeds)" \
        if groups["accuracy"] or groups["loss"] else ""
    charts = [(overlay_spec(scored, "accuracy", sorted(chances.values()), groups["accuracy"]),
               f"Validation accuracy of every model over the images seen{seeds}"),
              (overlay_spec([(m.name, m.history) for m in models], "loss",
                            groups=groups["loss"]),
               f"Total training loss of every model over the images seen{seeds}")]
    return [{"spec": spec, "label": label} for spec, label in charts if spec is not None]


def group_curves(models: list[ModelData], key: str) -> list[tuple[str, list[dict]]]:
    """(series name, rows) of each seed group's mean of `key` over its seeds
    (reportgen.results.seed_groups), named with its seeds' count."""
    from reportgen.results.seed_groups import mean_curve, seed_groups

    out = []
    for group in seed_groups(models):
        rows = mean_curve([m.history for m in group.members], key)
        if rows:
            out.append((f"{group.name}: mean of {len(group.members)} seeds", rows))
    return out


def gu_chart(gu: dict) -> list[dict]:
    """"Capsules vs CNNs" Table 1 as one chart: each model's clean, affNIST-like and
    adversarial accuracy at its matched step as bars, Gu's published figure (where his table
    has one) as a black tick on its bar, chance as a dashed line; [] without scores."""
    from reportgen.figures.vega import CONFIG
    from reportgen.results.capsules_vs_cnns import ATTACKS

    measures = [("clean_accuracy", "clean", "reference_mnist"),
                ("affnist_accuracy", "affNIST-like", "reference_affnist"),
                *((f"{a}_{e:g}_accuracy", label, None)
                  for (a, e), label in zip(ATTACKS, gu["attacks"]))]
    rows = []
    for row in gu["accuracy"]:
        for key, label, reference in measures:
            value = row.get(key)
            if value is None:
                continue
            published = row.get(reference) if reference else None
            rows.append({"model": row["model"], "measure": label, "value": value,
                         "low": row.get(f"{key}_low"), "high": row.get(f"{key}_high"),
                         "gu": published / 100 if published is not None else None,
                         "step": row.get("step_text", ""), "chance": row.get("chance")})
    if not rows:
        return []
    names = [label for _, label, _ in measures]
    x = {"field": "model", "type": "nominal", "title": None, "sort": None,
         "axis": {"labelAngle": 0, "labelLimit": 140}}
    offset = {"field": "measure", "type": "nominal", "sort": names}
    y = {"type": "quantitative", "title": "accuracy", "scale": {"domain": [0, 1]},
         "axis": {"format": ".0%"}}
    tooltip = [{"field": "model"}, {"field": "step", "title": "matched step"},
               {"field": "measure"}, {"field": "value", "title": "ours", "format": ".2%"},
               {"field": "low", "title": "95% CI from", "format": ".1%"},
               {"field": "high", "title": "95% CI to", "format": ".1%"},
               {"field": "gu", "title": "Gu 2022", "format": ".2%"},
               {"field": "chance", "format": ".1%"}]
    spec = {"config": CONFIG, "title": "Accuracy at matched clean accuracy (Gu 2022, Table 1)",
            "width": {"step": 22 * len(names)}, "height": 200,
            "data": {"values": rows},
            "layer": [
                {"mark": "bar",
                 "encoding": {"x": x, "xOffset": offset, "y": {**y, "field": "value"},
                              "color": {**offset, "title": None,
                                        "scale": {"scheme": "tableau10"}},
                              "tooltip": tooltip}},
                # each bar's 95% interval (Wilson, over the images it counted)
                {"transform": [{"filter": "isValid(datum.low) && isValid(datum.high)"}],
                 "mark": {"type": "rule", "color": "#333333", "strokeWidth": 1.2},
                 "encoding": {"x": x, "xOffset": offset, "y": {**y, "field": "low"},
                              "y2": {"field": "high"}, "tooltip": tooltip}},
                {"transform": [{"filter": "isValid(datum.gu)"}],
                 "mark": {"type": "tick", "color": "black", "thickness": 2},
                 "encoding": {"x": x, "xOffset": offset, "y": {**y, "field": "gu"},
                              "tooltip": tooltip}},
                {"mark": {"type": "rule", "strokeDash": [4, 3], "color": "#666666"},
                 "encoding": {"y": {**y, "field": "chance", "aggregate": "max"}}}]}
    # wide: a bar per model and measure; the page gives it the whole row at its own size
    # (scaled into a 470 px box its legend printed at ~5 px)
    return [{"spec": spec, "wide": True,
             "label": "Table 1 as a chart: accuracy per model and measure with its 95% interval "
                      "(Wilson) as a line through the bar, Gu's published figures as black "
                      "ticks, chance dashed"}]

