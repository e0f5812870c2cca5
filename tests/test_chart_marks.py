"""What the live training-curve charts mark (reportgen/figures/training_curves.py)."""

from __future__ import annotations


def test_the_chosen_step_is_marked_where_its_rule_lies_on_the_frame():
    """At the first or last step the chosen step's dashed rule lies on the plot's frame: a
    triangle above the plot (not clipped) marks it there too; the printed figure has neither."""
    from reportgen.figures.training_curves import printed, training_curves_spec

    history = [{"step": "0-0", "images_seen": 0, "val_accuracy": 0.1},
               {"step": "1-5", "images_seen": 500, "val_accuracy": 0.8}]
    spec = training_curves_spec(history, "accuracy", chosen="0-0")
    [chosen] = [layer for layer in spec["layer"] if layer.get("name") == "chosen"]
    marks = [layer["mark"] for layer in chosen["layer"]]
    assert [m["type"] for m in marks] == ["rule", "point"]
    assert marks[1]["shape"] == "triangle-down" and marks[1]["clip"] is False
    assert chosen["transform"] == [{"filter": "datum.step === chosen"}]
    assert not any(layer.get("name") == "chosen" for layer in printed(spec)["layer"])


def test_validation_accuracy_carries_its_wilson_band():
    """Each saved step's validation accuracy over the held-out images it counted is drawn
    with its 95% interval (SciPy's Wilson, independently), a record without a count has none,
    and the printed figure keeps the band."""
    from scipy.stats import binomtest

    from reportgen.figures.training_curves import printed, training_curves_spec

    history = [{"step": "0-0", "images_seen": 0, "val_accuracy": 0.1, "val_images": 1000},
               {"step": "1-0", "images_seen": 500, "val_accuracy": 0.9, "val_images": 1000},
               {"step": "2-0", "images_seen": 1000, "val_accuracy": 0.95}]
    spec = training_curves_spec(history, "accuracy")
    rows = {r["step"]: r for r in spec["data"]["values"] if r["series"] == "validation accuracy"}
    ci = binomtest(900, 1000).proportion_ci(method="wilson")
    assert abs(rows["1-0"]["low"] - ci.low) < 1e-9 and abs(rows["1-0"]["high"] - ci.high) < 1e-9
    assert "low" not in rows["2-0"]
    bands = [layer for layer in printed(spec)["layer"]
             if isinstance(layer.get("mark"), dict) and layer["mark"]["type"] == "area"]
    assert len(bands) == 1 and bands[0]["encoding"]["y2"] == {"field": "high"}
