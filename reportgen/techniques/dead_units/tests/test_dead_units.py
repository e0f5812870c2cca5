"""dead_units on tiny CapsNets and an EM model: dead filters and inactive capsule types from
hand-set biases, against the maxima of the probe's own tensors computed here in NumPy (the
numbers routing_diagnostics gave before dead units were a technique of their own); summaries
and figures."""

from __future__ import annotations

import json

import numpy as np
import pytest
from em_fixture import build_tiny_em

from reportgen.probe.evaluation import EvalBatch
from reportgen.probe.probe import run_probe
from reportgen.techniques import dead_units as du
from reportgen.techniques.base import RenderContext

CLASS_NAMES = ("a", "b", "c")


def _evaluation(net, count=10, seed=21):
    rng = np.random.default_rng(seed)
    return EvalBatch(net, rng.random((count, 12, 12, 1), dtype=np.float32),
                     rng.integers(0, 3, count), CLASS_NAMES)


def test_dead_filters_and_types_from_negative_biases(make_net):
    net = make_net(seed=5)
    conv1 = net.model.get_layer("conv1")
    bias = conv1.bias.numpy()
    bias[3] = -1e3                                  # filter 3 can never fire on [0, 1] inputs
    conv1.set_weights([conv1.kernel.numpy(), bias])
    dims = net.params.primary.dims
    bias = net.primary_conv.bias.numpy()
    bias[2 * dims:3 * dims] = -1e3                  # every channel of capsule type 2
    net.primary_conv.set_weights([net.primary_conv.kernel.numpy(), bias])
    evaluation = _evaluation(net)
    arrays = du.compute(evaluation.restricted(du.TECHNIQUE.needs_for(None, net)), du.Params())
    # the old computation: the largest conv outputs and primary-capsule lengths, in NumPy
    raw = run_probe(net, evaluation.images, needs={"conv:conv1", "conv:primary_conv",
                                                   "primary_capsules"})
    for layer in ("conv1", "primary_conv"):
        np.testing.assert_array_equal(arrays[f"filter_max_{layer}"],
                                      raw[f"conv:{layer}"].max((0, 1, 2)))
    lengths = np.linalg.norm(raw["primary_capsules"].astype(np.float64), axis=-1)
    types = net.description.primary_capsules.types
    np.testing.assert_allclose(arrays["type_max_length"],
                               lengths.reshape(len(lengths), -1, types).max((0, 1)), rtol=1e-6)
    np.testing.assert_array_equal(arrays["type_max_activation_primary_caps"],
                                  arrays["type_max_length"])
    assert arrays["filter_max_conv1"][3] == 0 and np.all(np.delete(arrays["filter_max_conv1"],
                                                                   3) > 0)
    assert arrays["type_max_length"][2] == 0
    summary = du.summarize(arrays, None)
    json.dumps(summary, allow_nan=False)
    assert summary["dead_filters_conv1"] == [3]
    assert set(range(2 * dims, 3 * dims)) <= set(summary["dead_filters_primary_conv"])
    assert 2 in summary["dead_types"] and summary["dead_types_primary_caps"] == \
        summary["dead_types"]
    assert summary["filter_count"] == 8 + 16 and summary["images"] == 10
    assert summary["dead_filter_fraction"] == pytest.approx(summary["dead_filter_count"] / 24)
    assert summary["dead_type_fraction"] == pytest.approx(len(summary["dead_types"]) / 4)


def test_layers_without_relu_are_not_checked(make_net):
    net = make_net(seed=1, primary={"types": 4, "dims": 4, "kernel_size": 3, "strides": 2,
                                    "activation": "none"})
    assert du.relu_layers(net) == ["conv1"]


@pytest.mark.slow
def test_every_grid_capsule_layer_of_matrix_capsules():
    net = build_tiny_em(seed=3)
    evaluation = _evaluation(net, count=4)
    arrays = du.compute(evaluation, du.Params(dead_type_threshold=0.5))
    grids = [c.name for c in net.description.capsule_layers if c.grid is not None]
    assert len(grids) >= 2
    raw = run_probe(net, evaluation.images, needs={f"activations:{n}" for n in grids})
    for name in grids:
        np.testing.assert_array_equal(arrays[f"type_max_activation_{name}"],
                                      raw[f"activations:{name}"].max((0, 1, 2)))
    summary = du.summarize(arrays, None)
    inactive = sum(int((arrays[f"type_max_activation_{n}"] < 0.5).sum()) for n in grids)
    assert summary["dead_type_count"] == inactive
    assert summary["type_count"] == sum(arrays[f"type_max_activation_{n}"].size for n in grids)
    ctx = RenderContext(model="em", step="1-10", class_names=CLASS_NAMES,
                        description=net.description)
    figure = du.TECHNIQUE.render(arrays, du.Params(), ctx)[0]
    assert "max activation" not in figure.caption and "largest activation" in figure.caption


def test_figures(tiny_net):
    arrays = du.compute(_evaluation(tiny_net), du.Params())
    summary = du.summarize(arrays, None)
    technique = du.TECHNIQUE
    assert (technique.name, technique.scope) == ("dead_units", "dataset")
    ctx = RenderContext(model="tiny", step="1-10", class_names=CLASS_NAMES,
                        description=tiny_net.description)
    figures = technique.render(arrays, du.Params(), ctx)
    assert [f.name for f in figures] == ["dead_units.png", "dead_units.svg", "dead_units.pdf"]
    assert "largest length" in figures[0].caption and "10 evaluation images" in \
        figures[0].caption
    assert technique.render_trend([("1-10", summary)], None, ctx) == []
    assert technique.render_compare([("A", summary)], None, ctx) == []
    trend = technique.render_trend([("1-10", summary), ("2-10", summary)], None, ctx)
    compare = technique.render_compare([("A", summary), ("B", summary)], None, ctx)
    assert [f.kind for f in trend + compare] == ["png", "svg", "pdf", "png", "svg", "pdf"]
