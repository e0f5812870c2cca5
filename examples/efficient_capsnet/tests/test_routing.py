"""The squash and the self-attention routing equal the NumPy oracle written from the paper's
equations and the authors' code (numpy_oracle.py), on random inputs and weights; so does the
whole head of a built model, from its last convolution to the class-capsule lengths."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import GRID, TINY, build, randomise
from numpy_oracle import fc_caps, head, squash

TOLERANCE = 1e-6


def test_squash_matches_the_oracle_and_saturates_as_eq_2_says():
    from efficient_capsnet.layers import efficient_squash

    rng = np.random.default_rng(0)
    s = rng.normal(0, 1.5, (64, 8)).astype(np.float32)
    s[0] = 0.0                                          # a zero capsule stays zero
    got = np.asarray(efficient_squash(s))
    np.testing.assert_allclose(got, squash(s), atol=TOLERANCE, rtol=0)
    assert np.all(got[0] == 0)
    lengths = np.linalg.norm(got, axis=-1)
    np.testing.assert_allclose(lengths[1:], 1 - np.exp(-np.linalg.norm(s[1:], axis=-1)),
                               atol=TOLERANCE)
    direction = s[1:] / np.linalg.norm(s[1:], axis=-1, keepdims=True)
    np.testing.assert_allclose(got[1:] / lengths[1:, None], direction, atol=1e-5)


def _layer(classes, dims, children, child_dims, bias=True, seed=0, scale=0.5):
    from efficient_capsnet.layers import FCCaps

    rng = np.random.default_rng(seed)
    layer = FCCaps(classes, dims, routing_bias=bias)
    layer.build((None, children, child_dims))
    W = rng.normal(0, scale, (classes, children, child_dims, dims)).astype(np.float32)
    weights = [W]
    if bias:
        weights.append(rng.normal(0, 0.2, (classes, children, 1)).astype(np.float32))
    layer.set_weights(weights)
    return layer, weights


@pytest.mark.parametrize("seed, scale", [(0, 0.1), (1, 0.5), (2, 1.0)])
def test_the_routing_matches_the_oracle_on_random_inputs(seed, scale):
    """16 primary capsules of 8 dims (squashed, so |u_i| < 1) into 10 classes of 16 dims, as
    in the MNIST network; W of three scales, so that the couplings go from near uniform to
    near one-hot."""
    layer, (W, b) = _layer(10, 16, 16, 8, seed=seed, scale=scale)
    rng = np.random.default_rng(100 + seed)
    u = squash(rng.normal(0, 1.0, (5, 16, 8))).astype(np.float32)
    v, c, weights = (np.asarray(t) for t in layer(u))
    v_ref, c_ref, w_ref = fc_caps(u, W, b)
    differences = [np.abs(v - v_ref).max(), np.abs(c - c_ref).max(),
                   np.abs(weights - w_ref).max()]
    print(f"seed {seed}, W scale {scale}: max |difference| v {differences[0]:.2e}, "
          f"c {differences[1]:.2e}, c + b {differences[2]:.2e}; coupling range "
          f"{c_ref.min():.3f}..{c_ref.max():.3f}")
    assert max(differences) <= TOLERANCE
    np.testing.assert_allclose(c.sum(-1), 1.0, atol=1e-6)      # each child's, over the classes
    if scale >= 0.5:
        assert np.ptp(c_ref) > 0.5                                # far from uniform


def test_the_bias_is_added_after_the_softmax():
    """With the bias the coupling is the same (b is added after the softmax) and only the
    weighted sum changes; without it, the weights are the coupling."""
    layer, (W, b) = _layer(10, 16, 16, 8, seed=3)
    plain, _ = _layer(10, 16, 16, 8, bias=False, seed=3)
    u = squash(np.random.default_rng(4).normal(0, 1.0, (3, 16, 8))).astype(np.float32)
    v, c, weights = (np.asarray(t) for t in layer(u))
    v0, c0, weights0 = (np.asarray(t) for t in plain(u))
    np.testing.assert_allclose(c, c0, atol=1e-7)
    np.testing.assert_allclose(weights0, c0, atol=0)
    np.testing.assert_allclose(weights - c, np.broadcast_to(b[..., 0].T, c.shape), atol=1e-6)
    assert np.abs(v - v0).max() > 1e-3
    np.testing.assert_allclose(v0, fc_caps(u, W, None)[0], atol=TOLERANCE)


def test_the_votes_are_the_layers_own():
    layer, (W, _) = _layer(10, 16, 16, 8, seed=5)
    u = np.random.default_rng(6).normal(0, 1.0, (2, 16, 8)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(layer.votes(u)),
                               np.einsum("bnd,knde->bnke", u, W), atol=1e-5)


@pytest.mark.parametrize("raw", [TINY, GRID], ids=["1x1", "3x3"])
def test_the_models_head_matches_the_oracle(raw):
    """From the last convolution's ReLU output, the oracle applies BatchNorm (the model's moving
    statistics), the grouped convolution as sums, the squash and the routing: it reaches the
    model's primary capsules, class capsules, couplings and lengths."""
    net = build(raw)
    randomise(net)
    images = np.random.default_rng(7).uniform(0, 1, (4, 28, 28, 1)).astype(np.float32)
    out = {k: np.asarray(v) for k, v in net.model(images, training=False).items()}
    bn = net.model.get_layer("conv2_batch_norm").get_weights()
    kernel, bias = net.model.get_layer("primary_conv").get_weights()
    W, b = net.class_caps.get_weights()
    primary = net.description.primary_capsules
    expected = head(out["conv2"], bn, kernel[..., 0], bias, primary.types, primary.pose_size,
                    W, b)
    names = ("primary_capsules", "class_capsules", "primary_caps_routing",
             "primary_caps_routing_with_bias", "lengths")
    for name, reference in zip(names, expected):
        scale = max(1.0, float(np.abs(reference).max()))
        assert np.abs(out[name] - reference).max() <= 1e-5 * scale, name
