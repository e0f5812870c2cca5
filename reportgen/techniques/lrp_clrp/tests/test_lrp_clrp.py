"""The lrp_clrp technique on a tiny CNN baseline (ConvNet-FC head) against an independent
recomputation: the plain-NumPy LRP equations of numpy_lrp.py unit by unit (LRP, the CLRP1 dual
seeded S_y / (K - 1) on the other logits, the CLRP2 dual through the negated top layer), the
top-2 classes from the Keras model's own logits, and 1 - cosine in NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from . import numpy_lrp


def numpy_layers(net):
    """The CNN's chain as numpy_lrp layer dicts: conv1, conv2, flatten, dense1, logits."""
    import keras

    out = []
    for layer in net.model.layers:
        if isinstance(layer, keras.layers.Conv2D):
            out.append({"kind": "conv", "kernel": np.asarray(layer.kernel, np.float64),
                        "bias": np.asarray(layer.bias, np.float64), "stride": layer.strides[0],
                        "relu": layer.activation.__name__ == "relu"})
        elif isinstance(layer, keras.layers.Flatten):
            out.append({"kind": "flatten"})
        elif isinstance(layer, keras.layers.Dense):
            out.append({"kind": "dense", "kernel": np.asarray(layer.kernel, np.float64),
                        "bias": np.asarray(layer.bias, np.float64),
                        "relu": layer.activation.__name__ == "relu"})
    return out


def oracle_maps(layers, x, target):
    """(lrp, clrp1, clrp2) pixel maps of one image for `target`, in NumPy."""
    lrp, scores = numpy_lrp.lrp_one(layers, x, target)
    classes = len(scores)
    seed = np.full(classes, scores[target] / (classes - 1))
    seed[target] = 0.0
    dual1, _ = numpy_lrp.lrp_one(layers, x, target, seed=seed)
    negated = [dict(layer) for layer in layers]
    negated[-1]["kernel"] = -negated[-1]["kernel"]
    negated[-1]["bias"] = -negated[-1]["bias"]
    seed2 = np.zeros(classes)
    seed2[target] = scores[target]
    dual2, _ = numpy_lrp.lrp_one(negated, x, target, seed=seed2)
    lrp, dual1, dual2 = (r.sum(axis=-1) for r in (lrp, dual1, dual2))
    return lrp, np.maximum(lrp - dual1, 0.0), np.maximum(lrp - dual2, 0.0)


def one_minus_cosine(a, b):
    a, b = a.reshape(-1), b.reshape(-1)
    norms = np.linalg.norm(a) * np.linalg.norm(b)
    return np.nan if norms == 0 else 1.0 - a @ b / norms


@pytest.fixture(scope="module")
def cnn():
    import family_nets

    return family_nets.build(family_nets.tiny_cnn("fc"), seed=2)


def test_stored_maps_and_discriminativeness_equal_the_numpy_equations(cnn, images):
    from reportgen.probe.probe import run_probe
    from reportgen.techniques.lrp_clrp import TECHNIQUE, Params

    x = images[:3]
    batch = run_probe(cnn, x, needs=TECHNIQUE.needs_for(Params(), cnn))
    got = TECHNIQUE.compute(batch.restricted(TECHNIQUE.needs_for(Params(), cnn)), Params())
    logits = np.asarray(cnn.model(x)["logits"], np.float64)
    top2 = np.argsort(-logits, axis=1, kind="stable")[:, :2]
    np.testing.assert_array_equal(got["classes"], top2)
    np.testing.assert_allclose(got["scores"], np.take_along_axis(logits, top2, 1), rtol=1e-5)
    layers = numpy_layers(cnn)
    for b in range(len(x)):
        want = np.stack([np.stack(oracle_maps(layers, x[b], int(c))) for c in top2[b]])
        scale = np.abs(want).max()
        np.testing.assert_allclose(got["maps"][b], want, atol=2e-5 * scale)
        disc = [one_minus_cosine(want[0, v], want[1, v]) for v in range(3)]
        np.testing.assert_allclose(got["discriminativeness"][b], disc, atol=1e-4)
    assert (got["supported"] == 1).all()


def test_batch_equals_image_by_image(cnn, images):
    from reportgen.probe.probe import run_probe
    from reportgen.techniques.lrp_clrp import TECHNIQUE, Params

    whole = TECHNIQUE.compute(run_probe(cnn, images[:4]), Params())
    for b in range(4):
        one = TECHNIQUE.compute(run_probe(cnn, images[b:b + 1]), Params())
        for key in ("maps", "discriminativeness", "scores"):
            np.testing.assert_allclose(whole[key][b], one[key][0], rtol=1e-5, atol=1e-6)


def test_a_squashing_head_has_no_rule_and_says_so(images):
    """ConvNet-CR-SF squashes vectors: LRP has no rule for it, the maps are NaN and the
    figure says why."""
    import family_nets

    from reportgen.figures.figure import RenderContext
    from reportgen.probe.probe import run_probe
    from reportgen.techniques.lrp_clrp import TECHNIQUE, Params

    net = family_nets.build(family_nets.tiny_cnn("cr_sf"))
    got = TECHNIQUE.compute(run_probe(net, images[:2]), Params())
    assert (got["supported"] == 0).all() and np.isnan(got["maps"]).all()
    figure = TECHNIQUE.render({k: v[0] for k, v in got.items()}, Params(),
                              RenderContext(model="m", step="1", class_names=("a", "b", "c")))[0]
    assert "has no rule" in figure.caption and "squash" in figure.caption


def test_a_capsule_network_is_told_why_not(tiny_net):
    """The plan of a CapsNet says in one plain clause why LRP is not for it."""
    from reportgen.engine.model import not_applicable_reason
    from reportgen.engine.step import plan
    from reportgen.techniques import get_technique
    from reportgen.techniques.lrp_clrp.numbers import NOT_A_CNN

    for name in ("lrp_clrp", "clrp_evaluation"):
        chosen = plan([get_technique(name)], tiny_net.description)
        assert not chosen.variants
        assert not_applicable_reason(chosen.not_applicable[0][1]) == NOT_A_CNN
