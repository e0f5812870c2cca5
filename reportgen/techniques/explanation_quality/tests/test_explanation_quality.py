"""The explanation-quality technique on a tiny CapsNet: its stored numbers against an independent
recomputation (the maps from the Grad-CAM++ and RPV techniques on a fresh probe, the scores from
the Keras model's outputs, the scores image by image with NumPy; ROAD's imputations by the
authors' system set-up solved densely), and its summary's intervals and verdicts on hand-made
arrays."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.figures.placement import place_grid_at_centres
from reportgen.probe.evaluation import EvalBatch, stratified_sample
from reportgen.probe.probe import run_probe
from reportgen.results import intervals as iv
from reportgen.techniques import explanation_quality as eq
from reportgen.techniques import gradcam_pp, rpv
from reportgen.techniques.base import RenderContext
from reportgen.techniques.explanation_quality import faithfulness as fq
from reportgen.techniques.explanation_quality.numbers import METHODS

PARAMS = eq.Params(images=6, subsets=12, subset_fraction=0.2, perturbations=10,
                   sensitivity_samples=3, radius=0.05, road_fractions=(0.2, 0.5, 0.8),
                   road_noise=0.02)
ROAD = ("road_morf", "road_lerf", "road_gap")


@pytest.fixture(scope="module")
def eval_batch(tiny_net):
    rng = np.random.default_rng(11)
    images = rng.random((12, 12, 12, 1), dtype=np.float32)
    return EvalBatch(tiny_net, images, rng.integers(0, 3, 12), ("a", "b", "c"))


@pytest.fixture(scope="module")
def result(eval_batch):
    return eq.compute(eval_batch, PARAMS)


def _maps(net, images, targets):
    """{method: (n, H, W)} each image's target-class maps placed on the input, taken from the
    RPV and Grad-CAM++ techniques over a probe of these images alone."""
    description = net.description
    batch = run_probe(net, images, gradients=False)                 # every tensor, no gradient
    grads = run_probe(net, images, needs={"grad[true]:conv1"}, labels=targets)
    rows = np.arange(len(images))
    hw = images.shape[1:3]
    primary = description.primary_capsules.receptive_field.rows
    out = {}
    for method in ("modified", "original"):
        grid = rpv.compute(batch, rpv.Params(method=method))["maps"][rows, targets]
        out[f"rpv_{method}"] = np.moveaxis(place_grid_at_centres(np.moveaxis(grid, 0, -1), hw,
                                                                 primary), -1, 0)
    lengths = batch["lengths"][rows, targets]
    cam = gradcam_pp.normalize_maps(gradcam_pp.gradcam_plus_plus(
        batch["conv:conv1"], grads["grad[true]:conv1"], lengths))
    field = description.receptive_field("conv1").rows
    out["gradcam_pp"] = np.moveaxis(place_grid_at_centres(np.moveaxis(cam, 0, -1), hw, field),
                                    -1, 0)
    return {m: np.nan_to_num(v, nan=0.0) for m, v in out.items()}


def _score(net, batch, targets):
    return net.model(np.asarray(batch, np.float32), training=False)["lengths"].numpy()[
        np.arange(len(batch)), targets]


@pytest.mark.slow
def test_stored_scores_equal_an_independent_recomputation(eval_batch, tiny_net, result):
    p = PARAMS
    index = stratified_sample(eval_batch.labels, p.images, seed=p.seed)
    np.testing.assert_array_equal(result["index"], index)
    images = eval_batch.images[index].astype(np.float64)
    targets = eval_batch.labels[index]
    n, h, w, _ = images.shape
    maps = _maps(tiny_net, images, targets)
    # the same draws, in the technique's order (inputs of the procedure, not its results)
    rng = np.random.default_rng(p.seed)
    maps["random_map"] = rng.random((n, h, w))
    maps["uniform_map"] = np.ones((n, h, w))
    size = round(p.subset_fraction * h * w)
    subsets = fq.random_subsets(n, (h, w), p.subsets, size, rng)
    noise = fq.gaussian_perturbations(images.shape, p.perturbations, p.noise_sigma, rng)
    deltas = fq.linf_ball(images.shape, p.sensitivity_samples, p.radius, rng)
    moved_random = rng.random((n, p.sensitivity_samples, h, w))

    for i in range(n):
        clean = _score(tiny_net, images[i:i + 1], targets[i:i + 1])[0]
        masked = np.where(subsets[i][..., None], 0.0, images[i][None])
        drops = clean - _score(tiny_net, masked, np.repeat(targets[i], p.subsets))
        changes = clean - _score(tiny_net, images[i][None] - noise[i],
                                 np.repeat(targets[i], p.perturbations))
        copies = images[i][None] + deltas[i]
        moved = _maps(tiny_net, copies, np.repeat(targets[i], p.sensitivity_samples))
        moved["random_map"] = moved_random[i]
        moved["uniform_map"] = np.ones((p.sensitivity_samples, h, w))
        for m, method in enumerate(METHODS):
            if method == "builtin":                       # a CapsNet has RPV, not a built-in map
                assert np.isnan(result["faithfulness"][m, i])
                continue
            phi = maps[method][i]
            sums = np.array([phi[s].sum() for s in subsets[i]])
            if method == "uniform_map":
                assert np.isnan(result["faithfulness"][m, i])   # every subset: the same sum
            else:
                np.testing.assert_allclose(result["faithfulness"][m, i],
                                           np.corrcoef(sums, drops)[0, 1], atol=2e-4)
            explained = np.array([(pert[..., 0] * phi).sum() for pert in noise[i]])
            beta = explained @ changes / (explained @ explained)
            np.testing.assert_allclose(result["infidelity"][m, i],
                                       np.mean((beta * explained - changes) ** 2),
                                       rtol=2e-3, atol=1e-12)
            ratios = [np.linalg.norm(moved[method][s] - phi) / np.linalg.norm(phi)
                      for s in range(p.sensitivity_samples)]
            np.testing.assert_allclose(result["sensitivity"][m, i], max(ratios), rtol=2e-3,
                                       atol=1e-6)
    assert (result["sensitivity"][METHODS.index("uniform_map")] == 0).all()


@pytest.mark.slow
def test_stored_road_scores_equal_an_independent_recomputation(eval_batch, tiny_net, result):
    """ROAD image by image: the pixels ranked by np.argsort of (map, tie key), imputed by the
    authors' dense system (test_road.authors_imputation) plus the technique's noise draw, scored
    by the Keras model directly."""
    from reportgen.techniques.explanation_quality.tests.test_road import authors_imputation

    p = PARAMS
    index = result["index"]
    images = eval_batch.images[index].astype(np.float64)
    targets = eval_batch.labels[index]
    n, h, w, c = images.shape
    maps = _maps(tiny_net, images, targets)
    rng = np.random.default_rng(p.seed)               # the technique's draws, in its order
    maps["random_map"] = rng.random((n, h, w))
    maps["uniform_map"] = np.ones((n, h, w))
    size = round(p.subset_fraction * h * w)
    fq.random_subsets(n, (h, w), p.subsets, size, rng)
    fq.gaussian_perturbations(images.shape, p.perturbations, p.noise_sigma, rng)
    fq.linf_ball(images.shape, p.sensitivity_samples, p.radius, rng)
    rng.random((n, p.sensitivity_samples, h, w))
    ties = rng.random((n, h, w))
    noise = p.road_noise * rng.standard_normal((n, 2, len(p.road_fractions), h, w, c))
    np.testing.assert_allclose(result["road_fractions"], p.road_fractions)
    for m, method in enumerate(METHODS):
        if method == "builtin":
            assert np.isnan(result["road_morf"][m]).all()
            continue
        for i in range(n):
            # ascending by relevance, equal relevance by the tie key (lexsort's last key first)
            order = np.lexsort((ties[i].reshape(-1), maps[method][i].reshape(-1)))
            curves = {}
            for o, name in enumerate(("morf", "lerf")):
                batch = []
                for f, share in enumerate(p.road_fractions):
                    k = int(round(share * h * w))
                    chosen = order[::-1][:k] if name == "morf" else order[:k]
                    removed = np.zeros(h * w, bool)
                    removed[chosen] = True
                    removed = removed.reshape(h, w)
                    filled = authors_imputation(images[i], removed)
                    batch.append(np.where(removed[..., None], filled + noise[i, o, f], filled))
                curves[name] = _score(tiny_net, np.stack(batch),
                                      np.repeat(targets[i], len(batch)))
                np.testing.assert_allclose(result[f"road_{name}_curve"][m, i], curves[name],
                                           rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(result["road_morf"][m, i], curves["morf"].mean(),
                                       rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(result["road_gap"][m, i],
                                       curves["lerf"].mean() - curves["morf"].mean(),
                                       rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_summary_means_intervals_and_figure(result):
    summary = eq.summarize(result, PARAMS)
    for metric in ("faithfulness", "infidelity", "sensitivity", *ROAD):
        for m, method in enumerate(METHODS):
            values = np.asarray(result[metric][m], np.float64)
            valid = values[np.isfinite(values)]
            if method == "builtin" or valid.size == 0:
                assert summary.get(f"{metric}_{method}") is None
                continue
            expected = iv.bootstrap_mean(valid)
            got = iv.interval_of(summary, f"{metric}_{method}")
            assert got.value == pytest.approx(valid.mean())
            assert (got.low, got.high) == pytest.approx((expected.low, expected.high))
    figures = eq.TECHNIQUE.render(result, PARAMS, RenderContext("M", "1-0", ("a", "b", "c")))
    assert [f.kind for f in figures] == ["png", "svg", "pdf"]
    assert figures[0].caption.startswith("How far to trust these explanations?")
    assert "ROAD (Rong et al. 2022): at each of 20%, 50%, 80%" in figures[0].caption
    for method in eq.own_methods(result):
        for baseline in ("random_map", "uniform_map"):
            got = iv.difference_of(summary, f"road_gap_{method}", f"road_gap_{baseline}")
            expected = iv.paired_difference(result["road_gap"][METHODS.index(method)],
                                            result["road_gap"][METHODS.index(baseline)])
            assert (got.low, got.high) == pytest.approx((expected.low, expected.high))


def _arrays(faithfulness, infidelity, sensitivity, has, road=None):
    """Hand-made arrays; ROAD's scores `road` = (morf, lerf) (methods, N), else all 0."""
    morf, lerf = road if road is not None else (np.zeros_like(infidelity),) * 2
    morf, lerf = np.asarray(morf, np.float32), np.asarray(lerf, np.float32)
    return {"faithfulness": np.asarray(faithfulness, np.float32),
            "infidelity": np.asarray(infidelity, np.float32),
            "sensitivity": np.asarray(sensitivity, np.float32),
            "road_morf": morf, "road_lerf": lerf, "road_gap": lerf - morf,
            "has": np.asarray(has, np.int64), "subset_size": np.int64(10)}


def test_verdicts_follow_the_paired_intervals():
    """Hand-made scores of 40 images: RPV's faithfulness clearly above the random map's, its
    infidelity equal to the uniform map's up to noise of mean zero, its max-sensitivity above
    the random map's; the words follow the paired differences' intervals."""
    rng = np.random.default_rng(0)
    n = 40
    nan = np.full(n, np.nan)
    noise = rng.normal(0, 0.01, n)
    faith = [0.6 + noise, 0.5 + noise, nan, nan, rng.normal(0, 0.05, n), nan]
    infid = [1.0 + noise - noise.mean(), 1.0 + noise, nan, nan, 2.0 + noise, 1.0 + noise[::-1]
             - noise.mean()]
    sens = [0.9 + noise, 0.1 + noise, nan, nan, 0.5 + noise, np.zeros(n)]
    summary = eq.summarize(_arrays(faith, infid, sens, [1, 1, 0, 0, 1, 1]), eq.Params())
    assert summary["verdict_faithfulness_rpv_modified_random_map"] == \
        "faithfulness correlation above the random map's"
    assert summary["verdict_infidelity_rpv_modified_uniform_map"] == \
        "infidelity not told apart from the uniform map's"
    assert summary["verdict_infidelity_rpv_modified_random_map"] == \
        "infidelity below the random map's"
    assert summary["verdict_sensitivity_rpv_modified_random_map"] == \
        "max-sensitivity above the random map's"
    assert summary["verdict_sensitivity_rpv_original_random_map"] == \
        "max-sensitivity below the random map's"
    difference = iv.difference_of(summary, "faithfulness_rpv_modified",
                                  "faithfulness_random_map")
    expected = iv.paired_difference(faith[0], faith[4])
    assert (difference.low, difference.high) == pytest.approx((expected.low, expected.high))
    assert summary["faithfulness_uniform_map"] is None
    from reportgen.techniques.explanation_quality.figures import cell_verdict

    assert cell_verdict(summary, "sensitivity", "rpv_modified") == ("worse than random", False)
    assert cell_verdict(summary, "infidelity", "rpv_modified") == ("better than random", None)
    assert cell_verdict(summary, "sensitivity", "rpv_original") == ("better than random", True)


def test_params_validation():
    from reportgen.errors import ReportgenError

    for bad in ({"images": 0}, {"radius": -0.1}, {"subset_fraction": 1.5},
                {"target": "any"}, {"road_fractions": ()}, {"road_fractions": (0.5, 1.0)},
                {"road_noise": -0.01}):
        with pytest.raises(ReportgenError):
            eq.Params(**bad)


def test_compare_page_scores_stand_beside_the_random_map():
    """reportgen.results.baselines: the faithfulness correlation and max-sensitivity of the
    model's maps, each beside the random map's value from the same summary."""
    from reportgen.results.baselines import scores

    n = 30
    rng = np.random.default_rng(1)
    nan = np.full(n, np.nan)
    row = rng.normal(0.3, 0.05, n)
    arrays = _arrays([row, row, nan, row, row - 0.3, nan], [row] * 6, [row, row, nan, row,
                                                                        row + 0.5, 0 * row],
                     [1, 1, 0, 1, 1, 1])
    summary = eq.summarize(arrays, eq.Params())
    got = {s["key"]: s for s in scores("explanation_quality", summary, None, 10)}
    assert set(got) == {"faithfulness_rpv_modified", "faithfulness_gradcam_pp",
                        "sensitivity_rpv_modified", "sensitivity_gradcam_pp",
                        "road_gap_rpv_modified", "road_gap_gradcam_pp"}
    assert got["faithfulness_gradcam_pp"]["baseline"] == summary["faithfulness_random_map"]
    assert got["sensitivity_rpv_modified"]["baseline_label"] == "random map"
    assert got["sensitivity_rpv_modified"]["interval"].value == pytest.approx(row.mean())


def test_road_verdicts_and_findings_follow_the_paired_intervals():
    """Hand-made ROAD scores of 40 images: RPV (modified) with a lower MoRF and higher LeRF score
    than both baselines (a gap above theirs), RPV (original) a MoRF score equal to theirs up to
    noise of mean zero."""
    from reportgen.results.findings import explanation_quality_findings
    from reportgen.techniques.explanation_quality.figures import cell_verdict

    rng = np.random.default_rng(3)
    n = 40
    noise = rng.normal(0, 0.01, n)
    centred = noise - noise.mean()
    nan = np.full(n, np.nan)
    base = 0.5 + noise
    morf = [0.2 + noise, base + centred[::-1], nan, nan, base, base + centred]
    lerf = [0.8 + noise, base, nan, nan, base, base]
    zeros = [np.zeros(n)] * 6
    summary = eq.summarize(_arrays(zeros, zeros, zeros, [1, 1, 0, 0, 1, 1], (morf, lerf)),
                           eq.Params())
    assert summary["road_gap_rpv_modified"] == pytest.approx(0.6, abs=1e-6)
    for baseline in ("random_map", "uniform_map"):
        base_name = baseline.split("_")[0]
        assert summary[f"verdict_road_gap_rpv_modified_{baseline}"] == \
            f"ROAD gap LeRF - MoRF above the {base_name} map's"
        assert summary[f"verdict_road_morf_rpv_modified_{baseline}"] == \
            f"ROAD MoRF score below the {base_name} map's"
        assert summary[f"verdict_road_morf_rpv_original_{baseline}"] == \
            f"ROAD MoRF score not told apart from the {base_name} map's"
    assert cell_verdict(summary, "road_morf", "rpv_modified") == ("better than both", True)
    assert cell_verdict(summary, "road_gap", "rpv_modified") == ("better than both", True)
    assert cell_verdict(summary, "road_morf", "rpv_original") == ("not told apart", None)
    text = [f.text for f in explanation_quality_findings(summary)
            if f.text.startswith(eq.numbers.LABELS["rpv_modified"])][0]
    assert "ROAD gap LeRF - MoRF above the uniform map's" in text
