"""clrp_evaluation on a tiny CNN baseline against an independent recomputation: the maps from
the plain-NumPy LRP equations (lrp_clrp's numpy_lrp), the pointing game and the 9x9 ablation
done in NumPy with the Keras model's own logits, the intervals from the project's BCa code;
and (slow) on a briefly trained CNN, CLRP's top-2 maps differ more than LRP's."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.techniques.lrp_clrp.tests import numpy_lrp
from reportgen.techniques.lrp_clrp.tests.test_lrp_clrp import (numpy_layers, one_minus_cosine,
                                                               oracle_maps)


@pytest.fixture(scope="module")
def cnn():
    import family_nets

    return family_nets.build(family_nets.tiny_cnn("fc"), seed=2)


def _patch(row, col, size, hw):
    top = min(max(row - size // 2, 0), max(hw[0] - size, 0))
    left = min(max(col - size // 2, 0), max(hw[1] - size, 0))
    mask = np.zeros(hw, bool)
    mask[top:top + size, left:left + size] = True
    return mask


def test_stored_numbers_equal_a_numpy_recomputation(cnn):
    from reportgen.probe.evaluation import EvalBatch
    from reportgen.results import intervals as iv
    from reportgen.techniques.clrp_evaluation import METHODS, TECHNIQUE, Params

    rng = np.random.default_rng(4)
    x = rng.random((6, 12, 12, 1), dtype=np.float32)
    y = np.array([0, 1, 2, 0, 1, 2])
    params = Params(images=6, patch=5, threshold=0.6)
    got = TECHNIQUE.compute(EvalBatch(cnn, x, y, ("a", "b", "c")), params)
    layers = numpy_layers(cnn)
    logits_of = lambda batch: np.asarray(cnn.model(batch)["logits"], np.float64)   # noqa: E731
    logits = logits_of(x)
    top2 = np.argsort(-logits, axis=1, kind="stable")[:, :2]
    np.testing.assert_array_equal(got["top2"], top2)
    disc = np.array([[one_minus_cosine(oracle_maps(layers, x[b], int(top2[b, 0]))[v],
                                       oracle_maps(layers, x[b], int(top2[b, 1]))[v])
                      for v in range(3)] for b in range(6)])
    np.testing.assert_allclose(got["discriminativeness"], disc, atol=1e-4)
    masks = x[..., 0] > 0.6
    fill = x.mean(axis=0)
    random = np.random.default_rng(params.seed).random((6, 12, 12))
    for b in range(6):
        maps = dict(zip(("lrp", "clrp1", "clrp2"), oracle_maps(layers, x[b], int(y[b]))))
        lrp_relevance, scores = numpy_lrp.lrp_one(layers, x[b], int(y[b]))
        assert np.isclose(scores[y[b]], logits[b, y[b]], rtol=1e-4)
        maps["random"] = random[b]
        for m, method in enumerate(METHODS):
            if method == "gradient":       # its map: test_the_gradient_map_is_the_logit_gradient
                continue
            row, col = np.unravel_index(np.argmax(maps[method]), (12, 12))
            assert got["pointing"][m, b] == float(masks[b, row, col]), (method, b)
            ablated = np.where(_patch(row, col, 5, (12, 12))[..., None], fill, x[b])
            drop = logits[b, y[b]] - logits_of(ablated[None].astype(np.float32))[0, y[b]]
            np.testing.assert_allclose(got["drop"][m, b], drop, rtol=1e-3, atol=1e-4)
    summary = TECHNIQUE.summarize(got, params)
    want = iv.bootstrap_means(np.column_stack([disc, disc[:, 1] - disc[:, 0]]))
    assert summary["discriminativeness_lrp"] == pytest.approx(want[0].value, abs=1e-4)
    diff = iv.difference_of(summary, "discriminativeness_clrp1", "discriminativeness_lrp")
    assert diff.value == pytest.approx(want[3].value, abs=1e-4)
    assert (diff.low, diff.high) == pytest.approx((want[3].low, want[3].high), abs=1e-3)
    assert summary["clrp_more_discriminative"] == (diff.low > 0)
    hits = got["pointing"][METHODS.index("lrp")]
    assert summary["pointing_lrp"] == pytest.approx(hits.mean())


def test_the_gradient_map_is_the_logit_gradient(cnn):
    """|dS_y/dx| by central differences of the Keras model's logit."""
    from reportgen.techniques.clrp_evaluation import gradient_maps
    from reportgen.techniques.lrp_clrp import chain_of

    x = np.random.default_rng(0).random((1, 12, 12, 1)).astype(np.float64)
    got = gradient_maps(chain_of(cnn), x.astype(np.float32), np.array([1]))
    h = 1e-2
    pixels = [(2, 3), (6, 6), (9, 1)]
    for r, c in pixels:
        up, down = x.copy(), x.copy()
        up[0, r, c, 0] += h
        down[0, r, c, 0] -= h
        f = lambda v: float(np.asarray(cnn.model(v.astype(np.float32))["logits"])[0, 1])  # noqa
        np.testing.assert_allclose(got[0, r, c], abs((f(up) - f(down)) / (2 * h)), rtol=0.05,
                                   atol=1e-3)


def _verdicts(differences):
    from reportgen.techniques.clrp_evaluation import verdicts
    from reportgen.techniques.clrp_evaluation.numbers import METHODS, drop_key

    out = {drop_key(k): float(i) for i, k in enumerate(METHODS)}
    out["intervals"] = {f"{a} - {b}": {"value": 1.0, "low": low, "high": low + 1.0, "n": 9,
                                       "method": "BCa"} for (a, b), low in differences.items()}
    return verdicts(out)


def test_verdicts_are_decided_by_the_intervals():
    from reportgen.techniques.clrp_evaluation.numbers import disc_key

    got = _verdicts({(disc_key("clrp1"), disc_key("lrp")): 0.1})
    assert got["clrp_more_discriminative"] is True
    assert got["ablation_order"] == "random < gradient < LRP < CLRP1 < CLRP2"
    assert got["table1_order"] is True and got["table1_order_separated"] is False
    assert _verdicts({(disc_key("clrp1"), disc_key("lrp")): -0.5})[
        "clrp_more_discriminative"] is False


@pytest.mark.slow
def test_clrp_is_more_discriminative_than_lrp_on_a_trained_cnn():
    """A small CNN baseline (ConvNet-FC head) trained 300 batches on the bundled digits: the
    paired difference CLRP1 - LRP of 1 - cosine between the top-2 maps lies above 0 (Gu, Yang
    & Tresp 2018, section 5.1)."""
    import family_nets
    import keras

    from reportgen.data.datasets import load_dataset
    from reportgen.probe.evaluation import EvalBatch
    from reportgen.results import intervals as iv
    from reportgen.techniques.clrp_evaluation import TECHNIQUE, Params

    data = load_dataset("mnist")
    raw = {**family_nets.tiny_cnn("fc"), "dataset": "mnist", "input_shape": [28, 28, 1],
           "num_classes": 10, "decoder": {"enabled": False},
           "conv": [{"filters": 16, "kernel_size": 5},
                    {"filters": 16, "kernel_size": 5, "strides": 2}],
           "cnn": {"head": "fc", "dense": [64]}}
    net = family_nets.build(raw)
    model = keras.Model(net.model.input, net.model.output["logits"])
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    chosen = np.random.default_rng(0).integers(0, len(data.x_train), 300 * 64)
    model.fit(data.x_train[chosen], data.y_train[chosen], batch_size=64, verbose=0)
    batch = EvalBatch(net, data.x_test[:300], data.y_test[:300], data.class_names)
    summary = TECHNIQUE.summarize(TECHNIQUE.compute(batch, Params(images=32)), Params(images=32))
    diff = iv.difference_of(summary, "discriminativeness_clrp1", "discriminativeness_lrp")
    assert diff.low > 0, summary
    assert summary["clrp_more_discriminative"] is True
