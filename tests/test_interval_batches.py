"""The vectorised bootstraps the summaries use (reportgen/results/intervals.py) give what
scipy.stats.bootstrap gives one score at a time: bootstrap_means the intervals of
bootstrap_mean per column, bootstrap_of_means / bootstrap_ratio those of bootstrap_statistic of
the written-out statistic, bootstrap_median that of the median; and a pooled ratio's interval
covers its true value."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.results import intervals as iv


def _close(got, expected):
    assert (got.n, got.method) == (expected.n, expected.method)
    assert (got.value, got.low, got.high) == pytest.approx(
        (expected.value, expected.low, expected.high), rel=1e-9, abs=1e-12)


def test_columns_resampled_together_equal_one_at_a_time():
    rng = np.random.default_rng(0)
    columns = np.column_stack([rng.normal(size=300), rng.random(300) < 0.9,
                               rng.integers(0, 4, 300) / 3, np.full(300, 0.3),
                               rng.exponential(size=300)])
    for got, column in zip(iv.bootstrap_means(columns), columns.T):
        _close(got, iv.bootstrap_mean(column))
    assert iv.bootstrap_means(columns)[3].low == iv.bootstrap_means(columns)[3].high


def test_a_function_of_means_equals_scipys_bootstrap_of_the_statistic():
    rng = np.random.default_rng(1)
    weight = rng.random(400)
    top = weight * rng.random(400)
    reference = iv.bootstrap_statistic(np.stack([top, weight], 1),
                                       lambda rows: rows[:, 0].sum() / rows[:, 1].sum())
    _close(iv.bootstrap_ratio(top, weight), reference)
    # K ratios on the same images: each as alone
    tops, weights = rng.random((400, 3)) * weight[:, None], np.repeat(weight[:, None], 3, 1)
    for k, got in enumerate(iv.bootstrap_ratio(tops, weights)):
        _close(got, iv.bootstrap_statistic(np.stack([tops[:, k], weight], 1),
                                           lambda rows: rows[:, 0].sum() / rows[:, 1].sum()))
    values = rng.normal(size=200)
    spread = iv.bootstrap_of_means(np.stack([values, values ** 2], 1),
                                   lambda m: np.sqrt(m[..., 1] - m[..., 0] ** 2))
    _close(spread, iv.bootstrap_statistic(values, np.std))


def test_the_median_equals_scipys_median_one_resample_at_a_time():
    values = np.random.default_rng(2).exponential(size=150)
    _close(iv.bootstrap_median(values), iv.bootstrap_statistic(values, np.median))
    assert iv.bootstrap_median([1.0, np.nan, 1.0]).n == 2


def test_a_pooled_ratio_covers_its_true_value():
    """sum(h w) / sum(w) with h ~ U(0, 1) independent of w: true value 0.5; the nominal 95%
    interval covers it in >= 93% of seeded draws of 200 images."""
    rng = np.random.default_rng(5)
    hits = 0
    for seed in range(300):
        weight = rng.exponential(size=200)
        got = iv.bootstrap_ratio(weight * rng.random(200), weight, resamples=999, seed=seed)
        hits += got.low <= 0.5 <= got.high
    assert hits / 300 >= 0.93
