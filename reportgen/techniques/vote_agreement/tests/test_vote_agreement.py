"""vote_agreement on tiny CapsNets: against a NumPy oracle and against the one
routing_diagnostics technique it was split from (tests/reference/routing_diagnostics_v1.py),
chunk invariance, summaries and figures."""

from __future__ import annotations

import json

import numpy as np
import pytest
from reference import capsules as oracle
from reference import routing_diagnostics_v1 as v1

from reportgen.errors import ReportgenError
from reportgen.probe.evaluation import EvalBatch
from reportgen.techniques import vote_agreement as rd
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


def test_the_numbers_of_the_technique_it_was_split_from(tiny_net, evaluation, result):
    view = evaluation.restricted(rd.TECHNIQUE.needs_for(None, tiny_net), "vote_agreement")
    new = rd.compute(view, rd.Params(chunk=4, kept_images=3))
    old = v1.compute(evaluation, v1.Params(chunk=4, kept_images=3))
    agreement = [k for k in old if k.startswith("agreement_")]
    per_image = {"agreement_image_cos", "agreement_image_cos_coupling",
                 "agreement_image_coupling"}                 # added for the intervals
    assert len(agreement) == 9 and set(new) == {*agreement, *per_image, "images"}
    # The votes now come from the network's `votes` (its own forward to the primary capsules,
    # not the probe's compiled pass): the same votes to float rounding, the same bins.
    for key in agreement:
        if key in ("agreement_count", "agreement_share", "agreement_image_share",
                   "agreement_edges", "agreement_image_index"):
            np.testing.assert_array_equal(new[key], old[key], err_msg=key)
        else:
            np.testing.assert_allclose(new[key], old[key], rtol=1e-6, atol=1e-9, err_msg=key)
    summary, before = rd.summarize(new), v1.summarize(old)
    for key, value in summary.items():
        if key != "intervals":               # the intervals are new
            assert value == pytest.approx(before[key], rel=1e-6, abs=1e-9), key


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
    t = evaluation.tensors("primary_capsules", "class_capsules", "routing:primary_caps",
                           "lengths")
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
    with pytest.raises(ReportgenError):
        rd.Params(chunk=0)
    with pytest.raises(ReportgenError):
        rd.Params(kept_images=-1)


@pytest.mark.slow
def test_summary_and_figures(tiny_net, evaluation, result):
    summary = rd.summarize(result, None)
    json.dumps(summary, allow_nan=False)
    assert summary["images"] == 10
    technique = rd.TECHNIQUE
    assert (technique.name, technique.scope, technique.layer) == ("vote_agreement",
                                                                  "dataset", "class")
    ctx = RenderContext(model="tiny", step="1-10", class_names=CLASS_NAMES)
    figures = technique.render(result, rd.Params(), ctx)
    names = [f.name for f in figures]
    assert names == ["vote_agreement.png", "vote_agreement.svg", "vote_agreement.pdf",
                     "vote_agreement_images.png", "vote_agreement_images.svg",
                     "vote_agreement_images.pdf"]
    assert all(f.caption and f.width > 0 for f in figures)
    assert "100 equal bins" in figures[0].caption
    assert technique.render_trend([("1-10", summary)], None, ctx) == []
    assert technique.render_compare([("A", summary)], None, ctx) == []
    trend = technique.render_trend([("1-10", summary), ("2-10", summary)], None, ctx)
    compare = technique.render_compare([("A", summary), ("B", summary)], None, ctx)
    assert [f.kind for f in trend + compare] == ["png", "svg", "pdf", "png", "svg", "pdf"]


def test_applies_where_the_family_declares_votes(tiny_net):
    from em_fixture import build_tiny_em

    from reportgen.engine.model import not_applicable_reason

    assert rd.TECHNIQUE.applicable(tiny_net)
    em = build_tiny_em(seed=3)
    assert not_applicable_reason(rd.TECHNIQUE.missing_features(em)) == \
        "it has no votes of its capsules that a technique can read"


def test_the_intervals_over_images_against_the_oracle(tiny_net, evaluation, result):
    """Each image's mean cosine and its coupling-weighted parts, computed here from the oracle's
    votes: the mean cosines' BCa bootstrap, the weighted ones' bootstrap of the pooled ratio."""
    from reportgen.results import intervals as iv
    from reportgen.sdk.testing import check_summary_csv

    t = evaluation.tensors("primary_capsules", "class_capsules", "routing:primary_caps",
                           "lengths")
    votes = oracle.votes(t["primary_capsules"], tiny_net.class_caps.kernel.numpy())
    labels = evaluation.labels
    lengths = t["lengths"].copy()
    lengths[np.arange(len(labels)), labels] = -1
    summary = rd.summarize(result)
    for role, cls in zip(("true", "wrong"), (labels, lengths.argmax(1))):
        means, weighted, weights = [], [], []
        for b, j in enumerate(cls):
            v = t["class_capsules"][b, j].astype(np.float64)
            u = votes[b, :, j]
            c = t["routing:primary_caps"][b, :, j].astype(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                cos = np.nan_to_num(u @ v / (np.linalg.norm(u, axis=1) * np.linalg.norm(v)))
            means.append(cos.mean())
            weighted.append((c * cos).sum())
            weights.append(c.sum())
        got = iv.interval_of(summary, f"agreement_{role}_mean_cos")
        reference = iv.bootstrap_mean(means)
        assert (got.value, got.low, got.high) == pytest.approx(
            (reference.value, reference.low, reference.high), rel=1e-4, abs=1e-6)
        got = iv.interval_of(summary, f"agreement_{role}_coupling_weighted_cos")
        reference = iv.bootstrap_statistic(np.stack([weighted, weights], 1),
                                           lambda rows: rows[:, 0].sum() / rows[:, 1].sum())
        assert (got.value, got.low, got.high) == pytest.approx(
            (reference.value, reference.low, reference.high), rel=1e-4, abs=1e-6)
        assert got.method == iv.BOOTSTRAP_STATISTIC and got.n == len(labels)
    check_summary_csv(summary)
