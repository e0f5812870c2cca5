"""The conv kernels are the layer's weights, read once per checkpoint."""

from __future__ import annotations

import numpy as np

from reportgen.techniques import get_technique


def _technique():
    return get_technique("conv_kernels")


def _params(**options):
    return _technique().params_type(**options)


def _run(batch, **options):
    return _technique().compute(batch, _params(**options))


def test_conv_kernels(tiny_net, probe):
    result = _run(probe, layer="conv1")
    assert _technique().scope == "checkpoint"
    assert result["kernels"].shape == (3, 3, 1, 8) and result["kernels"].dtype == np.float32
    np.testing.assert_array_equal(result["kernels"],
                                  tiny_net.model.get_layer("conv1").get_weights()[0])
