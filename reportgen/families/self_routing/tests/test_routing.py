"""Self-Routing capsules (Hahn, Pyeon & Kim 2019) against the NumPy oracle written from the
equations (numpy_oracle.py beside this file): the routing function on random inputs and its edge
cases (zero logits, a child with all its weight on one parent, activations near 0), finite
gradients, the Keras layers against the oracle's windows, the uniform first coupling, the
parameter count of the authors' SmallNet, and the routing diagnostics' count of each child's
parents through a zero-padded kernel."""

from __future__ import annotations

import numpy as np
import pytest
from family_nets import TINY_SELF_ROUTING

from reportgen.capsnet.description import parents_per_child
from reportgen.errors import ReportgenError
from reportgen.families.self_routing.routing import self_routing
from reportgen.settings.families import family_of
from reportgen.settings.model_params import PARAMS_FILE, load_model_params, parse_model_params

from . import numpy_oracle as oracle


def _random(rng, batch=2, children=7, parents=4, dims=3):
    return (rng.normal(size=(batch, children, parents, dims)),
            rng.uniform(0.05, 1.0, size=(batch, children)),
            rng.normal(size=(batch, children, parents)) * 2.0)


def test_the_function_matches_the_oracle_on_random_inputs():
    votes, activations, logits = _random(np.random.default_rng(0))
    got = self_routing(votes, activations, logits)
    want = oracle.self_routing(votes, activations, logits)
    assert [g.shape for g in got] == [(2, 4), (2, 4, 3), (2, 7, 4)]
    for g, w, name in zip(got, want, ("activations", "poses", "coupling")):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=name)
    # every child's couplings sum to 1 over the parents, so the parents' activations do too
    np.testing.assert_allclose(got[2].sum(-1), 1.0)
    np.testing.assert_allclose(got[0].sum(-1), 1.0)


def test_zero_logits_couple_uniformly_and_give_the_activation_weighted_mean_vote():
    votes, activations, _ = _random(np.random.default_rng(1))
    a, poses, coupling = self_routing(votes, activations, np.zeros((2, 7, 4)))
    np.testing.assert_allclose(coupling, 0.25)
    np.testing.assert_allclose(a, 0.25)
    mean = np.einsum("bn,bnpd->bpd", activations, votes) / activations.sum(1)[:, None, None]
    np.testing.assert_allclose(poses, mean, rtol=1e-12)


def test_a_child_with_all_its_weight_on_one_parent_is_that_parents_pose():
    votes, activations, logits = _random(np.random.default_rng(2), batch=1)
    logits[0, :, 2] = -1e4            # nobody routes to parent 2 …
    logits[0, 3] = [-1e4, -1e4, 1e4, -1e4]   # … but child 3, all of it
    a, poses, coupling = self_routing(votes, activations, logits)
    np.testing.assert_allclose(coupling[0, 3], [0, 0, 1, 0], atol=1e-12)
    np.testing.assert_allclose(poses[0, 2], votes[0, 3, 2], rtol=1e-12)
    np.testing.assert_allclose(a[0, 2], activations[0, 3] / activations[0].sum(), rtol=1e-12)
    want = oracle.self_routing(votes, activations, logits)
    for g, w in zip((a, poses, coupling), want):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)


def test_activations_near_zero_are_scale_free_and_all_zero_gives_zero():
    votes, activations, logits = _random(np.random.default_rng(3))
    tiny = self_routing(votes, activations * 1e-20, logits)
    plain = self_routing(votes, activations, logits)
    for t, p in zip(tiny, plain):
        np.testing.assert_allclose(t, p, rtol=1e-9)
    a, poses, _ = self_routing(votes, np.zeros((2, 7)), logits)
    assert np.all(a == 0) and np.all(poses == 0)


def test_the_keras_routing_has_finite_gradients_also_for_silent_children():
    import tensorflow as tf

    from reportgen.families.self_routing.routing import self_routing_ops

    votes, activations, logits = (tf.constant(x, tf.float32)
                                  for x in _random(np.random.default_rng(4)))
    activations = tf.concat([activations[:1], tf.zeros_like(activations[1:])], 0)
    with tf.GradientTape() as tape:
        tape.watch([votes, activations, logits])
        a, poses, _ = self_routing_ops(votes, activations, logits)
        total = tf.reduce_sum(a) + tf.reduce_sum(poses ** 2)
    grads = tape.gradient(total, [votes, activations, logits])
    assert all(np.all(np.isfinite(g.numpy())) for g in grads)
    np.testing.assert_allclose(a.numpy()[0], self_routing(
        *(x.numpy() for x in (votes, activations, logits)))[0][0], rtol=1e-5)


def _layer_inputs(rng, batch=2, grid=(5, 4), types=3, dims=4):
    return (rng.normal(size=(batch, *grid, types, dims)).astype(np.float32),
            rng.uniform(0.0, 1.0, size=(batch, *grid, types)).astype(np.float32))


@pytest.mark.parametrize("kernel,stride,padding", [(3, 2, 1), (3, 1, 0), (2, 2, 1)])
def test_the_conv_layer_matches_the_oracle_window_by_window(kernel, stride, padding):
    from reportgen.families.self_routing.layers import SelfRoutingConvCaps

    rng = np.random.default_rng(kernel * 10 + stride + padding)
    poses, activations = _layer_inputs(rng)
    layer = SelfRoutingConvCaps(2, 5, kernel, stride, padding)
    layer([poses, activations])                                   # builds the weights
    slots = kernel * kernel * 3
    w1 = rng.normal(size=(slots, 4, 10)).astype(np.float32) * 0.5
    w2 = rng.normal(size=(slots, 4, 2)).astype(np.float32)
    beta = rng.normal(size=(slots, 2)).astype(np.float32)
    layer.set_weights([w1, w2, beta])
    out_poses, out_acts, routing = (t.numpy() for t in layer([poses, activations]))
    a, v, couplings = oracle.conv_self_routing(poses, activations, w1, w2, beta, kernel, stride,
                                               padding)
    np.testing.assert_allclose(out_acts, a, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(out_poses, v, rtol=1e-4, atol=1e-5)
    # dense routing: child (y, x, t) -> parent (p, q, o) is its window coupling divided by the
    # number of windows that see it; each child's weights sum to 1
    batch, ph, pw = a.shape[:3]
    seen = {}
    for (b, p, q, y, x, t) in couplings:
        seen.setdefault((b, y, x, t), []).append((p, q))
    want = np.zeros((batch, 5, 4, 3, ph, pw, 2))
    for (b, p, q, y, x, t), c in couplings.items():
        want[b, y, x, t, p, q] = c / len(seen[(b, y, x, t)])
    np.testing.assert_allclose(routing, want.reshape(batch, 60, ph * pw * 2), atol=1e-6)
    covered = np.array([[(0, y, x, t) in seen for x in range(4) for t in range(3)]
                        for y in range(5)]).reshape(-1)
    np.testing.assert_allclose(routing[0].sum(-1), covered.astype(float), atol=1e-5)


def test_the_class_layer_matches_the_oracle_over_the_whole_grid():
    from reportgen.families.self_routing.layers import SelfRoutingClassCaps

    rng = np.random.default_rng(7)
    poses, activations = _layer_inputs(rng, grid=(3, 3))
    layer = SelfRoutingClassCaps(4)
    layer([poses, activations])
    w2 = rng.normal(size=(27, 4, 4)).astype(np.float32)
    beta = rng.normal(size=(27, 4)).astype(np.float32)
    layer.set_weights([w2, beta])
    scores, coupling = (t.numpy() for t in layer([poses, activations]))
    a, _, couplings = oracle.conv_self_routing(poses, activations, None, w2, beta, 3, 1, 0)
    np.testing.assert_allclose(scores, a[:, 0, 0], rtol=1e-5, atol=1e-7)
    want = np.array([[couplings[(b, 0, 0, y, x, t)] for y in range(3) for x in range(3)
                      for t in range(3)] for b in range(2)])
    np.testing.assert_allclose(coupling, want, rtol=1e-5, atol=1e-7)


@pytest.fixture(scope="module")
def tiny():
    import keras

    keras.utils.set_random_seed(0)
    params = parse_model_params(TINY_SELF_ROUTING)
    return params, family_of(params).build(params)


def test_the_first_coupling_is_uniform_and_the_class_activations_a_distribution(tiny):
    """W2 = beta = 0 at initialisation: every window's couplings are 1/B (Hahn et al. 2019)."""
    params, net = tiny
    images = np.random.default_rng(0).uniform(size=(3, 12, 12, 1)).astype(np.float32)
    out = {k: v.numpy() for k, v in net.model(images, training=False).items()}
    np.testing.assert_allclose(out["conv_caps1_routing"], 1.0 / 3.0, rtol=1e-6)
    primary = out["primary_caps_routing"]                    # (3, 6*6*2, 3*3*3)
    fan = parents_per_child(net.description, "primary_caps")
    nonzero = primary > 0
    np.testing.assert_array_equal(nonzero.sum(-1), np.broadcast_to(fan, (3, len(fan))))
    np.testing.assert_allclose(primary[nonzero], np.broadcast_to(1.0 / fan[:, None],
                                                                 primary.shape)[nonzero],
                               rtol=1e-6)
    np.testing.assert_allclose(out["activations"].sum(-1), 1.0, rtol=1e-5)
    assert out["class_capsules"].shape == (3, 3, 1)
    layers = net.capsule_layers
    assert not np.any(layers["conv_caps1"].w2.numpy()) and not np.any(
        layers["class_caps"].beta.numpy())


def test_the_loss_is_the_negative_log_likelihood_of_the_true_class(tiny):
    params, net = tiny
    images = np.random.default_rng(1).uniform(size=(4, 12, 12, 1)).astype(np.float32)
    one_hot = np.eye(3, dtype=np.float32)[[0, 1, 2, 1]]
    nll, reconstruction, scores = (t.numpy() for t in net.training_losses(images, one_hot))
    np.testing.assert_allclose(nll, -np.log((scores * one_hot).sum(-1)), rtol=1e-5)
    assert not np.any(reconstruction)


def test_the_parameter_count_of_the_authors_smallnet():
    """SmallNet in SR mode on 28x28 (github.com/coder3000/SR-CapsNet, models/smallnet.py):
    conv1 7x7x1x256 (no bias) + its BatchNorm's scale and offset, the activation conv 5x5x256x16
    + BN, the pose conv 5x5x256x(16x16) + BN; ConvCaps with 3x3x16 child slots, each W1
    (16 types x 16 dims, 16), W2 (16, 16), beta (16), + BN of its 256 pose channels; class
    capsules with 5x5x16 slots, each W2 (10, 16) and beta (10)."""
    import keras

    expected = (7 * 7 * 256 + 2 * 256
                + 5 * 5 * 256 * 16 + 2 * 16
                + 5 * 5 * 256 * 256 + 2 * 256
                + 144 * 256 * 16 + 144 * 16 * 16 + 144 * 16 + 2 * 256
                + 400 * 10 * 16 + 400 * 10)
    assert expected == 2_451_904
    params = load_model_params(f"models/MNIST_SelfRouting/{PARAMS_FILE}")
    assert family_of(params).count_params(params) == expected
    keras.utils.set_random_seed(0)
    net = family_of(params).build(params)
    assert net.trainable_params() == expected
    assert family_of(params).display_name(params) == "Self-Routing"
    primary, conv_caps, classes = net.description.capsule_layers
    assert (primary.grid, conv_caps.grid) == ((10, 10), (5, 5))


def test_the_routing_diagnostics_count_every_parent_through_the_padded_kernel(tiny):
    """parents_per_child reads the padding from the receptive fields: through a 3x3 stride-2
    kernel over a 6x6 grid padded by 1 (windows over rows -1..1, 1..3, 3..5), rows 0..5 are
    seen by 1, 2, 1, 2, 1, 1 windows."""
    _, net = tiny
    fan = parents_per_child(net.description, "primary_caps").reshape(6, 6, 2)
    per_row = np.array([1, 2, 1, 2, 1, 1])
    np.testing.assert_array_equal(fan[..., 0], per_row[:, None] * per_row[None, :] * 3)
    assert np.all(parents_per_child(net.description, "conv_caps1") == 3)


def test_a_decoder_is_refused_in_one_line():
    with pytest.raises(ReportgenError) as error:
        parse_model_params({**TINY_SELF_ROUTING, "decoder": {"enabled": True}})
    assert "decoder.enabled" in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(ReportgenError, match="self_routing.conv_caps_kernel_size"):
        parse_model_params({**TINY_SELF_ROUTING,
                            "self_routing": {"conv_caps_kernel_size": 9}})


def test_the_described_grids_and_fields_are_what_the_model_sees():
    """Every conv map and capsule grid has the described shape, and its cells change with
    exactly the input pixels of their described receptive field (zero padding included):
    positive kernels, one lit pixel per image, compared with a blank image."""
    import keras

    keras.utils.set_random_seed(0)
    params = parse_model_params(TINY_SELF_ROUTING)
    net = family_of(params).build(params)
    description = net.description
    for layer in net.model.layers:
        if isinstance(layer, keras.layers.Conv2D):
            layer.set_weights([np.full(layer.kernel.shape, 0.1, np.float32)])
    pixels = np.concatenate([np.zeros((1, 12, 12, 1), np.float32),
                             np.eye(144, dtype=np.float32).reshape(-1, 12, 12, 1)])
    outputs = {k: v.numpy() for k, v in net.model(pixels, training=False).items()}
    grids = [(c.name, c.name, c.grid, c.receptive_field) for c in description.conv_layers]
    # poses: with the uniform first coupling every parent's activation is 1/B whatever the input
    grids += [(f"{c.name}_poses", c.name, c.grid, c.receptive_field)
              for c in description.capsule_layers if c.grid is not None]
    for output, name, grid, field in grids:
        values = outputs[output]
        assert values.shape[1:3] == grid, name
        # (above float32 rounding of the weighted means)
        changed = np.abs(values[1:] - values[:1]).reshape(144, *grid, -1).max(-1) > 1e-6
        seen = np.moveaxis(changed, 0, -1).reshape(*grid, 12, 12)
        want = np.zeros_like(seen)
        for r in range(grid[0]):
            for c in range(grid[1]):
                y0, x0 = field.start[0] + r * field.stride[0], field.start[1] + c * field.stride[1]
                want[r, c, max(y0, 0):y0 + field.size[0], max(x0, 0):x0 + field.size[1]] = True
        np.testing.assert_array_equal(seen, want, err_msg=name)
