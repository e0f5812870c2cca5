"""The decoder's reconstructions of the target capsule rescaled to each length, the others
masked, as the model's own decoder draws them."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.probe.probe import ProbeBatch
from reportgen.techniques import get_technique


def _technique():
    return get_technique("decoder_length")


def _params(**options):
    return _technique().params_type(**options)


def _run(batch, **options):
    return _technique().compute(batch, _params(**options))


@pytest.mark.parametrize("target", [-1, 1])
def test_decoder_length(target, tiny_net, probe):
    result = _run(probe, target=target)
    batch, classes, dims = probe["class_capsules"].shape
    wanted = np.asarray(_params().lengths, np.float32)
    expected_target = probe["predicted"] if target == -1 else np.full(batch, target)
    np.testing.assert_array_equal(result["target"], expected_target.astype(np.float32))
    inputs = result["inputs"].reshape(batch, len(wanted), classes, dims)
    norms = np.linalg.norm(inputs, axis=-1)                              # (B, P, K)
    for b, t in enumerate(expected_target):
        np.testing.assert_allclose(norms[b, :, t], wanted, atol=1e-5)
        assert not np.delete(inputs[b], t, axis=1).any()                 # others masked
        direction = probe["class_capsules"][b, t] / np.linalg.norm(probe["class_capsules"][b, t])
        np.testing.assert_allclose(inputs[b, -1, t], direction, atol=1e-5)
    np.testing.assert_allclose(result["lengths"], np.tile(wanted, (batch, 1)), atol=1e-5)
    assert result["images"].shape == (batch, len(wanted), 12, 12, 1)
    decoded = np.asarray(tiny_net.decoder(result["inputs"].reshape(-1, classes * dims)))
    np.testing.assert_allclose(result["images"].reshape(decoded.shape), decoded, atol=1e-6)
    assert all(v.dtype == np.float32 for v in result.values())


def test_decoder_length_zero_capsule_stays_zero(tiny_net, probe):
    tensors = dict(probe.tensors, class_capsules=np.zeros_like(probe["class_capsules"]))
    result = _run(ProbeBatch(net=tiny_net, images=probe.images, tensors=tensors))
    assert np.isfinite(result["images"]).all()
    assert not result["inputs"].any() and not result["lengths"].any()
