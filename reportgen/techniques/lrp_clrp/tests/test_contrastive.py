"""Contrastive LRP on linear models whose maps are known in closed form, and the
class-discriminativeness measures on hand-made maps."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.techniques.lrp_clrp import contrastive, rules


def linear_model(kernel):
    """image (1, n, 1) -> flatten -> Dense(classes) without bias, with `kernel` (n, classes)."""
    import keras

    kernel = np.asarray(kernel, np.float32)
    model = keras.Sequential([keras.Input((1, kernel.shape[0], 1)), keras.layers.Flatten(),
                              keras.layers.Dense(kernel.shape[1], use_bias=False)])
    model.layers[-1].kernel.assign(kernel)
    return rules.layer_chain(model)


ZPLUS = rules.Rules(first="zplus")


def test_clrp2_closed_form_of_a_linear_model():
    """One layer, x = 1, w_y = (1, -1, 2, 0): S_y = 2; z+ gives R = S_y (1, 0, 2, 0) / 3, the
    dual -w_y gives S_y (0, 1, 0, 0) / 1, so CLRP2 = (2/3, 0, 4/3, 0)."""
    steps = linear_model([[1, 0], [-1, 0], [2, 0], [0, 1]])
    maps = contrastive.relevance_maps(steps, np.ones((1, 1, 4, 1)), [0], ZPLUS, "float64")
    np.testing.assert_allclose(maps["lrp"][0, 0], [2 / 3, 0, 4 / 3, 0], atol=1e-12)
    np.testing.assert_allclose(maps["dual2"][0, 0], [0, 2, 0, 0], atol=1e-12)
    np.testing.assert_allclose(maps["clrp2"][0, 0], [2 / 3, 0, 4 / 3, 0], atol=1e-12)


def test_clrp1_removes_what_the_other_classes_share():
    """Three classes on x = (a, b, c, d): class 0 reads (1, 1, 0, 0), class 1 (0, 1, 1, 0),
    class 2 (0, 0, 1, 1). S_0 = a + b, spread uniformly over classes 1 and 2 (S_0 / 2 each),
    each by z+: dual = S_0/2 (0, b, c, 0)/(b + c) + S_0/2 (0, 0, c, d)/(c + d)."""
    a, b, c, d = 0.5, 0.8, 0.3, 0.6
    steps = linear_model([[1, 0, 0], [1, 1, 0], [0, 1, 1], [0, 0, 1]])
    x = np.array([a, b, c, d]).reshape(1, 1, 4, 1)
    maps = contrastive.relevance_maps(steps, x, [0], ZPLUS, "float64")
    s0 = a + b
    dual = s0 / 2 * np.array([0, b, c, 0]) / (b + c) + s0 / 2 * np.array([0, 0, c, d]) / (c + d)
    np.testing.assert_allclose(maps["lrp"][0, 0], [a, b, 0, 0], atol=1e-12)
    np.testing.assert_allclose(maps["dual1"][0, 0], dual, atol=1e-12)
    np.testing.assert_allclose(maps["clrp1"][0, 0], np.maximum([a, b, 0, 0] - dual, 0),
                               atol=1e-12)
    np.testing.assert_allclose(maps["dual1"].sum(), s0, atol=1e-12)   # the dual conserves S_y


def test_clrp2_of_a_deeper_net_negates_the_top_layer_only():
    """Through a hidden ReLU layer: the dual's relevance of the hidden units is z+ of -W_y,
    then goes down the unchanged first layer (z+ both, inputs positive)."""
    import keras

    keras.utils.set_random_seed(5)
    model = keras.Sequential([keras.Input((1, 5, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(8, activation="relu", use_bias=False),
                              keras.layers.Dense(3, use_bias=False)])
    steps = rules.layer_chain(model)
    x = np.random.default_rng(0).uniform(0.1, 1, (2, 1, 5, 1))
    w1 = np.asarray(model.layers[1].kernel, np.float64)
    w2 = np.asarray(model.layers[2].kernel, np.float64)
    maps = contrastive.relevance_maps(steps, x, [1, 2], ZPLUS, "float64")
    for i, y in enumerate([1, 2]):
        xi = x[i].reshape(-1)
        hidden = np.maximum(xi @ w1, 0)
        score = hidden @ w2[:, y]

        def down(r_hidden):
            z = np.maximum(xi[:, None] * w1, 0)
            return (z / np.where(z.sum(0) > 0, z.sum(0), 1) * r_hidden).sum(axis=1)

        neg = np.maximum(hidden * -w2[:, y], 0)
        pos = np.maximum(hidden * w2[:, y], 0)
        assert neg.sum() > 0 and pos.sum() > 0    # both sides have somewhere to go
        dual = down(neg / neg.sum() * score)
        lrp = down(pos / pos.sum() * score)
        np.testing.assert_allclose(maps["dual2"][i, 0], dual, rtol=1e-10)
        np.testing.assert_allclose(maps["clrp2"][i, 0], np.maximum(lrp - dual, 0), rtol=1e-10,
                                   atol=1e-14)


def test_contrast_takes_any_map():
    target = np.array([[1.0, -2.0], [0.5, 3.0]])
    dual = np.array([[0.5, -3.0], [1.0, 3.0]])
    np.testing.assert_array_equal(contrastive.contrast(target, dual), [[0.5, 1.0], [0, 0]])


def test_seeds():
    scores = np.array([[2.0, 1.0, -1.0], [0.0, 3.0, 1.0]])
    np.testing.assert_array_equal(contrastive.target_seed(scores, np.array([0, 1])),
                                  [[2, 0, 0], [0, 3, 0]])
    np.testing.assert_array_equal(contrastive.others_seed(scores, np.array([0, 1])),
                                  [[0, 1, 1], [1.5, 0, 1.5]])


def test_similarity_and_discriminativeness_on_hand_made_maps():
    a = np.array([[[1.0, 0.0], [0.0, 0.0]], [[1.0, 2.0], [3.0, 4.0]], [[0.0, 0.0], [0.0, 0.0]]])
    b = np.array([[[0.0, 1.0], [0.0, 0.0]], [[2.0, 4.0], [6.0, 8.0]], [[1.0, 0.0], [0.0, 0.0]]])
    cos = contrastive.similarity(a, b, "cosine")
    np.testing.assert_allclose(cos[:2], [0.0, 1.0])
    assert np.isnan(cos[2])                       # an all-zero map has no direction
    np.testing.assert_allclose(contrastive.discriminativeness(a, b)[:2], [1.0, 0.0])
    # Spearman: ranks of (1, 2, 3, 4) vs (4, 3, 2, 1) -> -1; ties get average ranks
    rho = contrastive.similarity(np.array([[1.0, 2, 3, 4]]), np.array([[4.0, 3, 2, 1]]),
                                 "spearman")
    np.testing.assert_allclose(rho, [-1.0])
    from scipy import stats

    u, v = np.array([1.0, 1, 2, 5, 3]), np.array([2.0, 0, 0, 1, 7])
    np.testing.assert_allclose(contrastive.similarity(u[None], v[None], "spearman"),
                               [stats.spearmanr(u, v).statistic])
    with pytest.raises(ValueError):
        contrastive.similarity(a, b, "pearson")


def test_top_two():
    np.testing.assert_array_equal(contrastive.top_two(np.array([[0.1, 0.9, 0.5], [3, 1, 2]])),
                                  [[1, 2], [0, 2]])
