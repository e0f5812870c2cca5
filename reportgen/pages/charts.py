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
    chance, fraction = chance_of(len(model.class_names) or 1, model.labels_per_image)
    return chance, f"chance {100 * chance:.1f}% = {fraction}"


def model_charts(model: ModelData, chosen: str | None) -> list[dict]:
    """The overview's charts [{spec, label}]: loss, and accuracy with its chance line."""
    accuracy = accuracy_name(model.labels_per_image)
    charts = [(training_curves_spec(model.history, "loss", chosen=chosen),
               "Loss over training"),
              (training_curves_spec(model.history, "accuracy", accuracy=accuracy,
                                    chance=chance_line(model), chosen=chosen),
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
    charts = [(overlay_spec(scored, "accuracy", sorted(chances.values())),
               "Validation accuracy of every model over the images seen"),
              (overlay_spec([(m.name, m.history) for m in models], "loss"),
               "Total training loss of every model over the images seen")]
    return [{"spec": spec, "label": label} for spec, label in charts if spec is not None]
