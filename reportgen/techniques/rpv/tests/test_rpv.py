"""Routing Path Visualization against the NumPy oracle (tests/reference/analyses.py), on the
routing weights the oracle's dynamic routing finds for the tiny CapsNet's own votes."""

from __future__ import annotations

import numpy as np
import pytest
from reference import analyses, capsules as oracle

from reportgen.techniques import get_technique


def _technique():
    return get_technique("rpv")


def _params(**options):
    return _technique().params_type(**options)


def _run(batch, **options):
    return _technique().compute(batch, _params(**options))


@pytest.fixture(scope="module")
def routed(tiny_net, probe):
    """The NumPy routing oracle run on the model's own votes: (votes, class capsules, coupling)."""
    votes = np.asarray(tiny_net.class_caps.votes(probe["primary_capsules"]))
    v, c = oracle.dynamic_routing(votes, tiny_net.params.class_caps.routing_iterations)
    return votes, v, c


@pytest.mark.parametrize("method", ["modified", "original"])
def test_rpv_matches_oracle(method, tiny_net, probe, routed):
    _, v, c = routed
    expected = analyses.rpv(probe["primary_capsules"], c, v, tiny_net.grid_shape,
                            tiny_net.params.primary.types, method)
    maps = _run(probe, method=method)["maps"]
    assert maps.dtype == np.float32 and maps.shape == (len(probe), 3, 4, 4)
    assert np.abs(expected).max() > 0
    np.testing.assert_allclose(maps, expected, rtol=2e-4, atol=1e-6 * np.abs(expected).max())
