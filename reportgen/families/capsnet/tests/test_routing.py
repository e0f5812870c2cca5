"""Dynamic routing by agreement (Sabour et al. 2017, Procedure 1) and the class capsules routing
with it against the NumPy oracle (tests/reference/capsules.py): couplings, votes, class capsules,
and weight sharing per capsule type as tiled per-capsule matrices."""

from __future__ import annotations

import numpy as np
import pytest
from keras import ops
from reference import capsules as oracle

from reportgen.families.capsnet.layers import ClassCaps
from reportgen.families.capsnet.routing import dynamic_routing


def _np(x):
    return np.asarray(ops.convert_to_numpy(x))


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@pytest.mark.parametrize("iterations", [1, 3])
def test_dynamic_routing(iterations, rng):
    votes = rng.normal(scale=0.3, size=(2, 12, 3, 5)).astype(np.float32)
    v, c = dynamic_routing(ops.convert_to_tensor(votes), iterations)
    expected_v, expected_c = oracle.dynamic_routing(votes, iterations)
    np.testing.assert_allclose(_np(v), expected_v, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(_np(c), expected_c, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(_np(c).sum(-1), 1.0, atol=1e-6)
    if iterations == 1:
        np.testing.assert_allclose(_np(c), 1.0 / 3)


def test_class_caps_votes_and_routing_match_oracle(rng):
    primary = rng.normal(scale=0.5, size=(2, 8, 4)).astype(np.float32)
    layer = ClassCaps(3, 5, routing_iterations=3)
    v, c = layer(primary)
    kernel = layer.kernel.numpy()
    assert kernel.shape == (8, 3, 5, 4)
    expected_votes = oracle.votes(primary, kernel)
    np.testing.assert_allclose(_np(layer.votes(primary)), expected_votes, rtol=1e-5, atol=1e-6)
    expected_v, expected_c = oracle.dynamic_routing(expected_votes, 3)
    np.testing.assert_allclose(_np(v), expected_v, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(_np(c), expected_c, rtol=1e-4, atol=1e-6)


def test_weight_sharing_equals_tiled_matrices(rng):
    """One matrix per capsule type == per-capsule matrices tiled over the grid cells."""
    types, cells = 4, 6
    primary = rng.normal(scale=0.5, size=(2, cells * types, 4)).astype(np.float32)
    shared = ClassCaps(3, 5, weight_sharing=True, capsule_types=types)
    shared.build(primary.shape)
    assert tuple(shared.kernel.shape) == (types, 3, 5, 4)
    full = ClassCaps(3, 5, weight_sharing=False)
    full.build(primary.shape)
    # Capsule i = cell * types + type uses the shared matrix of its type.
    tiled = np.tile(shared.kernel.numpy(), (cells, 1, 1, 1))
    full.kernel.assign(tiled)
    np.testing.assert_allclose(_np(shared.votes(primary)), _np(full.votes(primary)),
                               rtol=1e-5, atol=1e-6)
    for a, b in zip(shared(primary), full(primary)):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="multiple"):
        ClassCaps(3, 5, weight_sharing=True, capsule_types=5).build((2, 24, 4))
