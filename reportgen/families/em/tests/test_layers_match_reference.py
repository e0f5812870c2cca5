"""The EM capsule layers give what they gave before they were made faster
(layers_before_speedup.py beside this file, the earlier keras.ops computation): class activations,
poses and the routing assignments R_ij every analysis reads, and the gradients of a training
step's spread loss for every weight, eagerly and XLA-compiled as the trainer runs them."""

from __future__ import annotations

import numpy as np
import pytest
from em_fixture import TINY_EM, build_tiny_em

from . import layers_before_speedup as before

# A second shape where a window holds more than 32 children (72 and 36 here): reductions that
# long are the ones XLA splits into windows, the layouts the speed-up chose differ most there.
WIDE = {"input_shape": [14, 14, 1], "num_classes": 4,
        "conv": [{"filters": 4, "kernel_size": 3}],
        "primary": {"types": 8, "kernel_size": 1, "strides": 1},
        "em": {"routing_iterations": 3, "inverse_temperature": 0.01,
               "conv_caps": [{"types": 4, "kernel_size": 3, "strides": 2},
                             {"types": 5, "kernel_size": 3, "strides": 1}]}}


def _reference_outputs(net, out, chained: bool, dtype="float32"):
    """The capsule layers' outputs recomputed by the reference from the model's primary
    capsules (the convolutions and primary capsules did not change), in `dtype`. `chained`:
    each reference layer reads the reference's previous layer (for the gradients of the whole
    reference); otherwise the model's (outputs compared layer by layer: routing at a low
    temperature magnifies float32 rounding handed on from the layer before)."""
    from keras import ops

    def cast(x):
        return ops.cast(x, dtype)

    layers = list(net.capsule_layers.values())
    names = list(net.capsule_layers)
    poses, activations = cast(out[f"{names[0]}_poses"]), cast(out[f"{names[0]}_activations"])
    want = {}
    for name, layer in zip(names[1:-1], layers[1:-1]):
        poses, activations, routing = before.conv_caps(
            poses, activations, cast(layer.kernel), cast(layer.beta_u), cast(layer.beta_a),
            layer.strides, layer.routing_iterations, layer.inverse_temperature,
            layer.detach_assignments)
        want[f"{name}_poses"], want[f"{name}_activations"] = poses, activations
        want[f"{names[names.index(name) - 1]}_routing"] = routing
        if not chained:
            poses, activations = out[f"{name}_poses"], out[f"{name}_activations"]
    cls = layers[-1]
    offsets = cls.coordinate_offsets().astype(dtype) if cls.coordinate_addition else None
    poses, activations, routing = before.class_caps(
        poses, activations, cast(cls.kernel), cast(cls.beta_u), cast(cls.beta_a), offsets,
        cls.routing_iterations, cls.inverse_temperature, cls.detach_assignments)
    want[f"{names[-2]}_routing"] = routing
    want["class_capsules"], want["activations"] = poses, activations
    return want


def _step(net, images, one_hot):
    """The model's outputs, the reference's (layer by layer), and the gradients of a training
    step's spread loss: the model's, the float32 reference's and the float64 reference's."""
    import tensorflow as tf

    from reportgen.capsnet.losses import spread_loss

    variables = net.model.trainable_variables
    losses = {}
    with tf.GradientTape(persistent=True) as tape:
        out = net.model(images, training=True)
        want = _reference_outputs(net, out, chained=False)
        losses["model"] = tf.reduce_mean(spread_loss(one_hot, out["activations"], net.margin))
        for dtype in ("float32", "float64"):
            chain = _reference_outputs(net, out, chained=True, dtype=dtype)
            losses[dtype] = tf.reduce_mean(spread_loss(
                tf.cast(one_hot, dtype), chain["activations"], tf.cast(net.margin, dtype)))
    grads = {k: tape.gradient(v, variables) for k, v in losses.items()}
    return out, want, grads


# Compiled (15-50 s each on 2 cores): the default (assignments not detached) at both shapes;
# eagerly, every combination (detaching changes what is differentiated, not how XLA compiles).
CASES = [(shape, False, detach) for shape in ("tiny", "wide") for detach in (False, True)] + \
    [pytest.param(shape, True, False, marks=pytest.mark.slow) for shape in ("tiny", "wide")]


@pytest.mark.parametrize(("shape", "compiled", "detach"), CASES)
def test_outputs_and_gradients_match_the_earlier_computation(shape, compiled, detach):
    """Outputs to float32 rounding; gradients as close to the float64 reference as the earlier
    float32 computation was (three EM iterations at lambda = 0.01 magnify rounding in the
    gradients to about 1e-4 of their size, in both)."""
    import tensorflow as tf

    overrides = {"tiny": TINY_EM, "wide": WIDE}[shape]
    net = build_tiny_em(seed=3, **{**overrides, "em": {**overrides["em"],
                                                       "detach_assignments": detach}})
    rng = np.random.default_rng(4)
    images = rng.random((3, *net.params.input_shape), dtype=np.float32)
    one_hot = np.eye(net.params.num_classes, dtype=np.float32)[[0, 1, 2]]
    step = lambda x, y: _step(net, x, y)  # noqa: E731
    if compiled:
        step = tf.function(step, jit_compile=True)
    out, want, grads = step(tf.constant(images), tf.constant(one_hot))
    assert set(want) <= set(out) and len(want) == 3 * len(net.capsule_layers) - 3
    for key, value in want.items():
        np.testing.assert_allclose(np.asarray(out[key]), np.asarray(value), rtol=1e-4,
                                   atol=1e-5, err_msg=key)
    errors, earlier = {}, {}
    # A gradient far smaller than the largest (beta_u: a sum of cancelling terms) is measured
    # against 1% of the largest: its float32 error is that of the terms, not of the sum.
    largest = max(float(np.abs(np.asarray(g)).max()) for g in grads["float64"])
    for var, g, g32, g64 in zip(net.model.trainable_variables, grads["model"],
                                grads["float32"], grads["float64"]):
        assert g is not None and g32 is not None and g64 is not None, var.path
        g, g32, g64 = (np.asarray(x, np.float64) for x in (g, g32, g64))
        scale = max(np.abs(g64).max(), 1e-2 * largest)
        errors[var.path] = np.abs(g - g64).max() / scale
        earlier[var.path] = np.abs(g32 - g64).max() / scale
    # Each weight's gradient within a few times the earlier computation's worst float32 error.
    bound = max(5 * max(earlier.values()), 1e-4)
    assert max(errors.values()) <= bound, (errors, earlier)
