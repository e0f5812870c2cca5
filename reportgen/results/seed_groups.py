"""Runs that differ only by their seed (`reportgen train NAME --seeds N`, with or without a
sweep): their mean and its between-seed interval, so that a reader sees how far a number
moves from one seed to the next before comparing two settings.

The interval of a mean over n seeds is Student's t interval, mean ± t(0.975, n-1) s / sqrt(n)
(s the seeds' sample standard deviation): the seeds are the samples here, not the images, so
it is wider than any one run's interval over images whenever training itself varies. Pure
functions over each run's group record (group.json: {group, base, settings, seed}) and
history.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from reportgen.results.intervals import CONFIDENCE, Interval

SEEDS = "t interval over seeds"
SEED = "seed"


@dataclass(frozen=True)
class SeedGroup:
    """Runs of one group whose settings are the same but for the seed: `name` the group's
    words ("MNIST_Demo, routing_iterations = 2"), `members` the runs (anything with `.name`,
    `.group`, `.history`)."""

    name: str
    members: tuple


def seed_interval(values, confidence: float = CONFIDENCE) -> Interval | None:
    """Mean of one value per seed with Student's t interval over the seeds; None for fewer
    than two finite values."""
    from scipy.stats import t

    found = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
             and math.isfinite(v)]
    n = len(found)
    if n < 2:
        return None
    mean = sum(found) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in found) / (n - 1))
    half = float(t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n, SEEDS, confidence)


def seed_groups(runs) -> list[SeedGroup]:
    """The groups of two or more `runs` whose group records name the same group and the same
    settings but the seed, in the order of their first run."""
    found: dict[tuple, list] = {}
    words: dict[tuple, str] = {}
    for run in runs:
        record = getattr(run, "group", None) or {}
        settings = record.get("settings") or {}
        if SEED not in settings and record.get("seed") is None:
            continue
        others = tuple(sorted((k, repr(v)) for k, v in settings.items() if k != SEED))
        key = (record.get("group"), others)
        found.setdefault(key, []).append(run)
        words.setdefault(key, ", ".join([str(record.get("base") or record.get("group"))] + [
            f"{k} = {v}" for k, v in sorted(settings.items()) if k != SEED]))
    return [SeedGroup(words[k], tuple(v)) for k, v in found.items() if len(v) >= 2]


def mean_curve(histories: list[list[dict]], key: str) -> list[dict]:
    """[{x, step, value, low, high, n}] of `key` at each number of training images seen that
    every history saved a value at (the seeds of one setting save the same steps), the mean
    with its t interval over the seeds."""
    by_x: list[dict[float, tuple[str, float]]] = []
    for history in histories:
        points = {}
        for record in history:
            seen, value = record.get("images_seen"), record.get(key)
            if isinstance(seen, (int, float)) and isinstance(value, (int, float)) \
                    and not isinstance(value, bool) and math.isfinite(value):
                points[float(seen)] = (str(record.get("step", "")), float(value))
        by_x.append(points)
    if not by_x:
        return []
    shared = sorted(set.intersection(*(set(p) for p in by_x)))
    rows = []
    for x in shared:
        interval = seed_interval([p[x][1] for p in by_x])
        if interval is None:
            continue
        rows.append({"x": x, "step": by_x[0][x][0], "value": interval.value,
                     "low": interval.low, "high": interval.high, "n": interval.n})
    return rows
