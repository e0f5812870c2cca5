"""MultiMNIST segmentation of one input (reportgen.techniques.multimnist_pair): every class's
reconstruction is the decoder fed that class capsule alone (a NumPy mask), a batch equals image
by image, and the drawing takes the true pair from the input and the predicted pair from the
scores."""

from __future__ import annotations

import numpy as np
import pytest

from family_nets import TINY_PAIR, build
from reportgen.figures.figure import RenderContext
from reportgen.probe.probe import run_probe
from reportgen.techniques.multimnist_pair import TECHNIQUE, compute


@pytest.fixture(scope="module")
def pair_net():
    return build(TINY_PAIR)


@pytest.fixture(scope="module")
def pair_images():
    return np.random.default_rng(7).random((3, 36, 36, 1), dtype=np.float32)


def test_reconstructions_are_the_decoder_on_one_class_capsule(pair_net, pair_images):
    batch = run_probe(pair_net, pair_images, needs=TECHNIQUE.needs_for(None, pair_net))
    out = compute(batch)
    capsules = np.asarray(pair_net.encoder(pair_images)[0])                    # (B, 10, 4)
    assert out["reconstructions"].shape == (3, 10, 36, 36, 1)
    for k in (0, 4, 9):
        masked = np.zeros_like(capsules)
        masked[:, k] = capsules[:, k]
        want = np.asarray(pair_net.decoder(masked.reshape(3, -1))).reshape(3, 36, 36, 1)
        np.testing.assert_allclose(out["reconstructions"][:, k], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["lengths"], np.linalg.norm(capsules, axis=-1), rtol=1e-5)
    one = compute(run_probe(pair_net, pair_images[1:2], needs=TECHNIQUE.needs_for(None, pair_net)))
    np.testing.assert_allclose(one["reconstructions"][0], out["reconstructions"][1], atol=1e-6)


def test_applies_to_two_label_models_only(pair_net, tiny_net):
    assert TECHNIQUE.variants(pair_net) and not TECHNIQUE.variants(tiny_net)


def test_render_picks_the_true_and_the_predicted_pair(monkeypatch):
    from reportgen.techniques.multimnist_pair import figures as multimnist

    seen = []
    monkeypatch.setattr(multimnist, "render_pair", lambda result, p, ctx: seen.append(result))
    recs = np.stack([np.full((4, 4, 1), k / 10, np.float32) for k in range(10)])
    lengths = np.linspace(0.1, 0.2, 10).astype(np.float32)
    lengths[[6, 2]] = [0.9, 0.8]                                   # predicted: 6, then 2
    ctx = RenderContext(model="m", step="1-1", class_names=tuple("0123456789"),
                        image=np.zeros((4, 4, 1)), true_classes=(2, 5))
    multimnist.render_input({"lengths": lengths, "reconstructions": recs}, None, ctx)
    assert seen[0]["labels"] == [2, 5] and seen[0]["top2"] == [6, 2]
    np.testing.assert_array_equal(seen[0]["reconstructions"], recs[[2, 5]])
    np.testing.assert_array_equal(seen[0]["predicted_reconstructions"], recs[[6, 2]])


def test_an_input_of_unknown_classes_shows_the_predicted_pair():
    from reportgen.techniques.multimnist_pair.figures import render_input

    recs = np.zeros((10, 8, 8, 1), np.float32)
    lengths = np.arange(10, dtype=np.float32) / 10                  # predicted: 9 and 8
    ctx = RenderContext(model="m", step="1-1", class_names=tuple("0123456789"),
                        image=np.zeros((8, 8, 1)))
    figure, = render_input({"lengths": lengths, "reconstructions": recs}, None, ctx)
    assert figure.caption.startswith("The input pulled apart into its two predicted digits, 9 "
                                     "and 8; its true classes are unknown.")
