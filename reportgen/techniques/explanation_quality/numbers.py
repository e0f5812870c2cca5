"""Explanation quality results: the maps' order and labels, the scores and which way is better,
and the verdicts decided by the intervals (what compute, summarize and the figure all read; the
findings read them too, so they live in reportgen/results/technique_numbers.py)."""

from __future__ import annotations

from reportgen.results import intervals as iv
from reportgen.results.technique_numbers import QUALITY_BASELINES as BASELINES
from reportgen.results.technique_numbers import QUALITY_LABELS as LABELS
from reportgen.results.technique_numbers import QUALITY_METHODS as METHODS
from reportgen.results.technique_numbers import QUALITY_METRICS as METRICS
from reportgen.results.technique_numbers import quality_key as key
from reportgen.results.technique_numbers import quality_verdict as verdict

__all__ = ["BASELINES", "LABELS", "METHODS", "METRICS", "better", "key", "verdict"]


def better(summary: dict, metric: str, method: str, baseline: str) -> bool | None:
    """Whether the method's score is better than the baseline's by the paired interval (True),
    worse (False), or neither / unknown (None)."""
    difference = iv.difference_of(summary, key(metric, method), key(metric, baseline))
    if difference is None or not difference.excludes(0.0):
        return None
    higher = METRICS[metric][1] == "higher"
    return difference.above(0.0) == higher
