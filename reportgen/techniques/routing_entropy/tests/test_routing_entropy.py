"""routing_entropy on tiny CapsNets and a tiny EM model: the entropy of the routing weights into
the classes and per routed layer, against the probe's weights in NumPy and against the one
routing_diagnostics technique it was split from (tests/reference/routing_diagnostics_v1.py,
the same numbers for every existing model); summaries and figures."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from em_fixture import build_tiny_em
from reference import routing_diagnostics_v1 as v1

from reportgen.errors import ReportgenError
from reportgen.probe.evaluation import EvalBatch
from reportgen.techniques import routing_entropy as re_
from reportgen.techniques.base import RenderContext

CLASS_NAMES = ("a", "b", "c")
CLASS_KEYS = ("entropy_hist", "entropy_edges", "entropy_deficit_hist", "entropy_deficit_edges",
              "entropy_mean_class", "entropy_image_mean", "entropy_type_mean", "entropy_mean",
              "entropy_max")
LAYER_KEYS = ("layer_entropy_hist", "layer_entropy_edges", "layer_entropy_mean",
              "layer_entropy_uniform", "layer_entropy_normalized_mean",
              "layer_entropy_weighted_mean", "layer_children")


def _evaluation(net, count=10, seed=21):
    rng = np.random.default_rng(seed)
    return EvalBatch(net, rng.random((count, 12, 12, 1), dtype=np.float32),
                     rng.integers(0, 3, count), CLASS_NAMES)


def _restricted(net, evaluation):
    return evaluation.restricted(re_.TECHNIQUE.needs_for(None, net), "routing_entropy")


@pytest.fixture(scope="module")
def evaluation(tiny_net):
    return _evaluation(tiny_net)


@pytest.fixture(scope="module")
def result(tiny_net, evaluation):
    return re_.compute(_restricted(tiny_net, evaluation), re_.Params())


def test_entropy_extremes():
    uniform = np.full((2, 5, 4), 0.25)
    np.testing.assert_allclose(re_.entropy(uniform), math.log(4))
    np.testing.assert_array_equal(re_.entropy(np.eye(4)[[0, 3, 1]]), 0.0)


def test_deficit_bins():
    log_k = math.log(10)
    edges = re_.deficit_edges(log_k, 7)
    centres = np.sqrt(edges[:-1] * edges[1:])
    assert re_.deficit_bins(centres, log_k, 7).tolist() == list(range(7))
    assert re_.deficit_bins(np.array([-1e-9, 0.0, 1e-9, log_k]), log_k, 7).tolist() == \
        [0, 0, 0, 6]


@pytest.mark.parametrize("grouping", re_.GROUPINGS)
def test_the_numbers_of_the_technique_it_was_split_from(tiny_net, evaluation, grouping):
    """Dynamic routing: every array the old routing_diagnostics gave, equal (the activation
    weighting now reads the lengths as float32: equal to 1e-6)."""
    new = re_.compute(_restricted(tiny_net, evaluation), re_.Params(grouping=grouping))
    old = v1.compute(evaluation, v1.Params(grouping=grouping, kept_images=0))
    for key in CLASS_KEYS:
        np.testing.assert_array_equal(new[key], old[key], err_msg=key)
    assert float(new["entropy_length_weighted_mean"]) == pytest.approx(
        float(old["entropy_length_weighted_mean"]), rel=1e-6)
    # the one routed layer of a CapsNet, per layer: the same entropies against log K
    assert float(new["layer_entropy_uniform"][0]) == pytest.approx(math.log(3))
    assert float(new["layer_entropy_mean"][0]) == pytest.approx(float(old["entropy_mean"]),
                                                               rel=1e-6)


@pytest.mark.slow
def test_em_numbers_of_the_technique_it_was_split_from():
    net = build_tiny_em(seed=3)
    evaluation = _evaluation(net, count=6)
    new = re_.compute(_restricted(net, evaluation), re_.Params())
    old = v1.compute(evaluation, v1.Params())
    for key in LAYER_KEYS:
        np.testing.assert_array_equal(new[key], old[key], err_msg=key)
    np.testing.assert_array_equal(new["layer_entropy_image_mean"], old["entropy_image_mean"])
    summary, before = re_.summarize(new), v1.summarize(old)
    for key in ("layers", "entropy_mean_per_layer", "entropy_uniform_per_layer",
                "entropy_normalized_per_layer", "entropy_weighted_normalized_per_layer",
                "entropy_max"):
        assert summary[key] == pytest.approx(before[key]), key
    # into the classes, from the class layer's assignments in float64: the same mean
    assert summary["entropy_mean"] == pytest.approx(before["entropy_mean"], rel=1e-5)
    classes = evaluation.tensors("routing:conv_caps2")["routing:conv_caps2"].astype(np.float64)
    np.testing.assert_allclose(new["entropy_image_mean"],
                               (-classes * np.log(classes)).sum(-1).mean(1), rtol=1e-12)


@pytest.mark.parametrize("grouping", re_.GROUPINGS)
def test_one_routing_iteration_gives_log_classes(make_net, grouping):
    net = make_net(seed=3, class_caps={"dims": 4, "routing_iterations": 1})
    arrays = re_.compute(_evaluation(net, count=6),
                         re_.Params(grouping=grouping, entropy_bins=20))
    log_k = math.log(3)
    assert float(arrays["entropy_max"]) == pytest.approx(log_k)
    assert float(arrays["entropy_mean"]) == pytest.approx(log_k, abs=1e-6)
    assert float(arrays["entropy_length_weighted_mean"]) == pytest.approx(log_k, abs=1e-6)
    np.testing.assert_allclose(arrays["entropy_type_mean"], log_k, atol=1e-6)
    hist = arrays["entropy_hist"]
    assert np.all(hist[:, :-1] == 0)                    # everything in the last bin
    deficit = arrays["entropy_deficit_hist"]
    assert np.all(deficit[:, 1:] == 0) and deficit.sum() == pytest.approx(hist.sum())
    assert hist.sum() == pytest.approx(6 * 64)          # each capsule counted once in total
    assert re_.summarize(arrays)["entropy_mean_normalized"] == pytest.approx(1.0, abs=1e-6)


def test_entropy_against_the_probe(evaluation, result):
    coupling = evaluation.tensors("routing:primary_caps")["routing:primary_caps"].astype(np.float64)
    h = -np.sum(coupling * np.log(coupling), -1)
    np.testing.assert_allclose(result["entropy_image_mean"], h.mean(1), rtol=1e-6)
    owner = coupling.argmax(-1)
    for k in range(3):
        assert float(result["entropy_mean_class"][k]) == pytest.approx(h[owner == k].mean(),
                                                                        rel=1e-6)
    assert result["entropy_hist"].sum() == h.size


def test_params_validation():
    hash(re_.Params())
    assert re_.variants(None) == [re_.Params()]
    with pytest.raises(ReportgenError):
        re_.Params(grouping="mean")
    with pytest.raises(ReportgenError):
        re_.Params(entropy_bins=0)


def test_summary_and_figures(tiny_net, evaluation, result):
    summary = re_.summarize(result, None)
    json.dumps(summary, allow_nan=False)
    assert summary["images"] == 10 and summary["entropy_max"] == pytest.approx(math.log(3))
    assert summary["layers"] == 1
    technique = re_.TECHNIQUE
    assert (technique.name, technique.scope, technique.layer) == ("routing_entropy",
                                                                  "dataset", "class")
    ctx = RenderContext(model="tiny", step="1-10", class_names=CLASS_NAMES,
                        description=tiny_net.description)
    figures = technique.render(result, re_.Params(), ctx)
    assert [f.name for f in figures] == ["entropy.png", "entropy.svg", "entropy.pdf"]
    assert "argmax" in figures[0].caption
    assert "coupling coefficients of dynamic routing" in figures[0].caption
    assert "c_ij log c_ij" in figures[0].caption
    weighted = re_.compute(evaluation, re_.Params(grouping="weighted"))
    assert "weight" in technique.render(weighted, re_.Params(grouping="weighted"), ctx)[0].caption
    assert technique.render_trend([("1-10", summary)], None, ctx) == []
    assert technique.render_compare([("A", summary)], None, ctx) == []
    trend = technique.render_trend([("1-10", summary), ("2-10", summary)], None, ctx)
    compare = technique.render_compare([("A", summary), ("B", summary)], None, ctx)
    assert [f.kind for f in trend + compare] == ["png", "svg", "pdf", "png", "svg", "pdf"]


@pytest.mark.slow
def test_em_figures_name_the_assignments():
    net = build_tiny_em(seed=3)
    arrays = re_.compute(_evaluation(net, count=4), re_.Params())
    ctx = RenderContext(model="em", step="1-10", class_names=CLASS_NAMES,
                        description=net.description)
    figures = re_.TECHNIQUE.render(arrays, re_.Params(), ctx)
    assert [f.name for f in figures if f.kind == "png"] == ["entropy.png",
                                                           "routing_entropy_layers.png"]
    assert "EM assignments" in figures[0].caption and "R_ij" in figures[3].caption
    summary = re_.summarize(arrays)
    mixed = [("CapsNet", {**summary, "layers": 1}), ("EM", summary)]
    assert len(re_.TECHNIQUE.render_compare(mixed, None, ctx)) == 3


def test_the_intervals_over_images_against_the_probe(tiny_net, evaluation, result):
    """Each interval from per-image values computed here from the probe's routing weights and
    lengths: the mean entropy and each layer's by the BCa bootstrap of each image's mean H,
    the length-weighted and per-class means by the bootstrap of their pooled ratios."""
    from reportgen.results import intervals as iv
    from reportgen.sdk.testing import check_summary_csv

    tensors = evaluation.tensors("routing:primary_caps", "activations:primary_caps")
    coupling = tensors["routing:primary_caps"].astype(np.float64)              # (n, N, K)
    h = -np.sum(coupling * np.log(coupling), -1)                               # (n, N)
    active = tensors["activations:primary_caps"].astype(np.float64).reshape(len(h), -1)
    summary = re_.summarize(result)
    mean = iv.interval_of(summary, "entropy_mean")
    assert mean == iv.bootstrap_mean(h.mean(1)) and mean.low < mean.value < mean.high
    normalized = iv.interval_of(summary, "entropy_mean_normalized")
    assert normalized.high == pytest.approx(mean.high / math.log(3))
    weighted = iv.interval_of(summary, "entropy_length_weighted_mean")
    reference = iv.bootstrap_statistic(np.stack([(h * active).sum(1), active.sum(1)], 1),
                                       lambda rows: rows[:, 0].sum() / rows[:, 1].sum())
    assert (weighted.value, weighted.low, weighted.high) == pytest.approx(
        (reference.value, reference.low, reference.high), rel=1e-5)
    owner = coupling.argmax(-1)
    for k in range(3):
        mine = owner == k
        reference = iv.bootstrap_statistic(
            np.stack([(h * mine).sum(1), mine.sum(1)], 1),
            lambda rows: rows[:, 0].sum() / rows[:, 1].sum())
        got = iv.interval_of(summary, "entropy_mean_per_class", k)
        assert (got.value, got.low, got.high) == pytest.approx(
            (reference.value, reference.low, reference.high), rel=1e-5)
    layer = iv.interval_of(summary, "entropy_mean_per_layer", 0)
    assert (layer.value, layer.low, layer.high) == pytest.approx(
        (mean.value, mean.low, mean.high), rel=1e-5)       # one routed layer: the same images
    assert "entropy_uniform_per_layer" not in summary["intervals"]
    check_summary_csv(summary)
