"""Explanation localisation: digit masks against hand-made cases (the overlap rule both ways),
analytic oracles (a map equal to a digit's mask; the uniform map's relevance mass = the mask's
area share), the summary's intervals and verdicts on hand-made scores, and, on a tiny CapsNet
and synthetic pairs, the stored scores against an independent recomputation (the maps from the
RPV and Grad-CAM++ techniques on a fresh probe, scored pixel by pixel in plain NumPy)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from reportgen.results import intervals as iv
from reportgen.techniques import explanation_localisation as el
from reportgen.techniques.explanation_localisation import masks as lm


def _pairs(n: int = 4, size: int = 12, seed: int = 0):
    """(sources (n, 2, H, W, 1), images): digit A a bar in the left half, digit B a bar in the
    right half at a random height, each pixel's ink in (0.6, 1]; a few pairs share one column
    of ink (an overlap)."""
    rng = np.random.default_rng(seed)
    sources = np.zeros((n, 2, size, size, 1), np.float32)
    for i in range(n):
        top = rng.integers(0, size - 4)
        sources[i, 0, top:top + 4, 2:size // 2 + (i % 2)] = rng.uniform(0.6, 1, (4, size // 2 - 2
                                                                              + i % 2, 1))
        top = rng.integers(0, size - 4)
        sources[i, 1, top:top + 4, size // 2:size - 2] = rng.uniform(0.6, 1, (4, size // 2 - 2,
                                                                            1))
    return sources, sources.max(axis=1)


def test_masks_from_components_and_the_overlap_rule():
    sources = np.zeros((1, 2, 4, 4, 1))
    sources[0, 0, :, :2, 0] = [[0.9, 0.4], [0.6, 0.51], [0.2, 0.0], [1.0, 0.7]]
    sources[0, 1, :, 1:3, 0] = [[0.8, 0.8], [0.9, 0.1], [0.3, 0.6], [0.5, 0.7]]
    a = np.zeros((4, 4), bool)
    a[[0, 1, 1, 3, 3], [0, 0, 1, 0, 1]] = True                 # ink > 0.5
    b = np.zeros((4, 4), bool)
    b[[0, 0, 1, 2, 3], [1, 2, 1, 2, 2]] = True
    both = lm.digit_masks(sources, 0.5, "both")
    np.testing.assert_array_equal(both[0, 0], a)
    np.testing.assert_array_equal(both[0, 1], b)
    excluded = lm.digit_masks(sources, 0.5, "exclude")
    shared = a & b                                             # the pixel (1, 1)
    assert shared.sum() == 1 and shared[1, 1]
    np.testing.assert_array_equal(excluded[0, 0], a & ~shared)
    np.testing.assert_array_equal(excluded[0, 1], b & ~shared)
    # a map pointing at the shared pixel: a hit for both digits when counted in both, for
    # neither when excluded
    peak = np.zeros((2, 4, 4))
    peak[:, 1, 1] = 1.0
    for rule, hit in (("both", 1.0), ("exclude", 0.0)):
        own, other = lm.class_masks(lm.digit_masks(sources, 0.5, rule))
        got = lm.scores(peak, own, other)["pointing"]
        np.testing.assert_array_equal(got, np.full((2, 2), hit))
    with pytest.raises(ValueError):
        lm.digit_masks(sources, 0.5, "either")


def test_class_masks_order_own_then_other():
    masks = np.zeros((2, 2, 3, 3), bool)
    masks[0, 0, 0, 0] = masks[0, 1, 1, 1] = masks[1, 0, 2, 2] = masks[1, 1, 0, 2] = True
    own, other = lm.class_masks(masks)
    np.testing.assert_array_equal(own, masks.reshape(4, 3, 3))
    np.testing.assert_array_equal(other, masks[:, [1, 0]].reshape(4, 3, 3))


def test_a_map_equal_to_its_digits_mask_scores_perfectly():
    sources, _ = _pairs(5)
    masks = lm.digit_masks(sources, 0.5, "exclude")
    own, other = lm.class_masks(masks)
    assert not (own & other).any()                             # disjoint after the exclusion
    got = el.score_all({"rpv_modified": own.astype(float)}, masks, np.random.default_rng(0))
    m = el.METHODS.index("rpv_modified")
    np.testing.assert_array_equal(got["pointing"][m], np.tile([1.0, 0.0], (len(own), 1)))
    np.testing.assert_array_equal(got["mass"][m], np.tile([1.0, 0.0], (len(own), 1)))
    # the map of the other digit: the failure mode, exactly reversed
    got = el.score_all({"rpv_modified": other.astype(float)}, masks, np.random.default_rng(0))
    np.testing.assert_array_equal(got["mass"][m], np.tile([0.0, 1.0], (len(own), 1)))


def test_uniform_baseline_is_the_mask_area_share():
    sources, _ = _pairs(6, seed=3)
    masks = lm.digit_masks(sources, 0.5, "both")
    own, other = lm.class_masks(masks)
    got = el.score_all({}, masks, np.random.default_rng(0))
    u = el.METHODS.index("uniform_map")
    share = np.stack([own.sum((1, 2)), other.sum((1, 2))], 1) / own[0].size
    np.testing.assert_allclose(got["mass"][u], share, rtol=0, atol=1e-15)
    np.testing.assert_allclose(got["pointing"][u], share, rtol=0, atol=1e-15)
    # a method the model lacks stays NaN
    assert np.isnan(got["mass"][el.METHODS.index("lrp")]).all()


def _arrays(scores: dict[str, dict[str, np.ndarray]], n: int):
    """Hand-made (methods, 2N, 2) arrays from {method: {"pointing"/"mass": (2N, 2)}}."""
    out = {m: np.full((len(el.METHODS), 2 * n, 2), np.nan, np.float32) for m in el.METRICS}
    for method, values in scores.items():
        for metric, v in values.items():
            out[metric][el.METHODS.index(method)] = v
    has = [m in scores for m in el.METHODS]
    return {**out, "has": np.asarray(has, np.int64), "area": np.full((n, 2), 0.1, np.float32),
            "labels": np.zeros((n, 2), np.int64)}


def test_summary_means_intervals_and_verdicts():
    n = 30
    rng = np.random.default_rng(0)
    good = np.column_stack([rng.uniform(0.5, 0.9, 2 * n), rng.uniform(0.0, 0.1, 2 * n)])
    flat = np.column_stack([np.full(2 * n, 0.1), np.full(2 * n, 0.1)]) + rng.normal(
        0, 0.01, (2 * n, 2))
    hits = np.column_stack([rng.random(2 * n) < 0.8, rng.random(2 * n) < 0.1]).astype(float)
    arrays = _arrays({"gradcam_pp": {"mass": good, "pointing": hits},
                      "random_map": {"mass": flat, "pointing": hits[:, ::-1]},
                      "uniform_map": {"mass": flat, "pointing": flat}}, n)
    summary = el.summarize(arrays, el.Params())
    pairs = good[:, 0].reshape(n, 2).mean(1)
    got = iv.interval_of(summary, "mass_gradcam_pp_own")
    expected = iv.bootstrap_mean(pairs)
    assert got.value == pytest.approx(pairs.mean())
    assert (got.low, got.high) == pytest.approx((expected.low, expected.high))
    difference = iv.difference_of(summary, "mass_gradcam_pp_own", "mass_uniform_map_own")
    want = iv.paired_difference(pairs, flat[:, 0].reshape(n, 2).mean(1))
    assert (difference.low, difference.high) == pytest.approx((want.low, want.high))
    assert summary["verdict_mass_gradcam_pp_uniform_map"] == \
        "Grad-CAM++ relevance mass accuracy above the uniform map's"
    assert summary["verdict_mass_gradcam_pp_other"] == \
        "Grad-CAM++ relevance mass accuracy above its score on the other digit"
    assert summary["verdict_pointing_gradcam_pp_other"].endswith("above its score on the other "
                                                                 "digit")
    assert summary["methods"] == ["gradcam_pp", "random_map", "uniform_map"]
    # a map no better than uniform is "not told apart"
    arrays = _arrays({"gradcam_pp": {"mass": flat[:, ::-1], "pointing": hits},
                      "uniform_map": {"mass": flat, "pointing": flat}}, n)
    assert "not told apart" in el.summarize(arrays)["verdict_mass_gradcam_pp_uniform_map"]


def test_params_validation():
    from reportgen.errors import ReportgenError

    for bad in ({"images": 0}, {"overlap": "either"}, {"ink_threshold": 1.5}):
        with pytest.raises(ReportgenError):
            el.Params(**bad)


@pytest.fixture(scope="module")
def computed(tiny_net):
    """compute() on a tiny CapsNet, its pair sample replaced by synthetic pairs."""
    from reportgen.techniques import multimnist_segmentation

    sources, images = _pairs(4)
    labels = np.array([[0, 1], [2, 0], [1, 2], [0, 2]])
    original = multimnist_segmentation.pair_sample
    multimnist_segmentation.pair_sample = lambda dataset, n, seed: (images, labels, sources, None)
    try:
        params = el.Params(images=4)
        evaluation = SimpleNamespace(net=tiny_net, class_names=("a", "b", "c"))
        return el.compute(evaluation, params), sources, images, labels, params
    finally:
        multimnist_segmentation.pair_sample = original


@pytest.mark.slow
def test_stored_scores_equal_an_independent_recomputation(computed, tiny_net):
    from reportgen.techniques.explanation_quality.tests.test_explanation_quality import _maps

    result, sources, images, labels, params = computed
    repeated = np.repeat(images, 2, axis=0).astype(np.float64)
    targets = labels.reshape(-1)
    maps = _maps(tiny_net, repeated, targets)
    masks = sources[..., 0] > params.ink_threshold
    shared = masks[:, 0] & masks[:, 1]
    masks = masks & ~shared[:, None]
    rng = np.random.default_rng(params.seed)
    maps["random_map"] = rng.random((len(targets), *images.shape[1:3]))
    for method in ("rpv_modified", "rpv_original", "gradcam_pp", "random_map"):
        m = el.METHODS.index(method)
        for row in range(len(targets)):
            pair, k = divmod(row, 2)
            phi = maps[method][row]
            peak = np.unravel_index(np.argmax(phi), phi.shape)
            positive = np.maximum(phi, 0)
            for j, mask in enumerate((masks[pair, k], masks[pair, 1 - k])):
                hit = float(mask[peak] and phi.max() > phi.min())
                assert result["pointing"][m, row, j] == hit
                np.testing.assert_allclose(result["mass"][m, row, j],
                                           positive[mask].sum() / positive.sum(), rtol=1e-5)
    u = el.METHODS.index("uniform_map")
    for row in range(len(targets)):
        pair, k = divmod(row, 2)
        assert result["mass"][u, row, 0] == pytest.approx(masks[pair, k].mean())
    assert result["has"][el.METHODS.index("builtin")] == 0
    assert result["has"][el.METHODS.index("lrp")] == 0


@pytest.mark.slow
def test_figures_and_caption(computed):
    from reportgen.techniques.base import RenderContext

    result, *_, params = computed
    figures = el.TECHNIQUE.render(result, params, RenderContext("M", "1-0", ("a", "b", "c")))
    assert [f.kind for f in figures] == ["png", "svg", "pdf"] * 2
    assert figures[0].caption.startswith("Do the explanations point at the right digit?")
    summary = el.summarize(result, params)
    for verdict in (v for k, v in summary.items() if k.startswith("verdict_")):
        assert verdict in figures[0].caption


def test_findings_say_the_verdicts_per_explanation():
    from reportgen.results.findings import localisation_findings

    n = 30
    rng = np.random.default_rng(2)
    good = np.column_stack([rng.uniform(0.5, 0.9, 2 * n), rng.uniform(0.0, 0.1, 2 * n)])
    flat = np.full((2 * n, 2), 0.1) + rng.normal(0, 0.01, (2 * n, 2))
    summary = el.summarize(_arrays({"rpv_modified": {"mass": good, "pointing": good > 0.5},
                                    "uniform_map": {"mass": flat, "pointing": flat}}, n))
    found = localisation_findings(summary)
    assert len(found) == 1 and found[0].technique == "explanation_localisation"
    for verdict in ("RPV (modified) relevance mass accuracy above the uniform map's",
                    "RPV (modified) pointing game above its score on the other digit"):
        assert verdict in found[0].text
    assert localisation_findings({}) == []
