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
