"""The conv feature maps are the layer's activations, and a filter that never fires is dead."""

from __future__ import annotations

import numpy as np

from reportgen.probe.probe import run_probe
from reportgen.techniques import get_technique


def _technique():
    return get_technique("conv_feature_maps")


def _params(**options):
    return _technique().params_type(**options)


def _run(batch, **options):
    return _technique().compute(batch, _params(**options))


def test_conv_feature_maps_and_dead_filters(make_net, images):
    net = make_net(seed=4)
    conv1 = net.model.get_layer("conv1")
    kernel, bias = (w.numpy() for w in (conv1.kernel, conv1.bias))
    bias[3] = -100.0                             # filter 3 can never fire on [0, 1] inputs
    conv1.set_weights([kernel, bias])
    batch = run_probe(net, images, gradients=False)
    result = _run(batch, layer="conv1")
    np.testing.assert_array_equal(result["maps"], batch["conv:conv1"])
    assert result["maps"].shape == (5, 10, 10, 8) and result["dead"].shape == (5, 8)
    expected = (batch["conv:conv1"].reshape(5, -1, 8).max(axis=1) == 0).astype(np.float32)
    np.testing.assert_array_equal(result["dead"], expected)
    assert result["dead"][:, 3].all()
