"""The Keras layers and whole models equal the NumPy oracle written from the paper's equations
(numpy_oracle.py) on random inputs and weights: one routing step of each capsule layer, with and
without parents, and the whole network from the image to the logits under concurrent and
sequential routing; the routing weights are normalised as declared."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FLAT, MODEL, TINY, TWO_LAYERS, build, build_params, digits, oracle_weights
from conftest import randomise
from numpy_oracle import conv_caps, fc_caps, forward, layer_norm

TOLERANCE = 1e-5


def _random(layer, shape, rng, scale):
    layer(np.zeros(shape, np.float32))                # build
    values = []
    for w in layer.weights:
        if w.name == "gamma":
            values.append(rng.uniform(0.5, 1.5, w.shape))
        elif w.name == "beta":
            values.append(rng.normal(0, 0.3, w.shape))
        else:
            values.append(rng.normal(0, scale, w.shape))
    layer.set_weights([v.astype(np.float32) for v in values])
    return [np.asarray(v, np.float64) for v in layer.get_weights()]


@pytest.mark.parametrize("scale", [0.1, 0.3, 1.0])
def test_conv_caps_matches_the_oracle(scale):
    """The MNIST layer's geometry, 10x10 x 8 types -> 3x3 s2 -> 4x4 x 8; W of three scales, so
    that the routing goes from near uniform to near one-hot."""
    from idpa_capsnet.layers import ConvCaps

    rng = np.random.default_rng(int(scale * 10))
    layer = ConvCaps(8, 3, 2)
    children = layer_norm(rng.normal(0, 1, (3, 10, 10, 8, 16)), 1.0, 0.0).astype(np.float32)
    W, gamma, beta = _random(layer, children.shape, rng, scale)
    first, r_first = (np.asarray(t) for t in layer(children))
    second, r_second = (np.asarray(t) for t in layer(children, first))
    worst = 0.0
    for image in range(len(children)):
        p1, q1 = conv_caps(children[image], W, gamma, beta, 2)
        p2, q2 = conv_caps(children[image], W, gamma, beta, 2, first[image])
        worst = max(worst, *(np.abs(a - b).max() for a, b in [
            (first[image], p1), (r_first[image], q1), (second[image], p2),
            (r_second[image], q2)]))
    print(f"W scale {scale}: max |Keras - oracle| {worst:.2e}; r in "
          f"{r_second.min():.3f}..{r_second.max():.3f}")
    assert worst <= TOLERANCE
    assert first.shape == (3, 4, 4, 8, 16) and r_second.shape == (3, 4, 4, 3, 3, 8, 8)
    np.testing.assert_allclose(r_first, 1 / 8, rtol=1e-6)  # no parents yet: uniform (float32)
    np.testing.assert_allclose(r_second.sum(-1), 1.0, atol=1e-6)   # per window entry
    if scale >= 1.0:
        assert r_second.max() > 0.9                         # far from uniform


@pytest.mark.parametrize("scale", [0.1, 1.0])
def test_class_caps_matches_the_oracle(scale):
    """128 children of a 4x4 grid x 8 types into 10 classes, grid in, reportgen's order."""
    from idpa_capsnet.layers import ClassCaps

    rng = np.random.default_rng(7 + int(scale * 10))
    layer = ClassCaps(10)
    children = layer_norm(rng.normal(0, 1, (3, 4, 4, 8, 16)), 1.0, 0.0).astype(np.float32)
    W, gamma, beta = _random(layer, children.shape, rng, scale)
    first, r_first = (np.asarray(t) for t in layer(children))
    second, r_second = (np.asarray(t) for t in layer(children, first))
    worst = 0.0
    for image in range(len(children)):
        flat = children[image].reshape(-1, 16)           # (row, column, type)
        p1, q1 = fc_caps(flat, W, gamma, beta)
        p2, q2 = fc_caps(flat, W, gamma, beta, first[image])
        worst = max(worst, *(np.abs(a - b).max() for a, b in [
            (first[image], p1), (r_first[image], q1), (second[image], p2),
            (r_second[image], q2)]))
    print(f"W scale {scale}: max |Keras - oracle| {worst:.2e}")
    assert worst <= TOLERANCE
    np.testing.assert_allclose(r_first, 1 / 10, rtol=1e-7)          # float32's 0.1
    np.testing.assert_allclose(r_second.sum(-1), 1.0, atol=1e-6)


def test_a_child_under_several_windows_has_one_normalised_row_per_window():
    """Stride 1, kernel 3 over 5x5: the centre child is in all 9 windows, at a different
    kernel entry of each; its 9 rows each sum to 1 and differ from one another."""
    from idpa_capsnet.layers import ConvCaps

    rng = np.random.default_rng(3)
    layer = ConvCaps(4, 3, 1)
    children = layer_norm(rng.normal(0, 1, (1, 5, 5, 2, 16)), 1.0, 0.0).astype(np.float32)
    _random(layer, children.shape, rng, 1.0)
    first, _ = layer(children)
    _, r = (np.asarray(t) for t in layer(children, first))
    rows = np.stack([r[0, y, x, 2 - y, 2 - x, 0] for y in range(3) for x in range(3)])
    np.testing.assert_allclose(rows.sum(-1), 1.0, atol=1e-6)
    assert np.ptp(rows, axis=0).max() > 0.05


def _compare(net, images, label):
    out = {k: np.asarray(v) for k, v in net.model(images, training=False).items()}
    own = net.params.family_settings
    ref = forward(oracle_weights(net), images, own.iterations, not own.sequential_routing,
                  own.layer_norm_epsilon)
    d = net.description
    *grid_layers, _ = d.capsule_layers
    pairs = {"conv1": ref["conv1"], "primary_capsules": ref["primary_capsules"],
             "class_capsules": ref["class_capsules"], "logits": ref["logits"],
             "probabilities": ref["probabilities"],
             grid_layers[-1].routing.output_of(grid_layers[-1].name): ref["class_routing"]}
    for layer, r in zip(grid_layers[:-1], ref["conv_caps_routing"]):
        pairs[layer.routing.output_of(layer.name)] = r
    worst = {}
    for name, reference in pairs.items():
        scale = max(1.0, float(np.abs(reference).max()))
        worst[name] = float(np.abs(out[name] - reference).max()) / scale
    print(label, {k: f"{v:.1e}" for k, v in worst.items()})
    assert max(worst.values()) <= TOLERANCE, worst
    return out


@pytest.mark.parametrize("raw", [TINY, TWO_LAYERS, FLAT],
                         ids=["tiny", "two-conv-caps-sequential-3", "no-conv-caps-2x2"])
def test_the_model_matches_the_oracle(raw):
    net = build(raw)
    randomise(net, scale=3.0)
    _compare(net, digits(3), raw.get("idpa"))


def test_the_mnist_model_matches_the_oracle():
    """The 105,201-parameter MNIST network, every weight randomised, 4 digits."""
    from reportgen.sdk import load_model_params

    net = build_params(load_model_params(MODEL))
    randomise(net, scale=2.0)
    out = _compare(net, digits(4, seed=1), "MNIST_IDPA")
    r = out["primary_caps_routing"]
    assert r.shape == (4, 4, 4, 3, 3, 8, 8)
    assert np.ptp(r) > 0.3                                 # the routing is not uniform


def test_one_iteration_is_uniform_routing():
    net = build({**TINY, "idpa": {**TINY["idpa"], "iterations": 1}})
    out = net.model(digits(2), training=False)
    np.testing.assert_allclose(np.asarray(out["primary_caps_routing"]), 1 / 4, atol=1e-7)
    np.testing.assert_allclose(np.asarray(out["conv_caps1_routing"]), 1 / 10, atol=1e-7)


@pytest.mark.parametrize("raw", [TINY, TWO_LAYERS, FLAT],
                         ids=["tiny", "two-conv-caps-sequential-3", "no-conv-caps-2x2"])
def test_the_votes_are_those_the_class_capsules_were_routed_from(raw):
    """The "votes" capability: net.votes(images) is v_ij = P_i W_ij of the poses the last
    iteration's class capsules were routed from (under concurrent routing: the layer below's
    of the iteration before), and LayerNorm(sum_i r_ij v_ij) with the model's own r gives its
    class capsules."""
    net = build(raw)
    randomise(net, scale=3.0)
    images = digits(3, seed=4)
    own = net.params.family_settings
    weights = oracle_weights(net)
    ref = forward(weights, images, own.iterations, not own.sequential_routing,
                  own.layer_norm_epsilon)
    children = ref["conv_caps"][-1] if ref["conv_caps"] else \
        ref["primary_capsules"].reshape(len(images), *net.description.capsule_layers[0].grid,
                                        -1, net.description.capsule_layers[0].pose_size)
    W, gamma, beta = weights["class_caps"]
    q = W.shape[1]
    flat = children.reshape(len(images), -1, q, q)
    expected = np.einsum("bnax,nxdm->bnmad", flat, W).reshape(*flat.shape[:2], W.shape[-1], -1)
    votes = np.asarray(net.votes(images))
    assert votes.shape == expected.shape
    assert np.abs(votes - expected).max() <= TOLERANCE * max(1.0, np.abs(expected).max())
    out = net.model(images, training=False)
    *_, below, _ = net.description.capsule_layers
    r = np.asarray(out[below.routing.output_of(below.name)], np.float64)
    rebuilt = layer_norm(np.einsum("bnm,bnmd->bmd", r, votes), gamma, beta,
                         own.layer_norm_epsilon)
    np.testing.assert_allclose(np.asarray(out["class_capsules"]), rebuilt, atol=2e-5)
