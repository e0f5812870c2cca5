"""Activation maximization: gradient ascent from an all-black input lengthens each class capsule."""

from __future__ import annotations

import numpy as np

from reportgen.probe.probe import run_probe
from reportgen.techniques import get_technique


def _technique():
    return get_technique("activation_maximization")


def _params(**options):
    return _technique().params_type(**options)


def test_activation_maximization(make_net, images):
    technique = _technique()
    assert technique.scope == "checkpoint" and technique.experimental
    assert _params() == technique.params_type(200, 0.05)
    tiny_net = make_net(seed=5)
    # A fresh net's zero biases put every ReLU of an all-black input exactly at 0, where its
    # gradient is 0 and the ascent cannot start; trained nets have non-zero biases.
    conv1 = tiny_net.model.get_layer("conv1")
    conv1.set_weights([conv1.kernel.numpy(), np.full(conv1.bias.shape, 0.1, np.float32)])
    probe = run_probe(tiny_net, images[:1], gradients=False)
    result = technique.compute(probe, _params(steps=5))
    assert result["images"].shape == (3, 12, 12, 1) and result["lengths"].shape == (3, 3)
    assert result["images"].min() >= 0 and result["images"].max() <= 1
    assert result["images"].any()
    lengths = np.asarray(tiny_net.model(result["images"])["lengths"])
    np.testing.assert_allclose(result["lengths"], lengths, atol=1e-6)
    black = np.asarray(tiny_net.model(np.zeros((3, 12, 12, 1), np.float32))["lengths"])
    assert (np.diag(result["lengths"]) > np.diag(black)).all()


def test_a_learnt_readout_of_vector_capsules_is_ascended_on_the_class_poses_lengths():
    """A network whose class scores are logits a learnt layer reads out of vector class
    capsules returns no "lengths": the ascent and the reported lengths are the class poses'
    norms (it raised KeyError 'lengths')."""
    from types import SimpleNamespace

    import keras

    keras.utils.set_random_seed(0)
    x = keras.Input((4, 4, 1))
    dense = keras.layers.Dense(6, bias_initializer="ones")      # non-zero poses at black
    poses = keras.layers.Reshape((3, 2))(dense(keras.layers.Flatten()(x)))
    logits = keras.layers.Flatten()(keras.layers.Dense(1)(poses))
    model = keras.Model(x, {"class_capsules": poses, "logits": logits})
    net = SimpleNamespace(model=model, description=SimpleNamespace(classes=3,
                                                                   input_shape=(4, 4, 1)))
    technique = get_technique("activation_maximization")
    result = technique.compute(SimpleNamespace(net=net), technique.params_type(steps=3))
    expected = np.linalg.norm(np.asarray(model(result["images"])["class_capsules"]), axis=-1)
    np.testing.assert_allclose(result["lengths"], expected, rtol=1e-5)
    assert result["images"].shape == (3, 4, 4, 1) and result["images"].max() > 0
