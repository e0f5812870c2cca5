"""The primary-capsule heatmaps: the squashed primary conv's lengths, and on hand-set weights
the one capsule a bright pixel lights."""

from __future__ import annotations

import numpy as np
from reference import capsules as oracle

from reportgen.probe.probe import run_probe
from reportgen.techniques import get_technique


def _technique():
    return get_technique("primary_heatmaps")


def _params(**options):
    return _technique().params_type(**options)


def _run(batch, **options):
    return _technique().compute(batch, _params(**options))


def test_primary_heatmaps_are_squashed_primary_conv_lengths(tiny_net, probe):
    gh, gw = tiny_net.grid_shape
    types, dims = tiny_net.params.primary.types, tiny_net.params.primary.dims
    poses = probe["conv:primary_conv"].reshape(len(probe), gh, gw, types, dims)
    expected = np.linalg.norm(oracle.squash(poses), axis=-1)
    result = _run(probe)
    assert result["lengths"].dtype == np.float32
    np.testing.assert_allclose(result["lengths"], expected, rtol=1e-5, atol=1e-6)


def test_primary_capsule_order_with_hand_set_weights(make_net):
    """One bright pixel lights exactly one known (row, col, type) capsule of length 0.8."""
    net = make_net(seed=3)
    conv1 = net.model.get_layer("conv1")
    kernel = np.zeros(conv1.kernel.shape, np.float32)
    kernel[1, 1, 0, 0] = 1.0                     # filter 0 copies the pixel under its centre
    conv1.set_weights([kernel, np.zeros(conv1.bias.shape, np.float32)])
    types, dims = 4, 4
    kernel = np.zeros(net.primary_conv.kernel.shape, np.float32)
    kernel[1, 1, 0, 2 * dims:3 * dims] = 1.0     # type 2 reads filter 0 under its centre tap
    net.primary_conv.set_weights([kernel, np.zeros(net.primary_conv.bias.shape, np.float32)])
    row, col = 1, 2
    image = np.zeros((1, 12, 12, 1), np.float32)
    image[0, 2 * row + 2, 2 * col + 2, 0] = 1.0  # conv1 (r, c) = image (r+1, c+1); stride 2
    batch = run_probe(net, image)
    lengths = _run(batch)["lengths"]
    expected = np.zeros((1, 4, 4, types), np.float32)
    expected[0, row, col, 2] = 0.8               # |s| = 2 -> squash length 4 / 5
    np.testing.assert_allclose(lengths, expected, atol=1e-6)
    gw = net.grid_shape[1]
    capsule_lengths = np.linalg.norm(batch["primary_capsules"][0], axis=-1)
    assert np.argmax(capsule_lengths) == (row * gw + col) * types + 2
