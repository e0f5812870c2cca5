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
