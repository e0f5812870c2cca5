"""GraCapsNet's multi-head graph pooling (Gu, Wu & Tresp, AAAI 2021) against the NumPy oracle
written from its equations (numpy_oracle.py beside this file): attention, class capsules and the
built-in explanation (its technique's maps and figures), the description, a `.keras` round trip
and the settings' checks."""

from __future__ import annotations

import io

import numpy as np
import pytest
from family_nets import TINY_GRACAPS, build

from reportgen.capsnet.description import describe
from reportgen.errors import ReportgenError
from reportgen.settings.model_params import parse_model_params

from . import numpy_oracle as graph_oracle


def _np(x):
    return np.asarray(x, np.float64)


def test_gracaps_matches_the_numpy_oracle(images):
    net = build(TINY_GRACAPS)
    out = net.model(images)
    layer = net.class_caps
    primary = _np(out["primary_capsules"])
    v, attention, explanation = graph_oracle.graph_pooling(
        primary, _np(layer.projection), _np(layer.pooling), heads=4, grid=(4, 4), sigma=1.5)
    np.testing.assert_allclose(_np(out["attention"]), attention, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(_np(out["class_capsules"]), v, rtol=1e-4, atol=1e-6)
    # Attention sums to 1 over the nodes, per image, head and class.
    np.testing.assert_allclose(_np(out["attention"]).sum(axis=2), 1.0, rtol=1e-5)
    # The built-in explanation is the mean over heads, on the grid, class by class.
    from reportgen.probe.probe import run_probe
    from reportgen.families.gracapsnet import attention as gracaps_attention

    result = gracaps_attention.compute(run_probe(net, images, needs={"attention", "predicted"}))
    want = np.moveaxis(explanation, -1, 1).reshape(len(images), 3, 4, 4)
    np.testing.assert_allclose(result["maps"], want, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(result["maps"].sum(axis=(2, 3)), 1.0, rtol=1e-5)
    predicted = result["predicted"].astype(int)
    for b in range(len(images)):
        heads = np.moveaxis(attention[b, :, :, predicted[b]].reshape(4, 4, 4), 0, 0)
        np.testing.assert_allclose(result["head_maps"][b], heads, rtol=1e-4, atol=1e-7)
        np.testing.assert_allclose(result["head_maps"][b].mean(0), want[b, predicted[b]],
                                   rtol=1e-4, atol=1e-7)
    # Image by image, the same numbers as in a batch.
    one = gracaps_attention.compute(run_probe(net, images[1:2], needs={"attention", "predicted"}))
    np.testing.assert_allclose(one["maps"][0], result["maps"][1], rtol=1e-5, atol=1e-7)
    # Drawn as on the model's page: the explanation (one panel per class) and the heads of
    # the predicted class, each a PNG of the size it declares.
    from PIL import Image

    from reportgen.figures.figure import RenderContext

    ctx = RenderContext(model="m", step="1-1", class_names=("a", "b", "c"), image=images[0],
                        description=net.description)
    figures = gracaps_attention.TECHNIQUE.render({k: v[0] for k, v in result.items()},
                                                 gracaps_attention.Params(), ctx)
    assert [f.name for f in figures] == ["explanation.png", "heads.png"]
    for figure in figures:
        with Image.open(io.BytesIO(figure.data)) as png:
            assert png.size == (figure.width, figure.height)
    assert "4x4 primary-capsule grid" in figures[0].caption and "4 heads" in figures[0].caption
    name = "abc"[predicted[0]]
    assert f"predicted class {name}" in figures[1].caption


def test_gracaps_description_and_round_trips(images, tmp_path):
    import keras

    from reportgen.families.gracapsnet.layers import GraphPooling

    net = build(TINY_GRACAPS)
    d = net.description
    assert d == describe(net.params)
    assert d.primary_capsules.routing.kind == "attention" and d.primary_capsules.grid == (4, 4)
    assert {"attention", "primary_capsules", "class_capsules", "decoder"} <= d.features
    assert "dynamic_routing" not in d.features
    assert net.model.get_layer("class_caps") is net.class_caps
    config = net.class_caps.get_config()
    assert GraphPooling.from_config(config).get_config() == config
    path = tmp_path / "gracaps.keras"
    net.model.save(path)
    loaded = keras.saving.load_model(path)
    want, got = net.model(images), loaded(images)
    for key in want:
        np.testing.assert_allclose(_np(got[key]), _np(want[key]), rtol=1e-6, atol=1e-7)


def test_sigma_must_be_positive():
    raw = {**TINY_GRACAPS, "graph": {"sigma": 0}}
    with pytest.raises(ReportgenError, match="graph.sigma"):
        describe(parse_model_params(raw))
