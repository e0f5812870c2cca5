"""The intervals every score carries (reportgen/results/intervals.py): Wilson's equals the
values Newcombe (1998) tabulates, each method covers the true value in at least 93% of seeded
simulated draws at a nominal 95%, and the words that compare a score with its reference follow
the interval."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.results import intervals as iv


@pytest.mark.parametrize("successes, n, low, high", [
    # Newcombe 1998, "Two-sided confidence intervals for the single proportion", Table I,
    # method 3 (Wilson score interval without continuity correction)
    (81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718)])
def test_wilson_equals_newcombes_table(successes, n, low, high):
    got = iv.wilson(successes, n)
    assert (round(got.low, 4), round(got.high, 4)) == (low, high)
    assert got.value == successes / n and got.n == n and got.method == "Wilson"


def test_wilson_at_the_ends_and_refusals():
    assert (iv.wilson(0, 50).low, iv.wilson(50, 50).high) == (0.0, 1.0)
    assert iv.proportion([True, False, True, False, True]) == iv.proportion_interval(3, 5)
    for bad in ((1, 0), (-1, 5), (6, 5)):
        with pytest.raises(ValueError):
            iv.wilson(*bad)


@pytest.mark.parametrize("p", [0.02, 0.1, 0.5, 0.9, 0.97])
@pytest.mark.parametrize("n", [50, 1000])
def test_the_proportion_interval_covers_the_true_proportion(p, n):
    draws = np.random.default_rng(11).binomial(n, p, size=4000)
    covered = np.mean([not iv.proportion_interval(int(k), n).excludes(p) for k in draws])
    assert covered >= 0.93, covered


def test_near_0_and_1_the_modification_restores_coverage():
    """Plain Wilson covers a true 1% over 50 images in only ~92% of draws (Brown, Cai &
    DasGupta 2001, Fig. 4): its lower end at 2 of 50 lies above 1%."""
    draws = np.random.default_rng(11).binomial(50, 0.01, size=4000)
    plain = np.mean([not iv.wilson(int(k), 50).excludes(0.01) for k in draws])
    modified = np.mean([not iv.proportion_interval(int(k), 50).excludes(0.01) for k in draws])
    assert plain < 0.93 <= modified
    assert iv.proportion_interval(2, 50).low < 0.01 < iv.wilson(2, 50).low
    assert iv.proportion_interval(25, 50) == iv.wilson(25, 50)       # away from the ends
    mirrored = iv.proportion_interval(48, 50)
    assert mirrored.high == pytest.approx(1 - iv.proportion_interval(2, 50).low)


@pytest.mark.parametrize("name, draw, mean", [
    ("normal", lambda rng, n: rng.normal(0.4, 0.2, n), 0.4),
    ("exponential", lambda rng, n: rng.exponential(0.3, n), 0.3),       # skewed, as AOPCs are
    ("uniform", lambda rng, n: rng.uniform(0, 1, n), 0.5)])
def test_the_bootstrap_covers_the_true_mean(name, draw, mean):
    rng = np.random.default_rng(5)
    covered = np.mean([not iv.bootstrap_mean(draw(rng, 50), resamples=999, seed=s).excludes(mean)
                       for s in range(600)])
    assert covered >= 0.93, (name, covered)


def test_the_bootstrap_is_seeded_and_paired():
    values = np.random.default_rng(2).normal(0.5, 0.1, 200)
    a, b = iv.bootstrap_mean(values), iv.bootstrap_mean(values)
    assert a == b and a.value == pytest.approx(values.mean()) and a.low < a.value < a.high
    assert a.method == iv.BOOTSTRAP and a.n == 200
    # a constant difference: the interval is that point; one score per image each, or refused
    shifted = iv.paired_difference(values + 0.25, values)
    assert shifted.low == pytest.approx(0.25) and shifted.high == pytest.approx(0.25)
    with pytest.raises(ValueError):
        iv.paired_difference(values, values[:-1])
    # pairing removes what the images share: the paired interval of a small true difference
    # excludes 0 where the two separate intervals overlap
    rng = np.random.default_rng(3)
    image_effect = rng.normal(0, 1.0, 300)
    a, b = image_effect + 0.05 + rng.normal(0, 0.05, 300), image_effect
    assert iv.paired_difference(a, b).above(0)
    separate_a, separate_b = iv.bootstrap_mean(a), iv.bootstrap_mean(b)
    assert separate_a.low < separate_b.high
    # NaN images (a score a technique could not compute on them) are left out, and counted so
    assert iv.bootstrap_mean([0.1, np.nan, 0.3, 0.2]).n == 3


def test_images_needed_tells_the_score_from_its_reference():
    # 0.6 against chance 0.5: at the images needed the interval excludes 0.5, at a quarter not
    needed = iv.images_needed(0.6, 0.5)
    assert not iv.wilson(round(0.6 * needed), needed).excludes(0.5) or needed > 0
    assert iv.wilson(round(0.6 * 4 * needed), 4 * needed).excludes(0.5)
    assert not iv.wilson(round(0.6 * needed // 4), needed // 4).excludes(0.5)
    assert iv.images_needed(0.5, 0.5) is None


def test_the_words_of_an_interval():
    assert iv.percent(iv.wilson(940, 1000)) == "94.0% (95% CI 92.4–95.3%)"
    assert iv.number(iv.Interval(-0.0001, -0.0204, 0.0199, 50, iv.BOOTSTRAP)) == \
        "0.000 (95% CI -0.020–0.020)"


@pytest.mark.parametrize("n", [20, 50, 200, 1000])
def test_exact_coverage_over_every_true_proportion(n):
    """Coverage computed exactly from the binomial law over a grid of 999 true proportions:
    95% on average, and nowhere below 92.5% (Wilson's oscillations, Brown, Cai & DasGupta
    2001, Fig. 5, and no collapse near 0 or 1)."""
    from scipy.stats import binom

    counts = np.arange(n + 1)
    ends = np.array([(i.low, i.high) for i in (iv.proportion_interval(int(k), n)
                                               for k in counts)])
    truths = np.linspace(0.001, 0.999, 999)
    coverage = np.array([binom.pmf(counts, n, p)[(ends[:, 0] <= p) & (p <= ends[:, 1])].sum()
                         for p in truths])
    assert coverage.mean() >= 0.949 and coverage.min() >= 0.925, (coverage.mean(),
                                                                  coverage.min())


def test_the_bootstrap_of_a_whole_statistic_covers_its_true_value():
    """A score that is not a mean over images (the variance of the per-image values): its
    nominal 95% interval covers the true variance (1 for a standard normal) in >= 93% of
    seeded draws of 300 images."""
    rng = np.random.default_rng(7)
    hits = 0
    draws = 120
    for _ in range(draws):
        got = iv.bootstrap_statistic(rng.normal(size=300), np.var, resamples=400)
        hits += got.low <= 1.0 <= got.high
        assert got.method == iv.BOOTSTRAP_STATISTIC and got.n == 300
    assert hits / draws >= 0.93


def test_a_summary_carries_its_intervals_beside_its_scores():
    summary = {}
    iv.attach(summary, "accuracy", iv.proportion([True, True, False, True]))
    iv.attach(summary, "curve", [iv.proportion([True, False]), iv.proportion([True, True])])
    # the scores stay where readers that know nothing of intervals read them
    assert summary["accuracy"] == 0.75 and summary["curve"] == [0.5, 1.0]
    assert iv.interval_of(summary, "accuracy") == iv.proportion_interval(3, 4)
    assert iv.interval_of(summary, "curve", 1) == iv.proportion_interval(2, 2)
    assert iv.interval_of(summary, "missing") is None and iv.interval_of({}, "accuracy") is None
    a, b = np.arange(20.0), np.arange(20.0)[::-1]
    iv.attach_difference(summary, "a", "b", iv.paired_difference(a, b))
    got = iv.difference_of(summary, "a", "b")
    assert got == iv.paired_difference(a, b) and got.value == pytest.approx(0.0)
    assert iv.difference_of(summary, "b", "a") is None
