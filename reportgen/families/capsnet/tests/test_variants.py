"""Gu 2022's settings of the CapsNet against the NumPy oracle (tests/reference/capsules.py): No-R
(`class_caps.routing = "none"`: uniform coupling coefficients) and Aff-CapsNet
(`class_caps.weight_sharing = "all"`: one transformation matrix per class, shared by every
primary capsule), with and without dynamic routing."""

from __future__ import annotations

import numpy as np
import pytest
from reference import capsules as oracle


def _np(x):
    return np.asarray(x, np.float64)


def test_routing_none_gives_uniform_coupling(make_net, images):
    """No-R: every coupling coefficient is 1/classes, and the class capsules are the squashed
    uniform sum of the votes."""
    net = make_net(class_caps={"dims": 4, "routing": "none", "routing_iterations": 3})
    assert net.description.primary_capsules.routing.iterations == 1
    out = net.model(images)
    coupling = _np(out["coupling"])
    np.testing.assert_allclose(coupling, 1.0 / 3, rtol=1e-6)
    votes = oracle.votes(_np(out["primary_capsules"]), _np(net.class_caps.kernel))
    np.testing.assert_allclose(_np(out["class_capsules"]), oracle.squash(votes.sum(1) / 3),
                               rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("routing", ["none", "dynamic"])
def test_shared_w_is_one_matrix_per_class(make_net, images, routing):
    """Aff-CapsNet: W_ij = W_j, one (dims x input dims) matrix per class for every primary
    capsule; with dynamic routing (Aff-CapsNet-DR) the same votes are routed."""
    net = make_net(class_caps={"dims": 4, "weight_sharing": "all", "routing": routing})
    kernel = _np(net.class_caps.kernel)
    assert kernel.shape == (1, 3, 4, 4)
    out = net.model(images)
    primary = _np(out["primary_capsules"])
    shared = np.broadcast_to(kernel, (primary.shape[1], *kernel.shape[1:]))
    votes = oracle.votes(primary, shared)
    np.testing.assert_allclose(_np(net.class_caps.votes(out["primary_capsules"])), votes,
                               rtol=1e-5, atol=1e-6)
    iterations = 1 if routing == "none" else 3
    want, _ = oracle.dynamic_routing(votes, iterations)
    np.testing.assert_allclose(_np(out["class_capsules"]), want, rtol=1e-4, atol=1e-6)
