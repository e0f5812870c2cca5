"""The heads of Gu 2022's CNN baselines: what each predicts by (softmax, the sigmoid of a class's
unit sum, the length of the squashed class vector), against NumPy, with the description, the
parameter count and the encoder matching the model."""

from __future__ import annotations

import numpy as np
import pytest
from family_nets import CNN_HEADS, build, tiny_cnn
from reference import capsules as oracle

from reportgen.capsnet.description import describe
from reportgen.capsnet.param_count import count_trainable_params


def _np(x):
    return np.asarray(x, np.float64)


@pytest.mark.parametrize("head", CNN_HEADS)
def test_cnn_heads(head, images):
    """What each head predicts by: softmax (avg, fc, r), sigmoid of the class's unit sum (cr),
    length of the squashed class vector (cr_sf); the description matches the model."""
    net = build(tiny_cnn(head))
    d = net.description
    assert d == describe(net.params) and d.head.kind == "logits" and not d.capsule_layers
    assert net.trainable_params() == count_trainable_params(net.params)
    out = {k: _np(v) for k, v in net.model(images).items()}
    for conv in d.conv_layers:
        assert out[conv.name].shape[1:] == (*conv.grid, conv.filters)
    logits, probabilities = out["logits"], out["probabilities"]
    if head in ("avg", "fc", "r"):
        np.testing.assert_allclose(probabilities, oracle.softmax(logits, axis=1), rtol=1e-5)
    elif head == "cr":
        np.testing.assert_allclose(logits, out["features"].sum(-1), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(probabilities, 1 / (1 + np.exp(-logits)), rtol=1e-5)
    else:
        # exact lengths, even of these untrained near-zero (~1e-6) vectors: no epsilon floor
        lengths = np.linalg.norm(out["features"].astype(np.float64), axis=-1)
        np.testing.assert_allclose(probabilities, lengths, rtol=1e-5)
        np.testing.assert_allclose(lengths, logits ** 2 / (1 + logits ** 2), rtol=1e-4)
    features = {"r": (1, 12), "cr": (3, 4), "cr_sf": (3, 4)}.get(head)
    assert d.class_features == features
    if features:
        assert out["features"].shape[1:] == features
    assert ("reconstruction" in out) == (head in ("cr", "cr_sf")) == (net.decoder is not None)
    vectors, scores = net.encoder(images)
    np.testing.assert_allclose(_np(scores), probabilities, rtol=1e-6)
