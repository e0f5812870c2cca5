"""The EM capsule layers give what they gave before they were made faster
(tests/reference/em_layers_keras.py, the earlier keras.ops computation): class activations,
poses and the routing assignments R_ij every analysis reads, and the gradients of a training
step's spread loss for every weight, eagerly and XLA-compiled as the trainer runs them."""

from __future__ import annotations

import numpy as np
import pytest
from em_fixture import TINY_EM, build_tiny_em
from reference import em_layers_keras as before

# A second shape where a window holds more than 32 children (72 and 36 here): reductions that
# long are the ones XLA splits into windows, the layouts the speed-up chose differ most there.
WIDE = {"input_shape": [14, 14, 1], "num_classes": 4,
        "conv": [{"filters": 4, "kernel_size": 3}],
        "primary": {"types": 8, "kernel_size": 1, "strides": 1},
        "em": {"routing_iterations": 3, "inverse_temperature": 0.01,
               "conv_caps": [{"types": 4, "kernel_size": 3, "strides": 2},
                             {"types": 5, "kernel_size": 3, "strides": 1}]}}


def _reference_outputs(net, out):
    """The capsule layers' outputs recomputed by the reference from the model's primary
    capsules (the convolutions and primary capsules did not change)."""
    layers = list(net.capsule_layers.values())
    names = list(net.capsule_layers)
    poses, activations = out[f"{names[0]}_poses"], out[f"{names[0]}_activations"]
    want = {}
    for name, layer in zip(names[1:-1], layers[1:-1]):
        poses, activations, routing = before.conv_caps(
            poses, activations, layer.kernel, layer.beta_u, layer.beta_a, layer.strides,
            layer.routing_iterations, layer.inverse_temperature, layer.detach_assignments)
        want[f"{name}_poses"], want[f"{name}_activations"] = poses, activations
        want[f"{names[names.index(name) - 1]}_routing"] = routing
    cls = layers[-1]
    offsets = cls.coordinate_offsets() if cls.coordinate_addition else None
    poses, activations, routing = before.class_caps(
        poses, activations, cls.kernel, cls.beta_u, cls.beta_a, offsets,
        cls.routing_iterations, cls.inverse_temperature, cls.detach_assignments)
    want[f"{names[-2]}_routing"] = routing
    want["class_capsules"], want["activations"] = poses, activations
    return want


def _step(net, images, one_hot):
    """(outputs, reference outputs, gradients, reference gradients) of the spread loss."""
    import tensorflow as tf

    from reportgen.capsnet.losses import spread_loss

    variables = net.model.trainable_variables
    with tf.GradientTape(persistent=True) as tape:
        out = net.model(images, training=True)
        want = _reference_outputs(net, out)
        loss = tf.reduce_mean(spread_loss(one_hot, out["activations"], net.margin))
        want_loss = tf.reduce_mean(spread_loss(one_hot, want["activations"], net.margin))
    grads = tape.gradient(loss, variables)
    want_grads = tape.gradient(want_loss, variables)
    return out, want, grads, want_grads


@pytest.mark.parametrize("shape", ["tiny", "wide"])
@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.slow)])
@pytest.mark.parametrize("detach", [False, True])
def test_outputs_and_gradients_match_the_earlier_computation(shape, compiled, detach):
    import tensorflow as tf

    overrides = {"tiny": TINY_EM, "wide": WIDE}[shape]
    net = build_tiny_em(seed=3, **{**overrides, "em": {**overrides["em"],
                                                       "detach_assignments": detach}})
    rng = np.random.default_rng(4)
    batch = 3
    images = rng.random((batch, *net.params.input_shape), dtype=np.float32)
    one_hot = np.eye(net.params.num_classes, dtype=np.float32)[[0, 1, 2][:batch]]
    step = lambda x, y: _step(net, x, y)  # noqa: E731
    if compiled:
        step = tf.function(step, jit_compile=True)
    out, want, grads, want_grads = step(tf.constant(images), tf.constant(one_hot))
    assert set(want) <= set(out) and len(want) == 3 * len(net.capsule_layers) - 3
    for key, value in want.items():
        np.testing.assert_allclose(np.asarray(out[key]), np.asarray(value), rtol=1e-4,
                                   atol=1e-5, err_msg=key)
    for var, g, w in zip(net.model.trainable_variables, grads, want_grads):
        g, w = np.asarray(g), np.asarray(w)
        scale = max(np.abs(w).max(), 1e-6)
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4 * scale, err_msg=var.path)
