"""pose_space: the projection against NumPy's own PCA of the stored poses, the shares and
their bootstrap against a direct eigen-decomposition of each weighted covariance, EM's
flattened matrices and Self-Routing's activations, the chart's rows and thumbnails."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest

from reportgen.probe.evaluation import EvalBatch
from reportgen.results import intervals as iv
from reportgen.techniques.base import RenderContext
from reportgen.techniques.pose_space import TECHNIQUE, compute, summarize
from reportgen.techniques.pose_space import numbers as nb

CLASS_NAMES = ("a", "b", "c")


def _evaluation(net, count=14, seed=5):
    rng = np.random.default_rng(seed)
    return EvalBatch(net, rng.random((count, 12, 12, 1), dtype=np.float32),
                     np.arange(count) % 3, CLASS_NAMES)


@pytest.fixture(scope="module")
def evaluation(tiny_net):
    return _evaluation(tiny_net)


@pytest.fixture(scope="module")
def result(evaluation):
    return compute(evaluation)


def _numpy_pca(points):
    """The reference: np.linalg.svd of the centred points, each axis's sign turned to match
    the one under test (PCA fixes an axis only up to its sign)."""
    centred = points - points.mean(0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    return centred, s, vt


def test_projection_equals_numpys_pca_of_the_stored_poses(evaluation, result):
    poses = np.asarray(evaluation.tensors("class_capsules")["class_capsules"], np.float64)
    points = poses.reshape(len(poses), -1)                  # (N, classes x pose size)
    centred, s, vt = _numpy_pca(points)
    signs = np.sign(np.sum(vt[:2] * result[nb.COMPONENTS], axis=1))
    reference = centred @ (vt[:2] * signs[:, None]).T
    assert np.all(signs != 0)
    np.testing.assert_allclose(result[nb.PROJECTION], reference, atol=1e-5)
    np.testing.assert_allclose(result[nb.COMPONENTS], vt[:2] * signs[:, None], atol=1e-5)
    np.testing.assert_allclose(result[nb.MEAN], points.mean(0), atol=1e-6)
    np.testing.assert_allclose(result[nb.SHARES], s ** 2 / np.sum(s ** 2), atol=1e-6)
    # the sign convention: each axis's largest loading is positive
    components = np.asarray(result[nb.COMPONENTS])
    top = np.abs(components).argmax(1)
    assert np.all(components[np.arange(2), top] > 0)
    assert int(result[nb.DIMENSIONS]) == points.shape[1] == 3 * 4
    np.testing.assert_array_equal(result[nb.LABELS], evaluation.labels)
    scores = evaluation.tensors("lengths")["lengths"]
    np.testing.assert_array_equal(result[nb.PREDICTED], np.argmax(scores, 1))
    np.testing.assert_array_equal(result[nb.THUMBNAILS],
                                  (evaluation.images * 255 + 0.5).astype(np.uint8))


def test_the_order_of_the_images_does_not_matter(tiny_net, evaluation, result):
    order = np.random.default_rng(0).permutation(len(evaluation))
    shuffled = compute(EvalBatch(tiny_net, evaluation.images[order], evaluation.labels[order],
                                 CLASS_NAMES))
    np.testing.assert_allclose(shuffled[nb.PROJECTION], result[nb.PROJECTION][order],
                               atol=1e-5)
    np.testing.assert_allclose(shuffled[nb.SHARES], result[nb.SHARES], atol=1e-6)


def _along_axes(points, weights):
    """Every weighted covariance built directly (no rotation) and read along the unweighted
    data's first two principal axes (NumPy's SVD of the centred points)."""
    axes = np.linalg.svd(points - points.mean(0), full_matrices=False)[2][:2]
    out = []
    for w in weights:
        centred = points - w @ points
        covariance = (centred * w[:, None]).T @ centred
        out.append(np.einsum("kd,de,ke->k", axes, covariance, axes) / np.trace(covariance))
    return np.array(out)


def test_axis_shares_equal_the_weighted_covariance_along_the_fitted_axes():
    rng = np.random.default_rng(3)
    points = rng.normal(size=(30, 9)) * np.array([5, 3, 2, 1, 1, 1, 0.5, 0.3, 0.1])
    weights = rng.dirichlet(np.ones(30), size=7)
    np.testing.assert_allclose(nb.axis_shares(points, weights), _along_axes(points, weights),
                               atol=1e-10)
    # more dimensions than images (the poses' usual case): the same, and at uniform weights
    # each component's share
    wide = rng.normal(size=(40, 160)) * np.r_[6.0, 4.0, np.linspace(1, 0.1, 158)]
    weights = rng.dirichlet(np.ones(40), size=5)
    np.testing.assert_allclose(nb.axis_shares(wide, weights), _along_axes(wide, weights),
                               atol=1e-10)
    uniform = np.full((1, 40), 1 / 40)
    np.testing.assert_allclose(nb.axis_shares(wide, uniform), nb.pca(wide)[3][None, :2],
                               atol=1e-12)


def test_each_share_lies_inside_its_interval_on_a_smooth_spectrum():
    """Refitted on every resample, the top shares of 50 points in 160 dimensions with no
    standout axis got intervals wholly above them; along the fixed axes they do not."""
    rng = np.random.default_rng(0)
    points = rng.normal(size=(50, 160)) * np.linspace(3, 0.1, 160)
    shares = nb.pca(points)[3]
    basis = nb.rotated(points)
    intervals = iv.bootstrap_weighted(50, lambda w: nb.axis_shares(basis, w, diagonal=True))
    for share, interval in zip(shares[:2], intervals):
        assert interval.low < share < interval.high


def test_bootstrap_weighted_equals_bootstrap_of_means_on_a_ratio():
    parts = np.random.default_rng(1).random((25, 2)) + 0.5
    by_means = iv.bootstrap_of_means(parts, lambda m: m[..., 0] / m[..., 1])
    by_weights = iv.bootstrap_weighted(25, lambda w: (w @ parts[:, 0]) / (w @ parts[:, 1]))[0]
    for a, b in ((by_means.value, by_weights.value), (by_means.low, by_weights.low),
                 (by_means.high, by_weights.high)):
        assert a == pytest.approx(b, abs=1e-12)


def test_a_cloud_with_one_long_axis_is_told_from_an_isotropic_one():
    rng = np.random.default_rng(0)
    dims, n = 12, 200
    points = rng.normal(size=(n, dims)) * np.r_[4.0, np.ones(dims - 1)]
    shares = nb.pca(points)[3]
    basis = nb.rotated(points)
    first, second = iv.bootstrap_weighted(n, lambda w: nb.axis_shares(basis, w,
                                                                          diagonal=True))
    # the analytic share of the long axis: 16 / (16 + 11)
    assert first.low <= shares[0] <= first.high
    assert first.low < 16 / 27 < first.high
    assert first.excludes(1 / dims) and first.low > nb.isotropic_top_share(dims, n)


def test_summary_and_the_charts_rows(evaluation, result):
    summary = summarize(result)
    assert summary["dimensions"] == 12 and summary["isotropic_share"] == pytest.approx(1 / 12)
    assert summary["pc1_share"] == pytest.approx(float(result[nb.SHARES][0]))
    first = iv.interval_of(summary, "pc1_share")
    assert first.low <= first.high and first.method == iv.BOOTSTRAP_STATISTIC
    figures = {f.kind: f for f in TECHNIQUE.render(result, TECHNIQUE.params_type(),
                                                   RenderContext(model="m", step="1-1",
                                                                 class_names=CLASS_NAMES,
                                                                 description=evaluation
                                                                 .net.description))}
    assert {"png", "svg", "pdf", "json", "js"} <= set(figures)
    text = figures["js"].data.decode()
    body = json.loads(text[text.index("= {") + 2:text.rindex(";\n})")])
    rows = body["spec"]["data"]["values"]
    assert len(rows) == len(evaluation)
    from PIL import Image

    for i, row in enumerate(rows):
        assert row["pc1"] == pytest.approx(float(result[nb.PROJECTION][i, 0]), rel=1e-3,
                                           abs=1e-6)
        assert row["true"] == CLASS_NAMES[int(evaluation.labels[i])]
        assert (row["mark"] == "misclassified") == bool(result[nb.LABELS][i]
                                                      != result[nb.PREDICTED][i])
        png = base64.b64decode(row["image"].split(",", 1)[1])
        np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(png))),
                                      result[nb.THUMBNAILS][i, :, :, 0])
    paper = json.loads(figures["json"].data)
    assert "image" not in paper["points"][0]
    assert "PC1" in figures["png"].caption and "1/D" in figures["png"].caption


def test_the_pages_projection_of_a_new_image_equals_numpys(tiny_net, evaluation, result):
    """The step's script carries the float32 mean and axes the page projects a drawn digit
    with: on them, the evaluation images land where the chart puts them, and a new image where
    NumPy's own PCA of the evaluation poses puts it."""
    figures = {f.kind: f for f in TECHNIQUE.render(result, TECHNIQUE.params_type(),
                                                   RenderContext(model="m", step="1-1",
                                                                 class_names=CLASS_NAMES,
                                                                 description=evaluation
                                                                 .net.description))}
    text = figures["js"].data.decode()
    record = json.loads(text[text.index("= {") + 2:text.rindex(";\n})")])["projection"]
    mean = np.frombuffer(base64.b64decode(record["mean"]), "<f4")
    components = np.frombuffer(base64.b64decode(record["components"]), "<f4").reshape(2, -1)
    assert record["dimensions"] == len(mean) == 3 * 4
    poses = np.asarray(evaluation.tensors("class_capsules")["class_capsules"], np.float64)
    points = poses.reshape(len(poses), -1)
    np.testing.assert_allclose(nb.project(points, mean, components), result[nb.PROJECTION],
                               atol=1e-5)
    drawn = np.random.default_rng(11).random((1, 12, 12, 1), dtype=np.float32)
    new = np.asarray(tiny_net.model(drawn, training=False)["class_capsules"],
                     np.float64).reshape(1, -1)
    _, _, vt = _numpy_pca(points)
    signs = np.sign(np.sum(vt[:2] * components, axis=1))
    reference = (new - points.mean(0)) @ (vt[:2] * signs[:, None]).T
    np.testing.assert_allclose(nb.project(new, mean, components), reference, atol=1e-5)


def test_the_trend_draws_both_shares_with_their_intervals(result):
    first = summarize(result)
    later = {**first, "pc1_share": 0.5, "pc2_share": 0.25,
             iv.INTERVALS: {**first[iv.INTERVALS],
                            "pc1_share": {**first[iv.INTERVALS]["pc1_share"], "low": 0.45,
                                          "high": 0.55}}}
    ctx = RenderContext(model="m", step="1-1", class_names=CLASS_NAMES)
    assert TECHNIQUE.render_trend([("0-0", first)], TECHNIQUE.params_type(), ctx) == []
    figures = TECHNIQUE.render_trend([("0-0", first), ("1-1", later)],
                                     TECHNIQUE.params_type(), ctx)
    assert {f.kind for f in figures} >= {"png", "svg"}
    assert "1/D" in figures[0].caption


@pytest.mark.slow
def test_em_matrices_are_flattened_and_self_routing_reads_its_activations():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))
    from em_fixture import TINY_EM
    from family_nets import TINY_SELF_ROUTING, build

    em = build(TINY_EM)
    evaluation = _evaluation(em)
    got = compute(evaluation)
    poses = np.asarray(evaluation.tensors("class_capsules")["class_capsules"], np.float64)
    assert poses.shape[-1] == 16                            # 4x4, row-major
    centred, _, vt = _numpy_pca(poses.reshape(len(poses), -1))
    signs = np.sign(np.sum(vt[:2] * got[nb.COMPONENTS], axis=1))
    np.testing.assert_allclose(got[nb.PROJECTION], centred @ (vt[:2] * signs[:, None]).T,
                               atol=1e-4)
    assert int(got[nb.CLASS_POSES]) == 1

    routing = build(TINY_SELF_ROUTING)
    assert routing.description.class_vectors is None         # no class-capsule pose
    evaluation = _evaluation(routing)
    got = compute(evaluation.restricted(TECHNIQUE.needs_for(TECHNIQUE.params_type(), routing)))
    activations = np.asarray(evaluation.tensors("lengths")["lengths"], np.float64)
    centred, _, vt = _numpy_pca(activations)
    signs = np.sign(np.sum(vt[:2] * got[nb.COMPONENTS], axis=1))
    np.testing.assert_allclose(got[nb.PROJECTION], centred @ (vt[:2] * signs[:, None]).T,
                               atol=1e-5)
    assert int(got[nb.CLASS_POSES]) == 0 and int(got[nb.DIMENSIONS]) == activations.shape[1]
