"""95% intervals of the scores a site shows, and the words that compare a score with its
reference (chance, a baseline, the untrained step) by them.

- A proportion over n images (an accuracy, a success rate): the Wilson score interval (Wilson
  1927; recommended over the Wald interval by Newcombe 1998 and by Brown, Cai & DasGupta 2001),
  with Brown et al.'s modification near 0 and 1 (`proportion_interval`).
- Any other score that is a mean over images (AOPC, IoU, an agreement, an entropy): the
  bias-corrected and accelerated (BCa) bootstrap over the images (Efron 1987; scipy.stats
  .bootstrap), seeded so that a rebuild gives the same interval; a difference of two scores on
  the same images is bootstrapped paired (the images resampled together).
- A score pooled over images that is no mean of theirs (a ratio of sums, the KL of mean
  shares, a median): the BCa bootstrap of the whole statistic (`bootstrap_statistic`; its
  vectorised forms `bootstrap_of_means`, `bootstrap_ratio`, `bootstrap_median`). Several
  means on the same images share one set of draws (`bootstrap_means`); a score of weighted
  images that no mean gives (a principal component's share of variance) is
  `bootstrap_weighted`.

No TensorFlow here; NumPy and SciPy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000           # bootstrap resamples: the interval's ends move < 0.1 point between seeds
SEED = 0
WILSON = "Wilson"
BOOTSTRAP = "BCa bootstrap over images"
BOOTSTRAP_STATISTIC = "BCa bootstrap over images (of the whole statistic)"


@dataclass(frozen=True)
class Interval:
    """A score with its interval: `value` in [`low`, `high`] over `n` images by `method`."""

    value: float
    low: float
    high: float
    n: int
    method: str
    confidence: float = CONFIDENCE

    def excludes(self, reference: float) -> bool:
        """Whether the reference lies outside the interval (the score can be told from it)."""
        return not (self.low <= reference <= self.high)

    def above(self, reference: float) -> bool:
        return self.low > reference

    def below(self, reference: float) -> bool:
        return self.high < reference

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def as_dict(self) -> dict:
        """The interval as a summary's entries (the CSV's interval columns)."""
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n,
                "method": self.method, "confidence": self.confidence}


def _z(confidence: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + confidence / 2))


def wilson(successes: int, n: int, confidence: float = CONFIDENCE) -> Interval:
    """The Wilson score interval of successes / n:
    (p + z²/2n ± z sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n), p = successes / n."""
    if n <= 0:
        raise ValueError("a proportion needs at least one image")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must lie in 0…{n}, got {successes}")
    z = _z(confidence)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # the ends are exact at p = 0 and p = 1 (rounding would leave 1e-17 outside)
    low = 0.0 if successes == 0 else max(0.0, centre - spread)
    high = 1.0 if successes == n else min(1.0, centre + spread)
    return Interval(p, low, high, n, WILSON, confidence)


def proportion_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> Interval:
    """The interval every proportion of the site carries: Wilson's, with Brown, Cai &
    DasGupta's (2001, section 4.1.1) modification where Wilson under-covers, a count within
    x* = 3 of 0 or of n: that end replaced by the one-sided Poisson bound
    chi2_{2x}(1 - confidence) / 2n (the same, mirrored, at n - x). Brown et al. take x* = 2
    up to n = 50; there a true 2% over 50 images is still covered in only 92.9% of draws, so
    x* = 3 throughout. Exact coverage at 95%: 95% on average over the true proportions and at
    least 92.5% at any (n = 20 … 1,000), where plain Wilson drops to 92% for a true 1% over
    50 images."""
    got = wilson(successes, n, confidence)
    from scipy.stats import chi2

    near = 3
    low, high = got.low, got.high
    if 1 <= successes <= near:
        low = 0.5 * float(chi2.ppf(1 - confidence, 2 * successes)) / n
    if 1 <= n - successes <= near:
        high = 1 - 0.5 * float(chi2.ppf(1 - confidence, 2 * (n - successes))) / n
    return Interval(got.value, low, high, n, WILSON, confidence)


def proportion(correct, confidence: float = CONFIDENCE) -> Interval:
    """The interval (`proportion_interval`) of the share of True among per-image outcomes
    `correct` (N,)."""
    correct = np.asarray(correct, bool).reshape(-1)
    return proportion_interval(int(correct.sum()), int(correct.size), confidence)


def bootstrap_mean(values, confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                   seed: int = SEED) -> Interval:
    """The mean of per-image `values` (N,) with its BCa bootstrap interval over the images."""
    values = np.asarray(values, np.float64).reshape(-1)
    values = values[np.isfinite(values)]
    if values.size == 0:
        raise ValueError("a mean needs at least one finite value")
    mean = float(values.mean())
    if values.size < 2 or _constant(values):       # no spread to resample: the interval is a point
        return Interval(mean, mean, mean, int(values.size), BOOTSTRAP, confidence)
    low, high = _bca(values, confidence, resamples, seed)
    return Interval(mean, low, high, int(values.size), BOOTSTRAP, confidence)


def bootstrap_statistic(values, statistic, confidence: float = CONFIDENCE,
                        resamples: int = RESAMPLES, seed: int = SEED) -> Interval:
    """`statistic(values)` of per-image rows `values` (N, ...) — a score that is not a plain
    mean over images (a KL of pooled shares of variance) — with its BCa bootstrap interval
    over the images (rows resampled together; `statistic` takes an (n, ...) array)."""
    from scipy.stats import bootstrap

    import warnings

    values = np.asarray(values, np.float64)
    value = float(statistic(values))
    n = int(values.shape[0])
    if n < 2:
        return Interval(value, value, value, n, BOOTSTRAP_STATISTIC, confidence)

    def of_rows(index):
        return statistic(values[np.asarray(index, np.int64)])

    low = high = value
    for method in ("BCa", "percentile"):            # BCa degenerates on a few-valued sample
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            result = bootstrap((np.arange(n),), of_rows, confidence_level=confidence,
                               n_resamples=resamples, method=method, vectorized=False,
                               random_state=np.random.default_rng(seed))
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            break
    if not (math.isfinite(low) and math.isfinite(high)):
        low = high = value
    return Interval(value, low, high, n, BOOTSTRAP_STATISTIC, confidence)


def bootstrap_median(values, confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                     seed: int = SEED) -> Interval:
    """The median of per-image `values` (N,) with its BCa bootstrap interval over the images
    (scipy.stats.bootstrap of np.median, vectorised: `bootstrap_statistic` of it calls the
    median once per resample)."""
    values = np.asarray(values, np.float64).reshape(-1)
    values = values[np.isfinite(values)]
    if values.size == 0:
        raise ValueError("a median needs at least one finite value")
    value = float(np.median(values))
    if values.size < 2 or _constant(values):
        return Interval(value, value, value, int(values.size), BOOTSTRAP_STATISTIC, confidence)
    low, high = _bca(values, confidence, resamples, seed, np.median)
    if not (math.isfinite(low) and math.isfinite(high)):
        low = high = value
    return Interval(value, low, high, int(values.size), BOOTSTRAP_STATISTIC, confidence)


def bootstrap_means(columns, confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                    seed: int = SEED) -> list[Interval]:
    """`bootstrap_mean` of each column of per-image `columns` (N, K) — K scores on the same
    images, or paired differences as columns a - b — from one set of draws: the same
    intervals as K calls of it (the same draws and resample means as scipy's) at a fraction
    of the cost. Images with a non-finite value in any column are left out of all."""
    columns = np.asarray(columns, np.float64)
    columns = columns.reshape(len(columns), -1)
    columns = columns[np.isfinite(columns).all(1)]
    n = int(len(columns))
    if n == 0:
        raise ValueError("a mean needs at least one image with finite values")
    draws = np.random.default_rng(seed).integers(0, n, (resamples, n))
    columns = [np.ascontiguousarray(c) for c in columns.T]   # each mean summed as scipy's
    value = np.array([c.mean() for c in columns])
    theta = np.stack([c[draws].mean(-1) for c in columns], 1)                  # (B, K)
    columns = np.stack(columns, 1)
    jack = (columns.sum(0) - columns) / max(n - 1, 1)                          # (n, K)
    return _bca_intervals(value, theta, jack, n, confidence, BOOTSTRAP,
                          constant=[_constant(c) for c in columns.T])


def bootstrap_of_means(parts, function, confidence: float = CONFIDENCE,
                       resamples: int = RESAMPLES, seed: int = SEED):
    """`function` of the per-image `parts` (N, M) averaged over the images — a score pooled
    over images that is no plain mean of theirs (a ratio of sums; a KL of the mean shares) —
    with its BCa bootstrap interval over the images (Efron & Tibshirani 1993, section 14.3:
    the images resampled with all their parts, the acceleration from the jackknife).
    `function` maps means (..., M) to scores (...,) or (..., K): an Interval, or a list of K.

    Vectorised, which scipy.stats.bootstrap of a statistic that is no mean is not: every
    resample is a count per image (R, N), its means one product with the parts, and the
    jackknife's leave-one-out means closed-form; so K scores on the same images cost one
    resampling (scipy's draws: its intervals to float rounding). Images whose parts are not
    all finite are left out."""
    parts = np.asarray(parts, np.float64)
    parts = parts.reshape(len(parts), -1)
    parts = parts[np.isfinite(parts).all(1)]
    n = int(len(parts))
    if n == 0:
        raise ValueError("a score needs at least one image with finite parts")
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.asarray(function(parts.mean(0)), np.float64)
        single = value.ndim == 0
        value = value.reshape(-1)
        draws = np.random.default_rng(seed).integers(0, n, (resamples, n))
        counts = np.bincount((np.arange(resamples)[:, None] * n + draws).ravel(),
                             minlength=resamples * n).reshape(resamples, n).astype(np.float64)
        theta = np.asarray(function(counts @ parts / n), np.float64).reshape(resamples, -1)
        jack = np.asarray(function((parts.sum(0) - parts) / max(n - 1, 1)),
                          np.float64).reshape(n, -1)
    out = _bca_intervals(value, theta, jack, n, confidence, BOOTSTRAP_STATISTIC)
    return out[0] if single else out


def bootstrap_weighted(n: int, function, confidence: float = CONFIDENCE,
                       resamples: int = RESAMPLES, seed: int = SEED, chunk: int = 100):
    """A score of n images that is no function of their means (the eigenvalues of a covariance:
    the share of variance a principal component explains) with its BCa bootstrap interval
    over the images, from `function` of image weights: (R, n) rows, each >= 0 and summing to
    1 (a resample's counts / n; a jackknife's leave-one-out 1 / (n - 1)) -> scores (R, K).
    The same draws as `bootstrap_of_means` (so a score that is a weighted mean gets its
    intervals), evaluated `chunk` resamples at a time to bound the memory; a list of K."""
    if n <= 0:
        raise ValueError("a score needs at least one image")
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.asarray(function(np.full((1, n), 1.0 / n)), np.float64).reshape(-1)
        draws = np.random.default_rng(seed).integers(0, n, (resamples, n))
        theta = []
        for start in range(0, resamples, chunk):
            part = draws[start:start + chunk]
            rows = len(part)
            counts = np.bincount((np.arange(rows)[:, None] * n + part).ravel(),
                                 minlength=rows * n).reshape(rows, n) / n
            theta.append(np.asarray(function(counts), np.float64).reshape(rows, -1))
        jack = []
        for start in range(0, n, chunk):
            rows = min(chunk, n - start)
            leave = np.full((rows, n), 1.0 / max(n - 1, 1))
            leave[np.arange(rows), start + np.arange(rows)] = 0.0
            jack.append(np.asarray(function(leave), np.float64).reshape(rows, -1))
    return _bca_intervals(value, np.concatenate(theta), np.concatenate(jack), n, confidence,
                          BOOTSTRAP_STATISTIC)


def _bca_intervals(value, theta, jack, n, confidence, method, constant=None) -> list[Interval]:
    """The BCa intervals of scores `value` (K,) from their bootstrap replicates `theta` (B, K)
    and jackknife values `jack` (n, K) (Efron & Tibshirani 1993, eq. 14.10-14.15; scipy.stats
    .bootstrap's "BCa", whose percentile falls back to the plain percentiles where the
    correction is undefined). A score whose jackknife does not move (`constant`, else judged
    from the jackknife) is a point."""
    import warnings

    from scipy.stats import norm

    # a score undefined on some resamples (a class no child routes to) is NaN there, quietly
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        d = np.nanmean(jack, 0) - jack
        acceleration = np.nansum(d ** 3, 0) / (6 * np.nansum(d ** 2, 0) ** 1.5)
        bias = norm.ppf((theta < value).mean(0) + 0.5 * (theta == value).mean(0))
        alpha = (1 - confidence) / 2
        ends = [norm.cdf(bias + (bias + z) / (1 - acceleration * (bias + z)))
                for z in (norm.ppf(alpha), norm.ppf(1 - alpha))]
    out = []
    for k, v in enumerate(np.asarray(value, np.float64).tolist()):
        column = theta[:, k][np.isfinite(theta[:, k])]
        spread = jack[:, k][np.isfinite(jack[:, k])]
        still = constant[k] if constant is not None else \
            _constant(spread if spread.size else np.zeros(1))
        if n < 2 or not math.isfinite(v) or not column.size or still:
            low = high = v
        else:
            levels = (ends[0][k], ends[1][k])
            if not all(math.isfinite(x) for x in levels):     # degenerate: the percentiles
                levels = (alpha, 1 - alpha)
            low, high = (float(np.percentile(column, 100 * q)) for q in levels)
        out.append(Interval(v, low, high, n, method, confidence))
    return out


def bootstrap_ratio(numerators, denominators, confidence: float = CONFIDENCE,
                    resamples: int = RESAMPLES, seed: int = SEED):
    """sum(numerators) / sum(denominators) of per-image parts — a weighted mean pooled over
    the images (an entropy weighted by activations) — with its BCa bootstrap interval over the
    images (`bootstrap_of_means`, both parts resampled together). Parts (N,) give an Interval;
    parts (N, K), K ratios on the same images, a list of K."""
    top = np.asarray(numerators, np.float64)
    bottom = np.asarray(denominators, np.float64)
    if top.shape != bottom.shape:
        raise ValueError(f"a ratio needs both parts per image: {top.shape} vs {bottom.shape}")
    k = int(np.prod(top.shape[1:]))
    both = np.concatenate([top.reshape(len(top), -1), bottom.reshape(len(bottom), -1)], 1)
    got = bootstrap_of_means(both, lambda m: m[..., :k] / m[..., k:], confidence, resamples,
                             seed)
    return got[0] if top.ndim == 1 else got


def paired_difference(a, b, confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                      seed: int = SEED) -> Interval:
    """mean(a) - mean(b) of two scores on the same images (N,), the images resampled
    together: how far apart two methods or two steps are on this evaluation set."""
    a = np.asarray(a, np.float64).reshape(-1)
    b = np.asarray(b, np.float64).reshape(-1)
    if a.shape != b.shape:
        raise ValueError(f"paired scores need one value per image each: {a.shape} vs {b.shape}")
    keep = np.isfinite(a) & np.isfinite(b)
    difference = a[keep] - b[keep]
    if difference.size == 0:
        raise ValueError("a paired difference needs at least one image with both scores")
    mean = float(difference.mean())
    if difference.size < 2 or _constant(difference):
        return Interval(mean, mean, mean, int(difference.size), BOOTSTRAP, confidence)
    low, high = _bca(difference, confidence, resamples, seed)
    return Interval(mean, low, high, int(difference.size), BOOTSTRAP, confidence)


def _constant(values: np.ndarray) -> bool:
    """Equal up to float rounding (a difference of two scores that differ by a constant)."""
    return float(np.ptp(values)) <= 1e-12 * max(1.0, float(np.abs(values).max()))


def _bca(values: np.ndarray, confidence, resamples, seed,
         statistic=np.mean) -> tuple[float, float]:
    """The BCa interval of `statistic` (the mean unless given) of `values` (a mean of
    differences, for paired scores: the same as the difference of the means, the images
    resampled together)."""
    from scipy.stats import bootstrap

    import warnings

    for method in ("BCa", "percentile"):            # BCa degenerates on a few-valued sample
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")          # its degenerate case: the next method
            result = bootstrap((values,), statistic, confidence_level=confidence,
                               n_resamples=resamples, method=method, vectorized=True,
                               axis=-1, random_state=np.random.default_rng(seed))
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            break
    return low, high


def images_needed(value: float, reference: float, confidence: float = CONFIDENCE) -> int | None:
    """About how many images a proportion `value` needs for its interval to exclude
    `reference` (half-width z sqrt(p(1-p)/n) below |value - reference|); None when they are
    equal (no number of images tells them apart)."""
    gap = abs(value - reference)
    if gap == 0:
        return None
    z = _z(confidence)
    p = min(max(value, 1e-6), 1 - 1e-6)
    return int(math.ceil(z * z * p * (1 - p) / (gap * gap)))


def percent(interval: Interval, digits: int = 1) -> str:
    """"96.7% (95% CI 95.4–97.7%)" of a proportion."""
    return (f"{100 * interval.value:.{digits}f}% ({100 * interval.confidence:.0f}% CI "
            f"{100 * interval.low:.{digits}f}–{100 * interval.high:.{digits}f}%)")


def number(interval: Interval, digits: int = 3) -> str:
    """"0.412 (95% CI 0.388–0.437)" of any other score."""
    def fixed(x: float) -> str:
        return fixed_digits(x, digits)
    return (f"{fixed(interval.value)} ({100 * interval.confidence:.0f}% CI "
            f"{fixed(interval.low)}–{fixed(interval.high)})")


def fixed_digits(value: float, digits: int = 3) -> str:
    """`value` to `digits` decimals, with no minus sign on a value that rounds to zero
    ("0.000", never "-0.000")."""
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


# --------------------------------------------------------------------------------------------
# How a summary carries its intervals
#
# A technique's `summarize` keeps every score where it was (summary[key]: a number, or a list
# over a sweep) and adds its interval under summary[INTERVALS][key]: {"low", "high", "n",
# "method"} (lists of the same length for a list-valued score). Readers that know nothing of
# intervals read the scores as before; the CSV writes the interval columns beside each score,
# the findings decide by them.

INTERVALS = "intervals"


def attach(summary: dict, key: str, interval) -> dict:
    """Set summary[key] to the score of `interval` (an Interval, or a list of them for a score
    over a sweep) and record its interval under summary[INTERVALS][key]; returns `summary`."""
    if isinstance(interval, Interval):
        summary[key] = interval.value
        entry = {"low": interval.low, "high": interval.high, "n": interval.n,
                 "method": interval.method}
    else:
        interval = list(interval)
        summary[key] = [i.value for i in interval]
        entry = {"low": [i.low for i in interval], "high": [i.high for i in interval],
                 "n": [i.n for i in interval],
                 "method": interval[0].method if interval else WILSON}
    summary.setdefault(INTERVALS, {})[key] = entry
    return summary


def difference_key(a: str, b: str) -> str:
    """Where a summary keeps the paired difference score `a` - score `b` (the same images)."""
    return f"{a} - {b}"


def attach_difference(summary: dict, a: str, b: str, interval: Interval) -> dict:
    """Record the paired difference of two of the summary's scores (`paired_difference` of
    their per-image values) under summary[INTERVALS][difference_key(a, b)], its value with
    it (the difference has no score key of its own); returns `summary`."""
    summary.setdefault(INTERVALS, {})[difference_key(a, b)] = {
        "value": interval.value, "low": interval.low, "high": interval.high, "n": interval.n,
        "method": interval.method}
    return summary


def difference_of(summary: dict, a: str, b: str) -> Interval | None:
    """The paired difference a - b a summary recorded (`attach_difference`), or None."""
    entry = (summary.get(INTERVALS) or {}).get(difference_key(a, b))
    if entry is None or None in (entry.get("value"), entry.get("low"), entry.get("high")):
        return None
    return Interval(float(entry["value"]), float(entry["low"]), float(entry["high"]),
                    int(entry["n"]), entry["method"])


def interval_of(summary: dict, key: str, index: int | None = None) -> Interval | None:
    """The Interval a summary recorded for `key` (its `index`-th for a list-valued score);
    None when it has none (a summary written before intervals, or a score with no images)."""
    entry = (summary.get(INTERVALS) or {}).get(key)
    value = summary.get(key)
    if entry is None or value is None:
        return None
    low, high, n = entry["low"], entry["high"], entry["n"]
    if index is not None:
        value, low, high, n = value[index], low[index], high[index], n[index]
    if None in (value, low, high):
        return None
    return Interval(float(value), float(low), float(high), int(n), entry["method"])


def images_to_tell(interval: Interval, reference: float) -> int | None:
    """About how many images would make `interval` exclude `reference` at the same spread
    per image (its half-width shrinks as 1/sqrt(n)): n (half-width / gap)²; None when the
    score equals the reference (no number of images tells them apart)."""
    gap = abs(interval.value - reference)
    if gap <= 1e-12 or interval.n <= 0:
        return None
    return max(interval.n + 1, int(math.ceil(interval.n * (interval.half_width / gap) ** 2)))


def ci_text(interval: Interval, scale: float = 1.0, digits: int = 1, unit: str = "") -> str:
    """"95% CI 95.4–97.7%" of an interval (scale 100 and unit "%" for a proportion)."""
    low = fixed_digits(scale * interval.low, digits)
    high = fixed_digits(scale * interval.high, digits)
    # "-0.26–-0.14" misreads: a range with a negative end says "to"
    dash = " to " if low.startswith("-") or high.startswith("-") else "–"
    return f"{100 * interval.confidence:.0f}% CI {low}{dash}{high}{unit}"
