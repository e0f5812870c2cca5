"""capsule_semantics: the compactness score's extremes, variance and σ-perturbation against
direct decoder calls, compactness against transform-then-forward, chunk invariance, no-decoder
models, summaries and figures."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from reportgen.errors import ReportgenError
from reportgen.probe.affine import FACTORS, factor_batch
from reportgen.probe.evaluation import EvalBatch
from reportgen.techniques import capsule_semantics as cs
from reportgen.techniques.capsule_semantics.numbers import dimension_shares
from reportgen.techniques.base import RenderContext

CLASS_NAMES = ("a", "b", "c")
SMALL = dict(images=6, steps=3, chunk=7)


def _evaluation(net, count=12, seed=31):
    rng = np.random.default_rng(seed)
    return EvalBatch(net, rng.random((count, 12, 12, 1), dtype=np.float32),
                     np.arange(count) % 3, CLASS_NAMES)


@pytest.fixture(scope="module")
def evaluation(tiny_net):
    return _evaluation(tiny_net)


@pytest.fixture(scope="module")
def result(evaluation):
    return cs.compute(evaluation, cs.Params(**SMALL))


# --- the score ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dims", [4, 16])
def test_one_varying_dimension_is_maximal(dims):
    rng = np.random.default_rng(0)
    vectors = np.tile(rng.normal(size=(3, 1, dims)), (1, 11, 1))
    vectors[:, :, 2] += np.linspace(-1, 1, 11)                  # only dimension 2 moves
    np.testing.assert_allclose(cs.compactness_scores(vectors), math.log(dims), rtol=1e-12)


def test_isotropic_noise_is_near_zero_and_constant_is_undefined():
    rng = np.random.default_rng(1)
    scores = cs.compactness_scores(rng.normal(size=(5, 4000, 16)))
    assert np.all(scores >= 0) and np.all(scores < 0.01)
    two_equal = np.zeros((1, 4, 4))
    two_equal[0, :, :2] = [[1, 1], [-1, -1], [1, -1], [-1, 1]]   # equal variance in 2 of 4
    assert cs.compactness_scores(two_equal)[0] == pytest.approx(math.log(2))
    assert np.isnan(cs.compactness_scores(np.ones((1, 5, 4)))[0])


# --- the analysis -------------------------------------------------------------------------------

def test_variance_and_representatives(evaluation, result):
    t = evaluation.tensors("class_capsules", "lengths")
    predicted = t["lengths"].argmax(1)
    chosen = t["class_capsules"][np.arange(12), predicted].astype(np.float64)
    np.testing.assert_allclose(result["dim_variance"], chosen.var(0), rtol=1e-6)
    assert result["predicted_counts"].sum() == 12
    for k in range(3):
        if (predicted == k).sum() >= 2:
            np.testing.assert_allclose(result["class_dim_variance"][k],
                                       chosen[predicted == k].var(0), rtol=1e-6)
        else:
            assert np.all(np.isnan(result["class_dim_variance"][k]))
    reps, labels = result["representative_index"], evaluation.labels
    assert labels[reps].tolist() == [0, 1, 2]                    # one per class, in order
    for r, k in zip(reps, labels[reps]):
        correct = np.flatnonzero((labels == k) & (predicted == k))
        if len(correct):
            assert r == correct[np.argmax(t["lengths"][correct, k])]


def test_perturbation_against_direct_decoder_calls(tiny_net, evaluation, result):
    t = evaluation.tensors("class_capsules", "lengths")
    images, sigma = result["perturbation_images"], result["perturbation_sigma"]
    multiples = result["perturbation_multiples"]
    assert images.shape == (3, 4, 11, 12, 12, 1)
    np.testing.assert_allclose(multiples, np.linspace(-2, 2, 11))
    for r, (index, target) in enumerate(zip(result["representative_index"],
                                            result["representative_class"])):
        for d, s in ((0, 0), (3, 10), (1, 5)):
            capsules = t["class_capsules"][index].astype(np.float64).copy()
            capsules[target, d] += multiples[s] * sigma[r, d]
            masked = np.zeros_like(capsules)
            masked[target] = capsules[target]
            expected = np.asarray(tiny_net.decoder(masked.reshape(1, -1).astype(np.float32),
                                                   training=False))[0]
            np.testing.assert_allclose(images[r, d, s], expected, atol=1e-5)
    # per-class σ where a class has >= 2 predicted images, else pooled
    counts = result["predicted_counts"]
    for r, target in enumerate(result["representative_class"]):
        expected = np.sqrt(result["class_dim_variance"][target]) if counts[target] >= 2 \
            else np.sqrt(result["dim_variance"])
        np.testing.assert_allclose(sigma[r], expected, rtol=1e-6)


def test_compactness_against_transform_then_forward(tiny_net, evaluation, result):
    index = result["compactness_index"]
    assert len(index) == 6 and sorted(np.bincount(evaluation.labels[index])) == [2, 2, 2]
    images, truth = evaluation.images[index], evaluation.labels[index]
    grids = cs.Params(**SMALL).grids()
    np.testing.assert_allclose(result["factor_values"], np.stack(list(grids.values())))
    np.testing.assert_allclose(result["factor_values"][0], [-30, 0, 30])
    for f, factor in enumerate(FACTORS):
        vectors = []
        for value in grids[factor]:
            out = tiny_net.model(factor_batch(images, factor, value), training=False)
            vectors.append(np.asarray(out["class_capsules"])[np.arange(6), truth])
        expected = cs.compactness_scores(np.stack(vectors, 1))
        np.testing.assert_allclose(result["compactness_per_image"][f], expected, rtol=1e-4)
        assert result["compactness"][f] == pytest.approx(np.nanmean(expected), rel=1e-4)
        # each image's shares, which the pooled score's interval resamples
        np.testing.assert_allclose(result["compactness_image_share"][f],
                                   dimension_shares(np.stack(vectors, 1)), rtol=1e-4,
                                   atol=1e-7)
    np.testing.assert_allclose(np.nansum(result["compactness_dim_share"], 1), 1.0, rtol=1e-6)


def test_chunk_size_does_not_change_results(evaluation, result):
    other = cs.compute(evaluation, cs.Params(images=6, steps=3, chunk=500))
    assert other.keys() == result.keys()
    for key in result:
        np.testing.assert_allclose(other[key], result[key], rtol=1e-4, atol=1e-7,
                                   equal_nan=True, err_msg=key)


@pytest.mark.slow
def test_model_without_decoder_skips_perturbation(make_net):
    net = make_net(seed=2, decoder={"enabled": False})
    arrays = cs.compute(_evaluation(net, count=6), cs.Params(images=3, steps=2,
                                                             representatives="first"))
    assert "perturbation_images" not in arrays
    assert arrays["dim_variance"].shape == (4,) and arrays["compactness"].shape == (6,)
    json.dumps(cs.summarize(arrays, None), allow_nan=False)
    ctx = RenderContext(model="plain", step="1-1", class_names=CLASS_NAMES)
    assert [f.name for f in cs.TECHNIQUE.render(arrays, None, ctx)] == [
        "dimension_variance.png", "dimension_variance.svg", "dimension_variance.pdf",
        "compactness.png", "compactness.svg", "compactness.pdf"]


def test_first_images_and_pooled_sigma(evaluation):
    arrays = cs.compute(evaluation, cs.Params(representatives="first", first_images=2,
                                              sigma="pooled", sigmas=1.0,
                                              perturbation_steps=3, images=3, steps=2))
    assert arrays["representative_index"].tolist() == [0, 1]
    np.testing.assert_allclose(arrays["perturbation_sigma"],
                               np.tile(np.sqrt(arrays["dim_variance"]), (2, 1)), rtol=1e-6)
    np.testing.assert_allclose(arrays["perturbation_multiples"], [-1, 0, 1])


def test_params_validation():
    hash(cs.Params())
    assert cs.Params(rotation_range=[-10, 10]).rotation_range == (-10.0, 10.0)
    grids = cs.Params().grids()
    assert list(grids) == list(FACTORS) and all(len(v) == 11 for v in grids.values())
    assert grids["scale"][0] == pytest.approx(0.8) and grids["translation_y"][-1] == 3
    for bad in (dict(sigma="median"), dict(representatives="all"), dict(images=0),
                dict(scale_range=(0.0, 1.0)), dict(shear_range=(0.3, -0.3)),
                dict(rotation_range=(1,))):
        with pytest.raises(ReportgenError):
            cs.Params(**bad)


@pytest.mark.slow
def test_summary_and_figures(result):
    summary = cs.summarize(result, None)
    json.dumps(summary, allow_nan=False)
    assert summary["dims"] == 4 and summary["images"] == 12
    assert 1 <= summary["effective_dims"] <= 4
    assert [f"compactness_{f}" in summary for f in FACTORS] == [True] * 6
    technique = cs.TECHNIQUE
    assert (technique.name, technique.scope, technique.layer) == ("capsule_semantics",
                                                                  "dataset", "class")
    ctx = RenderContext(model="tiny", step="1-10", class_names=CLASS_NAMES)
    figures = technique.render(result, cs.Params(**SMALL), ctx)
    names = [f.name for f in figures]
    assert names[:6] == ["dimension_variance.png", "dimension_variance.svg",
                         "dimension_variance.pdf", "compactness.png", "compactness.svg",
                         "compactness.pdf"]
    assert names[6:] == ["perturbation_0.png", "perturbation_1.png", "perturbation_2.png"]
    assert "0.0031" in figures[3].caption and "not our result" in figures[3].caption
    assert "σ" in figures[6].caption
    assert technique.render_trend([("1-10", summary)], None, ctx) == []
    trend = technique.render_trend([("1-10", summary), ("2-10", summary)], None, ctx)
    compare = technique.render_compare([("A", summary), ("B", summary)], None, ctx)
    assert [f.kind for f in trend + compare] == ["png", "svg", "pdf", "png", "svg", "pdf"]
