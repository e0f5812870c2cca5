"""The decoder's reconstructions with one dimension of the target capsule offset at a time, the
others masked, as the model's own decoder draws them (in chunks or not)."""

from __future__ import annotations

import numpy as np

from reportgen.techniques import compute as helpers, get_technique


def _technique():
    return get_technique("decoder_perturbation")


def _params(**options):
    return _technique().params_type(**options)


def _run(batch, **options):
    return _technique().compute(batch, _params(**options))


def test_decoder_perturbation(tiny_net, probe):
    result = _run(probe)
    batch, classes, dims = probe["class_capsules"].shape
    deltas = np.asarray(_params().deltas, np.float32)
    steps = len(deltas)
    assert result["images"].shape == (batch, dims, steps, 12, 12, 1)
    np.testing.assert_array_equal(result["deltas"], np.tile(deltas, (batch, 1)))
    inputs = result["inputs"].reshape(batch, dims, steps, classes, dims)
    for b, t in enumerate(probe["predicted"]):
        assert result["target"][b] == t
        assert not np.delete(inputs[b], t, axis=2).any()                 # others masked
        change = inputs[b, :, :, t] - probe["class_capsules"][b, t]      # (D, S, D)
        expected = np.eye(dims)[:, None, :] * deltas[None, :, None]
        np.testing.assert_allclose(change, expected, atol=1e-6)
    decoded = np.asarray(tiny_net.decoder(result["inputs"].reshape(-1, classes * dims)))
    np.testing.assert_allclose(result["images"].reshape(decoded.shape), decoded, atol=1e-6)


def test_decoder_chunks_give_the_same_images(monkeypatch, probe):
    whole = _run(probe)["images"]
    monkeypatch.setattr(helpers, "DECODER_CHUNK", 7)
    np.testing.assert_allclose(_run(probe)["images"], whole, atol=1e-6)
