"""Explanation fidelity: deletion/insertion curves on a synthetic scorer with a known
relevance, Spearman against scipy, placement of Grad-CAM++ on the primary grid, and the whole
analysis on a tiny CapsNet."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from reportgen.errors import ReportgenError
from reportgen.probe.evaluation import EvalBatch
from reportgen.probe.probe import run_probe
from reportgen.techniques.explanation_fidelity.numbers import METHOD_LABELS
from reportgen.techniques import explanation_fidelity as ef
from reportgen.techniques import gradcam_pp, rpv
from reportgen.techniques.base import RenderContext


# --- curves on a synthetic linear scorer --------------------------------------------------------

def _linear_problem(n=16, size=12, seed=0):
    """Images, fill, and weights of f(x) = sum(w * x): a model whose relevance is known."""
    rng = np.random.default_rng(seed)
    images = rng.random((n, size, size, 1), dtype=np.float32)
    weights = np.zeros((size, size, 1), np.float32)
    weights[2:7, 3:9] = rng.random((5, 6, 1)) * 4.0          # a few strongly weighted patches
    weights += rng.random(weights.shape).astype(np.float32) * 0.2
    return rng, images, weights


def _linear_score(weights):
    calls = []

    def score(batch, image_index):
        calls.append(len(batch))
        return np.sum(batch * weights, axis=(1, 2, 3))
    return score, calls


@pytest.mark.parametrize("mode", ef.MODES)
def test_oracle_curve_beats_random_order(mode):
    rng, images, weights = _linear_problem()
    fill = (rng.random(images.shape, dtype=np.float32) if mode == "deletion"
            else ef.gaussian_blur(images, 2.0))
    # The true relevance of each pixel for this scorer: what replacing it changes, w (x - fill).
    oracle = (weights * (images - fill))[..., 0]
    patch = 3                                                 # 12 / 3: every patch is full
    order = ef.relevance_order(ef.patch_relevance(oracle, patch), rng)
    random = ef.random_order(len(images), 16, rng)
    score, calls = _linear_score(weights)
    best = ef.perturbation_curves(images, order, fill, patch, mode, score, rows=37)
    base = ef.perturbation_curves(images, random, fill, patch, mode, score, rows=37)
    assert max(calls) <= 37 and sum(calls) == 2 * len(images) * 17
    # The oracle order is the best possible one for a linear score: per image and per step its
    # deletion curve lies below (insertion curve above) any other order's.
    if mode == "deletion":
        assert np.all(best <= base + 1e-4)
        assert ef.deletion_aopc(best).mean() > ef.deletion_aopc(base).mean() + 0.5
        assert ef.area_under_curve(best).mean() < ef.area_under_curve(base).mean()
    else:
        assert np.all(best >= base - 1e-4)
        assert ef.area_under_curve(best).mean() > ef.area_under_curve(base).mean() + 0.5
    np.testing.assert_allclose(best[:, [0, -1]], base[:, [0, -1]], rtol=1e-5)


def test_curve_end_points_and_steps():
    rng, images, weights = _linear_problem(n=3, size=10)
    fill = rng.random(images.shape, dtype=np.float32)
    score, _ = _linear_score(weights)
    f = lambda x: np.sum(x * weights, axis=(1, 2, 3))         # noqa: E731
    order = ef.random_order(3, 16, rng)                        # 10 px / 3 -> 4x4 patches
    deletion = ef.perturbation_curves(images, order, fill, 3, "deletion", score)
    insertion = ef.perturbation_curves(images, order, fill, 3, "insertion", score)
    assert deletion.shape == insertion.shape == (3, 17)
    np.testing.assert_allclose(deletion[:, 0], f(images), rtol=1e-5)
    np.testing.assert_allclose(deletion[:, -1], f(fill), rtol=1e-5)
    np.testing.assert_allclose(insertion[:, 0], f(fill), rtol=1e-5)
    np.testing.assert_allclose(insertion[:, -1], f(images), rtol=1e-5)

    # Step k changes exactly the first k patches of the order (edge patches are 1 px wide).
    seen = []
    ef.perturbation_curves(images[:1], order[:1], np.full_like(images[:1], 7.0), 3, "deletion",
                           lambda b, i: seen.append(b[:, :, :, 0] == 7.0) or np.zeros(len(b)))
    masks = np.concatenate(seen)
    for k in range(17):
        patches = {(r // 3) * 4 + c // 3 for r, c in zip(*np.nonzero(masks[k]))}
        assert patches == set(order[0, :k].tolist())


def test_aopc_and_area_by_hand():
    curve = np.array([[1.0, 0.5, 0.0]])
    assert ef.deletion_aopc(curve)[0] == pytest.approx(0.5)   # mean of 0, 0.5, 1
    assert ef.area_under_curve(curve)[0] == pytest.approx(0.5)
    assert ef.area_under_curve(np.array([[0.0, 1.0, 1.0, 1.0]]))[0] == pytest.approx(5 / 6)


def test_patch_relevance_means_and_nan_as_zero():
    maps = np.arange(25, dtype=np.float64).reshape(1, 5, 5)
    maps[0, 0, 0] = np.nan
    rel = ef.patch_relevance(maps, 3)                          # patches 3+2 rows/cols
    assert rel.shape == (1, 2, 2)
    assert rel[0, 0, 0] == pytest.approx((np.nansum(maps[0, :3, :3])) / 9)
    assert rel[0, 1, 1] == pytest.approx(maps[0, 3:, 3:].mean())
    assert rel[0, 0, 1] == pytest.approx(maps[0, :3, 3:].mean())


def test_ties_are_broken_at_random_but_reproducibly():
    rel = np.zeros((2, 2, 2))
    rel[:, 1, 1] = 1.0
    a = ef.relevance_order(rel, np.random.default_rng(3))
    b = ef.relevance_order(rel, np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)
    assert np.all(a[:, 0] == 3) and sorted(a[0].tolist()) == [0, 1, 2, 3]


def _separable_blur(images, sigma):
    """Plain-NumPy reference: a normalised Gaussian kernel of radius ceil(3 sigma) along H, then W,
    on edge-padded images."""
    radius = max(1, int(np.ceil(3.0 * sigma)))
    kernel = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma) ** 2)
    kernel /= kernel.sum()
    out = np.asarray(images, np.float64)
    for axis in (1, 2):
        pad = [(0, 0)] * out.ndim
        pad[axis] = (radius, radius)
        padded = np.pad(out, pad, mode="edge")
        out = sum(w * np.take(padded, np.arange(i, i + out.shape[axis]), axis=axis)
                  for i, w in enumerate(kernel))
    return out


@pytest.mark.parametrize("sigma", [2.0, 3.0])      # 3: the default; radius 3 sigma for both
def test_gaussian_blur(sigma):
    flat = np.full((1, 9, 9, 1), 0.4, np.float32)
    np.testing.assert_allclose(ef.gaussian_blur(flat, sigma), flat, rtol=1e-6)
    images = np.random.default_rng(0).random((2, 14, 14, 3), dtype=np.float32)
    blurred = ef.gaussian_blur(images, sigma)
    assert blurred.dtype == np.float32 and blurred.shape == images.shape
    np.testing.assert_allclose(blurred, _separable_blur(images, sigma), atol=1e-6)
    one_channel = ef.gaussian_blur(images[..., 1:2], sigma)[..., 0]       # channels apart
    np.testing.assert_array_equal(blurred[..., 1], one_channel)


# --- Spearman -----------------------------------------------------------------------------------

def _average_ranks(x):
    """Plain reference: rank i+1 by sorted position, each tie group given its mean rank."""
    order = sorted(range(len(x)), key=lambda i: x[i])
    ranks = np.empty(len(x))
    start = 0
    while start < len(x):
        end = start
        while end + 1 < len(x) and x[order[end + 1]] == x[order[start]]:
            end += 1
        for k in range(start, end + 1):
            ranks[order[k]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def test_spearman_by_hand_and_constant():
    assert ef.spearman(np.array([1.0, 2, 3, 4]), np.array([1.0, 3, 2, 4])) == pytest.approx(0.8)
    assert ef.spearman(np.array([1.0, 2, 3]), np.array([3.0, 2, 1])) == pytest.approx(-1.0)
    assert np.isnan(ef.spearman(np.array([1.0, 2, 3]), np.array([5.0, 5, 5])))


def test_spearman_per_row_matches_scipy_and_the_pearson_of_average_ranks():
    from scipy import stats

    rng = np.random.default_rng(0)
    a = rng.integers(0, 5, (20, 36)).astype(np.float64)       # many ties
    b = a + rng.normal(0, 2, a.shape)
    b[:, :10] = 0.0                                            # zero blocks, like relu maps
    ours = ef.spearman(a, b)
    assert ours.shape == (20,)
    for row in range(len(a)):
        assert ours[row] == pytest.approx(stats.spearmanr(a[row], b[row]).statistic, abs=1e-12)
        by_hand = np.corrcoef(_average_ranks(a[row]), _average_ranks(b[row]))[0, 1]
        assert ours[row] == pytest.approx(by_hand, abs=1e-12)


# --- placement on the primary grid --------------------------------------------------------------

def test_pool_to_grid(tiny_net):
    fields = tiny_net.receptive_fields()          # conv1 (0, 3, 1); primary (0, 5, 2) on 12x12
    rng = np.random.default_rng(0)
    primary = rng.random((2, 4, 4))
    same = ef.pool_to_grid(primary, fields[-1], fields[-1], (4, 4), (12, 12))
    np.testing.assert_array_equal(same, primary)
    conv = rng.random((2, 10, 10))
    pooled = ef.pool_to_grid(conv, fields[0], fields[-1], (4, 4), (12, 12))
    # Primary cell p is centred on pixel 2p + 2; its centre tile is pixels 2p+1, 2p+2, where
    # conv1 cells 2p, 2p+1 are centred: the pool is the 2x2 mean of those conv1 cells.
    expected = np.stack([[[conv[n, 2 * p:2 * p + 2, 2 * q:2 * q + 2].mean() for q in range(4)]
                          for p in range(4)] for n in range(2)])
    np.testing.assert_allclose(pooled, expected)


# --- on a tiny CapsNet --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def eval_batch(tiny_net):
    rng = np.random.default_rng(7)
    images = rng.random((18, 12, 12, 1), dtype=np.float32)
    return EvalBatch(tiny_net, images, rng.integers(0, 3, 18), ("a", "b", "c"))


@pytest.fixture(scope="module")
def result(eval_batch):
    return ef.compute(eval_batch, ef.Params(images=9, patch=3))


@pytest.mark.slow
def test_compute_shapes_and_ranges(result):
    assert result["deletion"].shape == result["insertion"].shape == (5, 9, 17)
    # A CapsNet has RPV, not GraCapsNet's attention (its rows stay NaN).
    own = [ef.METHODS.index(m) for m in ("rpv_modified", "rpv_original", "gradcam_pp", "random")]
    assert np.isnan(result["deletion"][ef.METHODS.index("builtin")]).all()
    result = {**result, "deletion": result["deletion"][own], "insertion": result["insertion"][own]}
    assert np.isfinite(result["deletion"]).all() and np.isfinite(result["insertion"]).all()
    assert np.all((result["deletion"] >= 0) & (result["deletion"] <= 1))
    agreement = result["agreement"][~np.isnan(result["agreement"])]
    assert len(agreement) and np.all(np.abs(agreement) <= 1)
    assert tuple(result["grid_shape"]) == (4, 4) and tuple(result["patch_grid"]) == (4, 4)
    np.testing.assert_array_equal(result["targets"], result["labels"])     # target = true class
    # Every method starts from the same clean image and ends on the same noise image.
    assert np.ptp(result["deletion"][:, :, 0], axis=0).max() < 1e-6
    assert np.ptp(result["deletion"][:, :, -1], axis=0).max() < 1e-6
    assert np.ptp(result["insertion"][:, :, 0], axis=0).max() < 1e-6


@pytest.mark.slow
def test_compute_is_deterministic(eval_batch, result):
    again = ef.compute(eval_batch, ef.Params(images=9, patch=3))
    for key in result:
        np.testing.assert_array_equal(again[key], result[key])


@pytest.mark.slow
def test_maps_reuse_rpv_and_gradcam(eval_batch, tiny_net):
    index = np.arange(6)
    batch = run_probe(tiny_net, eval_batch.images[index])
    predicted = batch["predicted"]
    rpv_maps = rpv.compute(batch, rpv.Params(method="original"))["maps"]
    np.testing.assert_allclose(ef.rpv_maps(eval_batch, index, predicted, "original"),
                               rpv_maps[np.arange(6), predicted], rtol=1e-5, atol=1e-9)
    # Predicted targets: exactly the Grad-CAM++ technique's maps.
    cam = gradcam_pp.compute(batch, gradcam_pp.Params(layer="conv1"))["map"]
    np.testing.assert_allclose(ef.gradcam_maps(eval_batch, index, predicted, "conv1"), cam,
                               atol=1e-5)
    # Another target: the gradients of that class's length, taken afresh.
    import tensorflow as tf

    other = (predicted + 1) % 3
    x = tf.constant(eval_batch.images[index])
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = tiny_net.model(x, training=False)
        score = tf.reduce_sum(tf.gather(out["lengths"], other, axis=1, batch_dims=1))
    grads = tape.gradient(score, out["conv1"]).numpy()
    lengths = out["lengths"].numpy()[np.arange(6), other]
    expected = gradcam_pp.normalize_maps(gradcam_pp.gradcam_plus_plus(out["conv1"].numpy(),
                                                                      grads, lengths))
    np.testing.assert_allclose(ef.gradcam_maps(eval_batch, index, other, "conv1"), expected,
                               atol=1e-5)


@pytest.mark.slow
def test_summary_and_figures(result):
    params = ef.Params(images=9, patch=3)
    summary = ef.summarize(result, params)
    json.dumps(summary)
    for method in ef.METHODS:
        for key in ("deletion_aopc", "deletion_auc", "insertion_auc"):
            if method == "builtin":       # not a CapsNet's: left out
                assert f"{key}_{method}" not in summary
            else:
                assert isinstance(summary[f"{key}_{method}"], float)
    assert summary["builtin_method"] == "rpv_modified"
    assert summary["grid"] == "4x4" and summary["images"] == 9 and summary["patches"] == 16
    ctx = RenderContext(model="tiny", step="1-10", class_names=("a", "b", "c"))
    figures = ef.TECHNIQUE.render(result, params, ctx)
    names = [f.name for f in figures]
    assert names == ["curves.png", "curves.svg", "curves.pdf", "agreement.png",
                     "agreement.svg", "agreement.pdf", "examples.png"]
    for figure in figures:
        assert figure.data.startswith({"png": b"\x89PNG", "pdf": b"%PDF"}.get(figure.kind,
                                                                              b"<?xml"))
        assert figure.caption
    assert "5x5" not in figures[0].caption and "3x3-pixel patches" in figures[0].caption
    assert figures == ef.TECHNIQUE.render(result, params, ctx)             # deterministic
    other = dict(summary, agreement_mean=None, grid="18x18")
    trend = ef.TECHNIQUE.render_trend([("1-10", summary), ("2-10", other)], params, ctx)
    compare = ef.TECHNIQUE.render_compare([("A", summary), ("B", other)], params, ctx)
    assert [f.kind for f in trend] == [f.kind for f in compare] == ["png", "svg", "pdf"]
    assert "18x18" in compare[0].caption


def test_params_validation_and_variants(tiny_net, make_net):
    with pytest.raises(ReportgenError):
        ef.Params(target="other")
    with pytest.raises(ReportgenError):
        ef.Params(patch=0)
    with pytest.raises(ReportgenError):
        ef.Params(insertion_start="grey")
    assert ef.TECHNIQUE.variants(tiny_net) == [ef.Params()]
    assert ef.TECHNIQUE.scope == "dataset" and ef.TECHNIQUE.name == "explanation_fidelity"
    hash(ef.Params())


def test_drawing_never_imports_tensorflow():
    code = ("import sys, reportgen.techniques.explanation_fidelity.figures, "
            "reportgen.techniques.explanation_fidelity; "
            "assert not any(m.split('.')[0] in ('tensorflow', 'keras') for m in sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


def _as_gracaps(result):
    """The tiny CapsNet's result as GraCapsNet's would be: its attention E in RPV's place (the
    RPV rows NaN, as compute leaves the methods a model does not have)."""
    methods = ef.METHODS
    out = {k: np.array(v, copy=True) for k, v in result.items()}
    for key in ("deletion", "insertion"):
        out[key][methods.index("builtin")] = out[key][methods.index("rpv_modified")]
        out[key][[methods.index("rpv_modified"), methods.index("rpv_original")]] = np.nan
    out["agreement_original"][:] = np.nan
    out["builtin_method"] = np.int64(methods.index("builtin"))
    return out


def _legends_and_captions(monkeypatch, draw):
    """(legend texts, captions) of the figures `draw()` makes."""
    from reportgen.techniques.explanation_fidelity import figures as drawing

    figures = []
    for name in ("figure_pair", "png_figure"):
        original = getattr(drawing, name)
        monkeypatch.setattr(drawing, name, lambda fig, *a, _o=original, **k:
                            figures.append(fig) or _o(fig, *a, **k))
    drawn = draw()
    legends = [legend for fig in figures
               for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes)] if legend]
    return ({t.get_text() for legend in legends for t in legend.get_texts()},
            [f.caption for f in drawn])


@pytest.mark.parametrize("family", ["capsnet", "gracapsnet"])
@pytest.mark.slow
def test_figures_and_numbers_name_only_the_models_own_methods(result, family, monkeypatch):
    """A CapsNet's figures, captions and summary never name GraCapsNet's attention, and a
    GraCapsNet's never name RPV: the legends list the methods the model has, nothing else."""
    params = ef.Params(images=9, patch=3)
    arrays = result if family == "capsnet" else _as_gracaps(result)
    own = ("rpv_modified", "rpv_original") if family == "capsnet" else ("builtin",)
    other = {"capsnet": ("GraCapsNet", "built-in"), "gracapsnet": ("RPV",)}[family]
    expected = {METHOD_LABELS[m] for m in (*own, "gradcam_pp", "random")}
    summary = ef.summarize(arrays, params)
    assert {k for k in summary if k.startswith("deletion_aopc_")} == \
        {f"deletion_aopc_{m}" for m in (*own, "gradcam_pp", "random")}
    ctx = RenderContext(model="tiny", step="1-10", class_names=("a", "b", "c"))
    later = dict(summary, agreement_mean=0.5)
    for draw in (lambda: ef.TECHNIQUE.render(arrays, params, ctx),
                 lambda: ef.TECHNIQUE.render_trend([("1-10", summary), ("2-10", later)],
                                                   params, ctx),
                 lambda: ef.TECHNIQUE.render_compare([("A", summary), ("B", later)], params,
                                                     ctx)):
        legends, captions = _legends_and_captions(monkeypatch, draw)
        methods = {text.split(" (AOPC")[0].split(" (AUC")[0] for text in legends
                   if "vs Grad-CAM++" not in text}
        assert methods <= expected and expected & methods, legends
        for text in (*legends, *captions):
            assert not any(word in text for word in other), text
    # The curves name every method the model has.
    legends, _ = _legends_and_captions(monkeypatch, lambda: ef.TECHNIQUE.render(arrays, params,
                                                                                ctx))
    assert {t.rsplit(" (", 1)[0] for t in legends if "AOPC" in t} == expected
