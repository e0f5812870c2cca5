"""The family's own technique: the coupling, the routing bias and their sum per input, read
through reportgen's probe, equal the model's outputs and weights; it applies to this family
only; it draws a PNG, an SVG and a PDF."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TINY, build, randomise


def _batch(net, count=3):
    from reportgen.sdk.testing import run_probe
    from efficient_capsnet.technique import TECHNIQUE

    images = np.random.default_rng(0).uniform(0, 1, (count, 28, 28, 1)).astype(np.float32)
    needs = TECHNIQUE.needs_for(None, net)
    return run_probe(net, images, needs).restricted(needs, TECHNIQUE.name), images


def test_the_numbers_are_the_models_coupling_and_bias():
    from efficient_capsnet.technique import TECHNIQUE

    net = build(TINY)
    randomise(net)
    batch, images = _batch(net)
    result = TECHNIQUE.compute(batch, None)
    out = {k: np.asarray(v) for k, v in net.model(images, training=False).items()}
    np.testing.assert_allclose(result["coupling"], out["primary_caps_routing"], atol=1e-7)
    np.testing.assert_allclose(result["weights"], out["primary_caps_routing_with_bias"],
                               atol=1e-6)
    b = net.class_caps.get_weights()[1][..., 0].T                         # (children, classes)
    np.testing.assert_allclose(result["bias"], np.broadcast_to(b, result["bias"].shape),
                               atol=1e-6)
    np.testing.assert_allclose(result["coupling"].sum(-1), 1.0, atol=1e-6)
    assert np.array_equal(result["predicted"], out["lengths"].argmax(1))
    # one image at a time gives the same numbers
    from reportgen.sdk.testing import subset

    one = TECHNIQUE.compute(subset(batch, [1]), None)
    np.testing.assert_allclose(one["weights"][0], result["weights"][1], atol=1e-6)


def test_it_applies_to_this_family_only():
    from reportgen.sdk import describe, parse_model_params

    from efficient_capsnet.technique import TECHNIQUE

    net = build(TINY)
    assert TECHNIQUE.applicable(net.description)
    assert TECHNIQUE.variants(net) == [TECHNIQUE.params_type()]
    capsnet = describe(parse_model_params({**{k: v for k, v in TINY.items()
                                              if k not in ("family", "efficient_capsnet")},
                                           "primary": {"types": 4, "dims": 4,
                                                       "kernel_size": 3, "strides": 2}}))
    assert not TECHNIQUE.applicable(capsnet)
    assert TECHNIQUE.missing_features(capsnet) == {"self_attention_routing"}


def test_it_draws_the_three_maps_with_a_caption():
    from reportgen.sdk import RenderContext

    from efficient_capsnet.technique import TECHNIQUE

    net = build(TINY)
    randomise(net)
    batch, _ = _batch(net, 1)
    result = {k: v[0] for k, v in TECHNIQUE.compute(batch, None).items()}
    ctx = RenderContext(model="Tiny", step="1-0", class_names=tuple(map(str, range(10))),
                        description=net.description)
    figures = TECHNIQUE.render(result, None, ctx)
    assert [f.kind for f in figures] == ["png", "svg", "pdf"]
    assert figures[0].data.startswith(b"\x89PNG") and figures[0].width > 0
    predicted = int(result["predicted"])
    assert f"predicted class {predicted}:" in figures[0].caption
    assert "Details: " in figures[0].caption
    numbers = TECHNIQUE.numbers(result, None, ctx)
    assert numbers["predicted"] == predicted
    assert numbers["coupling_share"] == \
        pytest.approx(result["coupling"][:, predicted].sum() / 4, rel=1e-6)
