"""Explanation quality results: the maps' order and labels, the scores and which way is better,
and the verdicts decided by the intervals (what compute, summarize and the figure all read)."""

from __future__ import annotations

from reportgen.results import intervals as iv
from reportgen.results.technique_numbers import METHOD_LABELS

# The explanations a model's site shows (reportgen.techniques.explanation_fidelity.
# saliency_maps: RPV modified and original, or the family's built-in map; Grad-CAM++), then the
# two baselines: a map of i.i.d. uniform noise (drawn afresh for every input it "explains") and a
# uniform (constant) map. A model has only some of the explanations; the others are NaN.
METHODS = ("rpv_modified", "rpv_original", "builtin", "gradcam_pp", "random_map", "uniform_map")
BASELINES = ("random_map", "uniform_map")
LABELS = {**{m: METHOD_LABELS[m] for m in METHODS[:4]},
          "random_map": "random map (baseline)", "uniform_map": "uniform map (baseline)"}

# score -> (label, "higher" or "lower" is better, the baselines it is compared with)
METRICS = {
    "faithfulness": ("faithfulness correlation", "higher", ("random_map",)),
    "infidelity": ("infidelity", "lower", ("uniform_map", "random_map")),
    "sensitivity": ("max-sensitivity", "lower", ("random_map",)),
}


def key(metric: str, method: str) -> str:
    """The summary key of a score's mean over the images."""
    return f"{metric}_{method}"


def verdict(summary: dict, metric: str, method: str, baseline: str) -> str:
    """Plain words for one score against one baseline, decided by the paired 95% interval of
    their difference over the same images (`intervals.difference_of`): "above"/"below" only when
    it excludes 0, else "not told apart from"; "" when either score is missing."""
    difference = iv.difference_of(summary, key(metric, method), key(metric, baseline))
    if difference is None:
        return ""
    label = METRICS[metric][0]
    base = LABELS[baseline].removesuffix(" (baseline)")
    if difference.above(0.0):
        return f"{label} above the {base}'s"
    if difference.below(0.0):
        return f"{label} below the {base}'s"
    return f"{label} not told apart from the {base}'s"


def better(summary: dict, metric: str, method: str, baseline: str) -> bool | None:
    """Whether the method's score is better than the baseline's by the paired interval (True),
    worse (False), or neither / unknown (None)."""
    difference = iv.difference_of(summary, key(metric, method), key(metric, baseline))
    if difference is None or not difference.excludes(0.0):
        return None
    higher = METRICS[metric][1] == "higher"
    return difference.above(0.0) == higher
