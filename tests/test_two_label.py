"""Two labels per image: the training losses and top-2 metric (reportgen.training.two_label)
against NumPy references, and the segmentation score and chance
(reportgen.techniques.multimnist_segmentation.numbers)."""

from __future__ import annotations

import numpy as np
import pytest

import reference.capsules as ref_caps
import reference.two_label as ref
from reportgen.techniques.multimnist_segmentation.numbers import segmentation_iou, top2_chance


def _pairs(n, classes=10, seed=0):
    """n label pairs of two different classes."""
    rng = np.random.default_rng(seed)
    first = rng.integers(0, classes, n)
    second = (first + rng.integers(1, classes, n)) % classes
    return np.stack([first, second], -1)


def test_two_hot_marks_both_labels():
    from reportgen.training.two_label import two_hot

    labels = _pairs(6)
    expected = np.zeros((6, 10), np.float32)
    expected[np.arange(6), labels[:, 0]] = 1
    expected[np.arange(6), labels[:, 1]] = 1
    np.testing.assert_array_equal(np.asarray(two_hot(labels, 10)), expected)


def test_pair_margin_loss_matches_numpy():
    from reportgen.training.two_label import pair_margin_loss

    labels = _pairs(16, seed=1)
    lengths = np.random.default_rng(1).random((16, 10)).astype(np.float32)
    for m_plus, m_minus, down in ((0.9, 0.1, 0.5), (0.8, 0.2, 0.25)):
        got = np.asarray(pair_margin_loss(labels, lengths, m_plus, m_minus, down))
        np.testing.assert_allclose(got, ref.pair_margin_loss(labels, lengths, m_plus, m_minus, down),
                                   rtol=1e-5, atol=1e-7)
    # both classes long, the rest short: nothing to pay; only one of the two long: pays for it
    right = np.full((1, 10), 0.05, np.float32)
    right[0, [2, 7]] = 0.95
    assert float(pair_margin_loss(np.array([[2, 7]]), right)[0]) == 0.0
    np.testing.assert_allclose(float(pair_margin_loss(np.array([[2, 5]]), right)[0]),
                               0.85 ** 2 + 0.5 * 0.85 ** 2, rtol=1e-5)


def test_pair_binary_crossentropy_matches_numpy():
    from reportgen.training.two_label import pair_binary_crossentropy

    labels = _pairs(12, seed=2)
    logits = np.random.default_rng(2).uniform(-5, 5, (12, 10)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(pair_binary_crossentropy(labels, logits)),
                               ref.pair_binary_crossentropy(labels, logits), rtol=1e-4)


def test_pair_reconstruction_loss_runs_the_decoder_once_per_true_class():
    import keras

    from reportgen.training.two_label import pair_reconstruction_loss, pair_reconstructions

    batch, classes, dims, side = 5, 4, 3, 3
    rng = np.random.default_rng(3)
    capsules = rng.normal(size=(batch, classes, dims)).astype(np.float32)
    labels = _pairs(batch, classes, seed=3)
    sources = rng.random((batch, 2, side, side, 1)).astype(np.float32)
    kernel = rng.normal(size=(classes * dims, side * side)).astype(np.float32)
    bias = rng.normal(size=side * side).astype(np.float32)
    dense = keras.layers.Dense(side * side, activation="sigmoid")
    dense.build((None, classes * dims))
    dense.set_weights([kernel, bias])

    def numpy_decode(label_column):
        mask = np.eye(classes, dtype=np.float32)[labels[:, label_column]][..., None]
        flat = (capsules * mask).reshape(batch, -1).astype(np.float64)
        return 1.0 / (1.0 + np.exp(-(flat @ kernel + bias)))

    first, second = pair_reconstructions(dense, capsules, labels)
    np.testing.assert_allclose(np.asarray(first), numpy_decode(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(second), numpy_decode(1), rtol=1e-5, atol=1e-6)
    weight = 0.392
    expected = (ref_caps.reconstruction_loss(sources[:, 0].reshape(batch, -1), numpy_decode(0), weight)
                + ref_caps.reconstruction_loss(sources[:, 1].reshape(batch, -1), numpy_decode(1), weight))
    got = np.asarray(pair_reconstruction_loss(dense, capsules, labels, sources, weight))
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    # each reconstruction is scored against its own digit: swapping the sources changes the loss
    swapped = np.asarray(pair_reconstruction_loss(dense, capsules, labels, sources[:, ::-1], weight))
    assert not np.allclose(swapped, got)


def test_top2_correct_matches_numpy_and_ignores_order():
    from reportgen.training.two_label import top2_correct

    labels = _pairs(200, seed=4)
    scores = np.random.default_rng(4).random((200, 10)).astype(np.float32)
    # make a third of them right (in either order) so both outcomes occur
    for i in range(0, 200, 3):
        scores[i, labels[i]] = [1.5, 1.2] if i % 2 else [1.2, 1.5]
    got = np.asarray(top2_correct(labels, scores))
    np.testing.assert_array_equal(got, ref.top2_correct(labels, scores))
    assert 0.3 < got.mean() < 0.5
    one_right = np.array([[0.9, 0.8, 0.1, 0.7]], np.float32)
    assert float(top2_correct(np.array([[0, 3]]), one_right)[0]) == 0.0
    assert float(top2_correct(np.array([[1, 0]]), one_right)[0]) == 1.0


def test_top2_chance_is_one_over_the_number_of_pairs():
    assert top2_chance(10) == pytest.approx(1 / 45)
    assert top2_chance(3) == pytest.approx(1 / 3)
    # a guess among all pairs: the fraction of random scores whose top 2 is a given pair
    labels = np.tile([[2, 6]], (9000, 1))
    scores = np.random.default_rng(5).random((9000, 10))
    assert ref.top2_correct(labels, scores).mean() == pytest.approx(top2_chance(10), abs=0.006)


def test_segmentation_iou_on_a_hand_made_pair():
    sources = np.zeros((1, 2, 8, 8, 1), np.float32)
    sources[0, 0, 1:4, 1:5] = 1.0            # digit A: 3 x 4 = 12 pixels
    sources[0, 1, 4:7, 3:7] = 0.8            # digit B: 3 x 4 = 12 pixels
    recons = np.zeros_like(sources)
    recons[0, 0, 1:4, 2:6] = 0.9             # A one column to the right: 9 shared of 15
    recons[0, 0, 6, 0] = 0.4                 # below the threshold: not drawn
    recons[0, 1] = sources[0, 1] * 0.7       # B exactly (0.56 > 0.5)
    scores = segmentation_iou(recons, sources)
    assert scores.shape == (1, 2)
    np.testing.assert_allclose(scores, [[9 / 15, 1.0]])
    # flat decoder outputs are taken as they come
    np.testing.assert_allclose(segmentation_iou(recons.reshape(1, 2, 64), sources), scores)
    # a stricter threshold drops B's reconstruction: nothing shared of 12
    np.testing.assert_allclose(segmentation_iou(recons, sources, threshold=0.6), [[9 / 15, 0.0]])
    assert segmentation_iou(np.zeros((3, 3, 1)), np.zeros((3, 3, 1))) == 1.0


def test_segmentation_iou_matches_numpy_on_random_masks():
    rng = np.random.default_rng(6)
    sources, recons = rng.random((2, 4, 2, 6, 6, 1))
    expected = np.array([[ref.iou(r > 0.5, s > 0.5) for r, s in zip(rp, sp)]
                         for rp, sp in zip(recons, sources)])
    np.testing.assert_allclose(segmentation_iou(recons, sources), expected)


def test_analyses_that_read_no_label_apply_to_images_of_two_digits():
    """Routing entropy and dead units read routing weights and activations, never a label: a
    MultiMNIST model gets them (they said "each of its images carries two classes … this
    analysis scores one"); an analysis that scores one class per image still says so."""
    from family_nets import TINY_PAIR

    from reportgen.engine.model import not_applicable_reason
    from reportgen.engine.step import plan
    from reportgen.sdk.testing import build_network
    from reportgen.techniques import get_technique

    net = build_network(TINY_PAIR)
    chosen = [get_technique(n) for n in ("routing_entropy", "dead_units", "affine_robustness",
                                         "multimnist_segmentation")]
    planned = plan(chosen, net)
    refused = {t.name: not_applicable_reason(missing) for t, missing in planned.not_applicable}
    assert set(refused) == {"affine_robustness"}, refused
    assert "scores one" in refused["affine_robustness"]
    assert {"routing_entropy", "dead_units", "multimnist_segmentation"} <= {
        technique.name for technique, _ in planned.variants}


def test_the_training_card_counts_pairs_as_pairs():
    from reportgen.pages.views import training_view

    single = {f["label"]: f["value"] for f in training_view({"training_images": 24000})}
    pairs = {f["label"]: f["value"] for f in training_view({"training_images": 24000}, 2)}
    assert single["Training images"] == "24,000"
    assert pairs["Training pairs (images of two overlapping digits)"] == "24,000"
    assert "Training images" not in pairs


def test_the_class_capsule_table_frames_both_predicted_classes_of_a_pair():
    from reportgen.figures.figure import RenderContext
    from reportgen.techniques.class_capsules.figures import render_class_capsules

    rng = np.random.default_rng(0)
    lengths = np.array([0.1, 0.9, 0.2, 0.7], np.float32)
    result = {"capsules": rng.normal(size=(4, 3)).astype(np.float32), "lengths": lengths}
    names = ("zero", "one", "two", "three")
    pair, = render_class_capsules(result, None, RenderContext("M", "1-1", names,
                                                              labels_per_image=2))
    single, = render_class_capsules(result, None, RenderContext("M", "1-1", names))
    assert "the two longest are the prediction" in pair.caption
    assert "predicted classes one and three framed" in pair.caption
    assert "the longest is the prediction" in single.caption
    assert "predicted class one framed" in single.caption
    assert pair.data != single.data                    # a second row framed
