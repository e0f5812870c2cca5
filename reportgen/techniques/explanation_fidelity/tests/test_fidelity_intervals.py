"""The 95% intervals of the explanation fidelity summary: the BCa bootstrap over images of
every per-method AOPC and AUC, the paired differences the findings read (own explanation vs
Grad-CAM++, each vs the random order), the agreement's mean, median and spread, and Wilson's
for the accuracy, against references computed here from the curves."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from reportgen.results import intervals as iv
from reportgen.sdk.testing import check_summary_csv
from reportgen.techniques import explanation_fidelity as ef
from reportgen.techniques.explanation_fidelity.numbers import METHODS

N, STEPS = 120, 17


def same(got, expected) -> bool:
    """Two intervals equal to float rounding (the summary resamples its scores together)."""
    return (got.n, got.method) == (expected.n, expected.method) and \
        (got.value, got.low, got.high) == pytest.approx(
            (expected.value, expected.low, expected.high), rel=1e-9, abs=1e-12)


@pytest.fixture(scope="module")
def arrays():
    """Deletion curves that fall fastest for RPV, then Grad-CAM++, then the random order."""
    rng = np.random.default_rng(6)
    speed = {"rpv_modified": 6.0, "rpv_original": 5.0, "gradcam_pp": 4.0, "random": 1.0}
    x = np.linspace(0, 1, STEPS)
    shape = (len(METHODS), N, STEPS)
    deletion, insertion = np.full(shape, np.nan), np.full(shape, np.nan)
    for m, method in enumerate(METHODS):
        if method in speed:
            rate = speed[method] * rng.uniform(0.5, 1.5, (N, 1))
            start = rng.uniform(0.6, 1.0, (N, 1))
            deletion[m] = start * np.exp(-rate * x)
            insertion[m] = start * (1 - np.exp(-rate * x))
    labels = rng.integers(0, 10, N)
    agreement = rng.uniform(-0.2, 0.8, N)
    agreement[:5] = np.nan                                   # constant maps: no correlation
    return {"deletion": deletion.astype(np.float32), "insertion": insertion.astype(np.float32),
            "grid_shape": np.array([6, 6]), "labels": labels,
            "predicted": np.where(rng.random(N) < 0.9, labels, (labels + 1) % 10),
            "builtin_method": np.int64(METHODS.index("rpv_modified")),
            "agreement": agreement.astype(np.float32),
            "agreement_original": np.full(N, np.nan, np.float32)}


def _per_image(arrays, mode, method, measure):
    curves = np.asarray(arrays[mode][METHODS.index(method)], np.float64)
    if measure == "aopc":
        return np.array([np.mean([c[0] - v for v in c]) for c in curves])
    return np.array([np.trapezoid(c, np.linspace(0, 1, len(c))) for c in curves])


def test_every_score_is_bootstrapped_and_the_differences_paired(arrays):
    summary = ef.summarize(arrays)
    own = summary["builtin_method"]
    assert own == "rpv_modified"
    values = {}
    for method in ("rpv_modified", "rpv_original", "gradcam_pp", "random"):
        for key, mode, measure in (("deletion_aopc", "deletion", "aopc"),
                                   ("deletion_auc", "deletion", "auc"),
                                   ("insertion_auc", "insertion", "auc")):
            reference = _per_image(arrays, mode, method, measure)
            got = iv.interval_of(summary, f"{key}_{method}")
            assert same(got, iv.bootstrap_mean(reference)), (key, method)
            assert got.low < got.value < got.high and got.n == N
            values[f"{key}_{method}"] = reference
    for key in ("deletion_aopc", "insertion_auc"):
        for a, b in ((own, "gradcam_pp"), (own, "random"), ("gradcam_pp", "random")):
            got = iv.difference_of(summary, f"{key}_{a}", f"{key}_{b}")
            assert same(got, iv.paired_difference(values[f"{key}_{a}"], values[f"{key}_{b}"]))
            assert got.low > 0                       # the faster curve wins on every image
    correct = arrays["predicted"] == arrays["labels"]
    ci = binomtest(int(correct.sum()), N).proportion_ci(method="wilson")
    accuracy = iv.interval_of(summary, "accuracy")
    assert (accuracy.low, accuracy.high) == pytest.approx((ci.low, ci.high))


def test_the_agreement_without_its_undefined_images(arrays):
    summary = ef.summarize(arrays)
    valid = np.asarray(arrays["agreement"], np.float64)[5:]
    assert iv.interval_of(summary, "agreement_mean") == iv.bootstrap_mean(valid)
    median = iv.interval_of(summary, "agreement_median")
    reference = iv.bootstrap_statistic(valid, np.median)      # one median per resample
    assert (median.value, median.low, median.high, median.n) == pytest.approx(
        (reference.value, reference.low, reference.high, N - 5))
    assert median.low <= np.median(valid) <= median.high
    spread = iv.interval_of(summary, "agreement_std")
    reference = iv.bootstrap_statistic(valid, np.std)
    assert (spread.value, spread.low, spread.high) == pytest.approx(
        (reference.value, reference.low, reference.high), rel=1e-6)
    assert iv.interval_of(summary, "agreement_original_mean") is None   # no original RPV
    rows = check_summary_csv(summary)
    assert rows["deletion_aopc_rpv_modified - gradcam_pp".replace(
        " - ", " - deletion_aopc_")]["method"] == iv.BOOTSTRAP


def test_the_curves_are_drawn_in_their_bootstrap_bands(arrays, monkeypatch):
    """The per-step curves: at each k, the band is the 95% BCa bootstrap interval of the
    mean score over the images (SciPy's bootstrap of that column, here), not ± a standard
    error; the caption says which."""
    from scipy.stats import bootstrap

    from reportgen.techniques.explanation_fidelity import figures

    drawn = []
    monkeypatch.setattr(figures, "band", lambda ax, x, lows, highs, colour: drawn.append(
        (np.asarray(lows), np.asarray(highs))))
    ctx = type("Ctx", (), {"model": "M", "step": "1-1", "class_names": tuple("0123456789"),
                           "description": None})()
    out = figures.render({**arrays, "fractions": np.linspace(0, 1, STEPS)}, ef.Params(), ctx)
    assert "a BCa bootstrap over the 120 images" in out[0].caption
    lows, highs = drawn[0]                        # deletion, the first method drawn
    curves = np.asarray(arrays["deletion"][METHODS.index("rpv_modified")], np.float64)
    for k in (3, 9):
        ci = bootstrap((curves[:, k],), np.mean, n_resamples=iv.RESAMPLES, method="BCa",
                       random_state=np.random.default_rng(iv.SEED)).confidence_interval
        assert (lows[k], highs[k]) == pytest.approx((ci.low, ci.high), rel=1e-6)
