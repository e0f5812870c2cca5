"""The randomisation technique on a tiny CapsNet: its stored similarities against an independent
recomputation (networks given the mixed trained / random weights by hand, the maps from the RPV
and Grad-CAM++ techniques on a fresh probe, Spearman from scipy over the covered pixels), and
its summary's intervals and verdicts."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from reportgen.figures.placement import place_grid_at_centres
from reportgen.probe.evaluation import EvalBatch, stratified_sample
from reportgen.probe.probe import run_probe
from reportgen.results import intervals as iv
from reportgen.techniques import explanation_randomisation as er
from reportgen.techniques import gradcam_pp, rpv
from reportgen.techniques.base import RenderContext
from reportgen.techniques.explanation_randomisation.cascade import SEED_OFFSET
from reportgen.techniques.explanation_randomisation.similarity import MEASURES, ssim, unit_abs

PARAMS = er.Params(images=4, seed=2)
TOP_DOWN = ("class_caps", "primary_conv", "conv1")


@pytest.fixture(scope="module")
def setup(make_net):
    net = make_net(seed=7)
    rng = np.random.default_rng(11)
    images = rng.random((9, 12, 12, 1), dtype=np.float32)
    batch = EvalBatch(net, images, np.tile(np.arange(3), 3), ("a", "b", "c"))
    before = [np.array(w.numpy(), copy=True) for w in net.model.weights]
    return net, batch, er.compute(batch, PARAMS), before


def _place(grid, hw, field):
    return np.moveaxis(place_grid_at_centres(np.moveaxis(grid, 0, -1), hw, field), -1, 0)


def _maps(net, images, targets):
    """{method: (n, H, W)} each image's target-class maps placed on the input (NaN outside),
    from the RPV and Grad-CAM++ techniques over a probe of these images alone."""
    description = net.description
    batch = run_probe(net, images, gradients=False)
    grads = run_probe(net, images, needs={"grad[true]:conv1"}, labels=targets)
    rows = np.arange(len(images))
    hw = images.shape[1:3]
    out = {f"rpv_{m}": _place(rpv.compute(batch, rpv.Params(method=m))["maps"][rows, targets],
                              hw, description.primary_capsules.receptive_field.rows)
           for m in ("modified", "original")}
    cam = gradcam_pp.normalize_maps(gradcam_pp.gradcam_plus_plus(
        batch["conv:conv1"], grads["grad[true]:conv1"], batch["lengths"][rows, targets]))
    out["gradcam_pp"] = _place(cam, hw, description.receptive_field("conv1").rows)
    return out


def _measures(a, b):
    """[Spearman |.|, Spearman signed, SSIM] of two placed maps over their finite pixels."""
    seen = np.isfinite(a)
    rows, cols = np.flatnonzero(seen.any(1)), np.flatnonzero(seen.any(0))
    ra, rb = (m[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1] for m in (a, b))
    return [stats.spearmanr(np.abs(ra).ravel(), np.abs(rb).ravel()).statistic,
            stats.spearmanr(ra.ravel(), rb.ravel()).statistic,
            ssim(unit_abs(ra[None]), unit_abs(rb[None]))[0]]


@pytest.mark.slow
def test_stored_similarities_equal_an_independent_recomputation(setup, make_net):
    net, batch, result, before = setup
    p = PARAMS
    index = stratified_sample(batch.labels, p.images, seed=p.seed)
    np.testing.assert_array_equal(result["index"], index)
    images, labels = batch.images[index], batch.labels[index]
    assert er.decode_names(result["layers"]) == list(TOP_DOWN)
    trained = _maps(net, images, labels)
    fresh = make_net(seed=SEED_OFFSET + p.seed)       # what the layers' initializers draw
    work = make_net(seed=1)
    for depth in range(len(TOP_DOWN) + 1):
        work.model.set_weights(net.model.get_weights())
        for name in TOP_DOWN[:depth]:
            work.model.get_layer(name).set_weights(fresh.model.get_layer(name).get_weights())
        maps = _maps(work, images, labels)
        for m, method in enumerate(er.METHODS):
            if method == "builtin":
                assert np.isnan(result["cascade"][m, depth]).all()
                continue
            for i in range(len(index)):
                np.testing.assert_allclose(result["cascade"][m, depth, :, i],
                                           _measures(trained[method][i], maps[method][i]),
                                           rtol=2e-3, atol=2e-4, err_msg=f"{method} {depth}")
    rng = np.random.default_rng(p.seed)
    others = (labels + rng.integers(1, 3, len(labels))) % 3
    np.testing.assert_array_equal(result["others"], others)
    assert (others != labels).all()
    other = _maps(net, images, others)
    for m, method in enumerate(er.METHODS):
        if method != "builtin":
            for i in range(len(index)):
                np.testing.assert_allclose(result["random_logit"][m, :, i],
                                           _measures(trained[method][i], other[method][i]),
                                           rtol=2e-3, atol=2e-4)
    after = [w.numpy() for w in net.model.weights]
    assert all(np.array_equal(a, b) for a, b in zip(before, after))   # the network untouched


@pytest.mark.slow
def test_summary_intervals_verdicts_and_figure(setup):
    _, _, result, _ = setup
    summary = er.summarize(result, PARAMS)
    assert summary["methods"] == ["rpv_modified", "rpv_original", "gradcam_pp"]
    for method in summary["methods"]:
        m = er.METHODS.index(method)
        for s, measure in enumerate(MEASURES):
            for depth in range(result["cascade"].shape[1]):
                values = result["cascade"][m, depth, s].astype(np.float64)
                expected = iv.bootstrap_mean(values[np.isfinite(values)])
                got = iv.interval_of(summary, f"cascade_{measure}_{method}", depth)
                assert got.value == pytest.approx(expected.value)
                assert (got.low, got.high) == pytest.approx((expected.low, expected.high))
    figures = er.TECHNIQUE.render(result, PARAMS, RenderContext("M", "1-0", ("a", "b", "c")))
    assert [f.kind for f in figures] == ["png", "svg", "pdf"]
    for method in summary["methods"]:
        assert summary[f"verdict_text_{method}"] in figures[0].caption


def _arrays(last: np.ndarray, n: int = 30):
    """A hand-made result: RPV (modified) at similarity 1 down to `last` per image; the other
    maps absent."""
    cascade = np.full((len(er.METHODS), 3, len(MEASURES), n), np.nan, np.float32)
    cascade[0, 0] = 1.0
    cascade[0, 1] = 0.8
    cascade[0, 2] = last
    rest = np.full((len(er.METHODS), len(MEASURES), n), np.nan, np.float32)
    rest[0] = 0.0
    return {"cascade": cascade, "random_logit": rest, "baseline": rest,
            "has": np.asarray([1, 0, 0, 0]), "layers": er.encode_names(["top", "bottom"])}


def test_the_verdict_is_decided_by_the_upper_end_of_the_interval():
    rng = np.random.default_rng(0)
    low = rng.normal(0.3, 0.05, 30)
    summary = er.summarize(_arrays(np.stack([low] * 3)), er.Params(threshold=0.5))
    assert summary["verdict_rpv_modified"] == "passes"
    assert summary["layers"] == ["top", "bottom"]
    # a mean below the threshold whose interval reaches above it does not pass
    spread = np.concatenate([np.full(20, 0.2), np.full(10, 0.95)])     # mean 0.45
    last = np.stack([low, low, spread])
    interval = iv.bootstrap_mean(spread)
    assert interval.value < 0.5 < interval.high
    summary = er.summarize(_arrays(last), er.Params(threshold=0.5))
    assert summary["verdict_rpv_modified"] == "does not pass"
    assert summary["verdict_text_rpv_modified"].startswith(
        "RPV (modified) does not pass the randomisation test: its map stays similar when the "
        "weights are random (SSIM of |map|")


def test_params_validation():
    from reportgen.errors import ReportgenError

    for bad in ({"images": 0}, {"threshold": 1.5}, {"threshold": -1}):
        with pytest.raises(ReportgenError):
            er.Params(**bad)


def test_a_map_that_does_not_pass_is_a_finding():
    from reportgen.results.findings import randomisation_findings

    rng = np.random.default_rng(0)
    low = rng.normal(0.3, 0.05, 30)
    high = rng.normal(0.9, 0.02, 30)
    failing = er.summarize(_arrays(np.stack([high] * 3)), er.Params())
    passing = er.summarize(_arrays(np.stack([low] * 3)), er.Params())
    [finding] = randomisation_findings(failing, untrained=passing)
    assert finding.technique == "explanation_randomisation"
    assert finding.text.startswith(failing["verdict_text_rpv_modified"] + " (over 30 images")
    assert finding.untrained.endswith("passes")
    assert randomisation_findings(passing) == []


def _digits(rng, n):
    """Three classes of 12x12 images: a bright bar (row, column or diagonal) in noise."""
    labels = np.arange(n) % 3
    images = 0.1 * rng.random((n, 12, 12, 1), dtype=np.float32)
    spot = np.arange(2, 10)
    images[labels == 0, 6, 2:10] = 1.0
    images[labels == 1, 2:10, 6] = 1.0
    images[np.flatnonzero(labels == 2)[:, None], spot, spot] = 1.0
    return images, labels


@pytest.mark.slow
def test_on_a_trained_tiny_capsnet_the_maps_similarity_falls_as_layers_are_randomised(make_net):
    import keras
    import tensorflow as tf

    net = make_net(seed=4)
    rng = np.random.default_rng(0)
    x, y = _digits(rng, 96)
    optimizer = keras.optimizers.Adam(0.01)
    weights = net.model.trainable_weights

    @tf.function
    def step(images, one_hot):
        with tf.GradientTape() as tape:
            classification, reconstruction, _ = net.training_losses(images, one_hot)
            loss = tf.reduce_mean(classification + reconstruction)
        optimizer.apply_gradients(zip(tape.gradient(loss, weights), weights))

    for _ in range(60):
        rows = rng.choice(len(x), 32, replace=False)
        step(tf.constant(x[rows]), tf.one_hot(y[rows], 3))
    test_x, test_y = _digits(np.random.default_rng(1), 12)
    scores = np.asarray(net.encoder(test_x, training=False)[1])
    assert (scores.argmax(1) == test_y).mean() >= 0.9                 # it learnt the bars
    batch = EvalBatch(net, test_x, test_y.astype(np.int64), ("row", "column", "diagonal"))
    params = er.Params(images=12)
    summary = er.summarize(er.compute(batch, params), params)
    for method in ("gradcam_pp", "rpv_modified"):
        curve = summary[f"cascade_spearman_abs_{method}"]
        assert curve[0] == pytest.approx(1.0)
        last = iv.interval_of(summary, f"cascade_spearman_abs_{method}", len(curve) - 1)
        assert last.high < 0.9, (method, curve)                         # it fell, by interval
