"""routing_diagnostics on tiny CapsNets: coupling entropy, vote agreement against a NumPy oracle,
chunk invariance, summaries and figures (dead units: tests/test_dead_units.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from reference import capsules as oracle

from reportgen.errors import ReportgenError
from reportgen.probe.evaluation import EvalBatch
from reportgen.techniques import routing_diagnostics as rd
from reportgen.techniques.base import RenderContext

CLASS_NAMES = ("a", "b", "c")


def _evaluation(net, count=10, seed=21):
    rng = np.random.default_rng(seed)
    return EvalBatch(net, rng.random((count, 12, 12, 1), dtype=np.float32),
                     rng.integers(0, 3, count), CLASS_NAMES)


@pytest.fixture(scope="module")
def evaluation(tiny_net):
    return _evaluation(tiny_net)


@pytest.fixture(scope="module")
def result(evaluation):
    return rd.compute(evaluation, rd.Params(chunk=4, kept_images=3))


# --- entropy ------------------------------------------------------------------------------------

def test_coupling_entropy_extremes():
    uniform = np.full((2, 5, 4), 0.25)
    np.testing.assert_allclose(rd.coupling_entropy(uniform), math.log(4))
    one_hot = np.eye(4)[[0, 3, 1]]
    np.testing.assert_array_equal(rd.coupling_entropy(one_hot), 0.0)


@pytest.mark.parametrize("grouping", rd.GROUPINGS)
def test_one_routing_iteration_gives_log_classes(make_net, grouping):
    net = make_net(seed=3, class_caps={"dims": 4, "routing_iterations": 1})
    arrays = rd.compute(_evaluation(net, count=6), rd.Params(grouping=grouping, entropy_bins=20))
    log_k = math.log(3)
    assert float(arrays["entropy_max"]) == pytest.approx(log_k)
    assert float(arrays["entropy_mean"]) == pytest.approx(log_k, abs=1e-6)
    assert float(arrays["entropy_length_weighted_mean"]) == pytest.approx(log_k, abs=1e-6)
    np.testing.assert_allclose(arrays["entropy_image_mean"], log_k, atol=1e-6)
    np.testing.assert_allclose(arrays["entropy_type_mean"], log_k, atol=1e-6)
    hist = arrays["entropy_hist"]
    assert np.all(hist[:, :-1] == 0)                    # everything in the last bin
    deficit = arrays["entropy_deficit_hist"]
    assert np.all(deficit[:, 1:] == 0) and deficit.sum() == pytest.approx(hist.sum())
    assert arrays["entropy_deficit_edges"][0] == rd.DEFICIT_FLOOR
    assert arrays["entropy_deficit_edges"][-1] == pytest.approx(log_k)
    assert hist.sum() == pytest.approx(6 * 64)          # each capsule counted once in total
    summary = rd.summarize(arrays, None)
    assert summary["entropy_mean_normalized"] == pytest.approx(1.0, abs=1e-6)


def test_deficit_bins():
    log_k = math.log(10)
    edges = rd.deficit_edges(log_k, 7)
    centres = np.sqrt(edges[:-1] * edges[1:])
    assert rd.deficit_bins(centres, log_k, 7).tolist() == list(range(7))
    assert rd.deficit_bins(np.array([-1e-9, 0.0, 1e-9, log_k]), log_k, 7).tolist() == [0, 0, 0, 6]


def test_entropy_against_the_probe(evaluation, result):
    coupling = evaluation.tensors("coupling")["coupling"].astype(np.float64)
    h = -np.sum(coupling * np.log(coupling), -1)
    np.testing.assert_allclose(result["entropy_image_mean"], h.mean(1), rtol=1e-6)
    assert float(result["entropy_mean"]) == pytest.approx(h.mean(), rel=1e-6)
    owner = coupling.argmax(-1)
    for k in range(3):
        assert float(result["entropy_mean_class"][k]) == pytest.approx(h[owner == k].mean(),
                                                                        rel=1e-6)
    assert result["entropy_hist"].sum() == h.size


# --- vote agreement -----------------------------------------------------------------------------

def test_vote_equal_to_capsule_lands_in_last_bin():
    rng = np.random.default_rng(0)
    capsules = rng.normal(size=(2, 5))
    votes = np.stack([capsules, 3.0 * capsules, -capsules, np.zeros_like(capsules)], 1)
    part = rd.vote_agreement(votes, capsules, np.full((2, 4), 0.25), bins=100)
    index = rd.cosine_bins(np.array([1.0, -1.0, 0.0, 0.999, -0.999]), 100)
    assert index.tolist() == [99, 0, 50, 99, 0]
    assert part["count"][99] == 4 and part["count"][0] == 2 and part["count"][50] == 2
    assert part["per_image"].sum(1).tolist() == [4, 4]
    assert part["length"][99] == pytest.approx(4 * np.linalg.norm(capsules, axis=1).sum())
    assert part["coupling"][99] == pytest.approx(4 * 0.25)


def test_vote_agreement_against_oracle(tiny_net, evaluation, result):
    t = evaluation.tensors("primary_capsules", "class_capsules", "coupling", "lengths")
    votes = oracle.votes(t["primary_capsules"], tiny_net.class_caps.kernel.numpy())  # (B,N,K,D)
    labels = evaluation.labels
    lengths = t["lengths"].copy()
    lengths[np.arange(len(labels)), labels] = -1
    for role, cls in enumerate((labels, lengths.argmax(1))):
        count = np.zeros(100)
        for b, j in enumerate(cls):
            v = t["class_capsules"][b, j].astype(np.float64)
            u = votes[b, :, j]
            with np.errstate(invalid="ignore", divide="ignore"):   # zero votes: cosine 0
                cos = np.nan_to_num(u @ v / (np.linalg.norm(u, axis=1) * np.linalg.norm(v)))
            np.add.at(count, np.minimum(((cos + 1) * 50).astype(int), 99), 1)
        np.testing.assert_array_equal(result["agreement_count"][role], count)
    shares = result["agreement_share"]
    np.testing.assert_allclose(shares.sum(1), 1.0)
    np.testing.assert_allclose(result["agreement_image_share"].sum(-1), 1.0)
    assert result["agreement_edges"][0] == -1 and result["agreement_edges"][-1] == 1


def test_kept_image_histogram_equals_that_image_alone(tiny_net, evaluation, result):
    single = EvalBatch(tiny_net, evaluation.images[1:2], evaluation.labels[1:2], CLASS_NAMES)
    alone = rd.compute(single, rd.Params(kept_images=0))
    np.testing.assert_allclose(result["agreement_image_share"][1], alone["agreement_share"],
                               atol=1e-12)
    assert alone["agreement_image_share"].shape == (0, 2, 100)


def test_chunk_size_does_not_change_results(evaluation, result):
    other = rd.compute(evaluation, rd.Params(chunk=50, kept_images=3))
    assert other.keys() == result.keys()
    for key in result:
        np.testing.assert_allclose(other[key], result[key], rtol=1e-6, atol=1e-9,
                                   equal_nan=True, err_msg=key)


# --- options, summary, figures ------------------------------------------------------------------

def test_params_validation():
    hash(rd.Params())
    assert rd.variants(None) == [rd.Params()]
    with pytest.raises(ReportgenError):
        rd.Params(grouping="mean")
    with pytest.raises(ReportgenError):
        rd.Params(chunk=0)
    with pytest.raises(ReportgenError):
        rd.Params(kept_images=-1)


def test_summary_and_figures(evaluation, result):
    summary = rd.summarize(result, None)
    json.dumps(summary, allow_nan=False)
    assert summary["images"] == 10 and summary["entropy_max"] == pytest.approx(math.log(3))
    weighted = rd.compute(evaluation, rd.Params(grouping="weighted", kept_images=0))
    assert weighted["entropy_hist"].sum() == pytest.approx(result["entropy_hist"].sum())
    technique = rd.TECHNIQUE
    assert (technique.name, technique.scope, technique.layer) == ("routing_diagnostics",
                                                                  "dataset", "class")
    ctx = RenderContext(model="tiny", step="1-10", class_names=CLASS_NAMES)
    figures = technique.render(result, rd.Params(), ctx)
    names = [f.name for f in figures]
    assert names == ["entropy.png", "entropy.svg", "entropy.pdf", "vote_agreement.png",
                     "vote_agreement.svg", "vote_agreement.pdf", "vote_agreement_images.png",
                     "vote_agreement_images.svg", "vote_agreement_images.pdf"]
    assert all(f.caption and f.width > 0 for f in figures)
    assert "argmax" in figures[0].caption and "100 equal bins" in figures[3].caption
    assert "weight" in technique.render(weighted, rd.Params(grouping="weighted"), ctx)[0].caption
    assert technique.render_trend([("1-10", summary)], None, ctx) == []
    assert technique.render_compare([("A", summary)], None, ctx) == []
    trend = technique.render_trend([("1-10", summary), ("2-10", summary)], None, ctx)
    compare = technique.render_compare([("A", summary), ("B", summary)], None, ctx)
    assert [f.kind for f in trend + compare] == ["png", "svg", "pdf", "png", "svg", "pdf"]
