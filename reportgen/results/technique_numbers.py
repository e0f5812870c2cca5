"""What of single techniques' numbers the modules reading several techniques read (findings,
baselines, capsules_vs_cnns), here below the techniques so that those modules import none of
them; each technique's numbers module (reportgen/techniques/<name>/numbers.py) takes its own
from here.

- capsule_semantics' compactness summary keys (Gu 2022, Ch.5): compactness_<factor> pooled
  (the aggregation of Gu's Table 5); compactness_per_image_<factor> the per-image KL averaged;
  compactness_chance_pooled / _per_image: [mean, 95th percentile] of an isotropic random change;
- explanation_fidelity's method labels;
- explanation_quality's maps, scores and verdicts (decided by the paired intervals);
- clrp_evaluation's maps, in Gu, Yang & Tresp's Table 1 order, their labels and summary keys;
- multimnist_segmentation's chance level of top-2 accuracy;
- explanation_localisation's maps, scores, summary keys and verdicts.
"""

from __future__ import annotations

POOLED = "compactness_"
PER_IMAGE = "compactness_per_image_"
CHANCE_POOLED = "compactness_chance_pooled"
CHANCE_PER_IMAGE = "compactness_chance_per_image"

METHOD_LABELS = {"rpv_modified": "RPV (modified)", "rpv_original": "RPV (original)",
                 "gradcam_pp": "Grad-CAM++", "random": "random order",
                 "builtin": "built-in explanation"}


def top2_chance(num_classes: int = 10) -> float:
    """Top-2 accuracy of a guess: one unordered pair of the C(K, 2) (1/45 for 10 classes)."""
    return 2.0 / (num_classes * (num_classes - 1))


# explanation_quality: the explanations a model's site shows, then the two baselines (a map of
# i.i.d. uniform noise drawn afresh for every input, and a uniform, constant map)
QUALITY_METHODS = ("rpv_modified", "rpv_original", "builtin", "gradcam_pp", "random_map",
                   "uniform_map")
QUALITY_BASELINES = ("random_map", "uniform_map")
QUALITY_LABELS = {**{m: METHOD_LABELS[m] for m in QUALITY_METHODS[:4]},
                  "random_map": "random map (baseline)", "uniform_map": "uniform map (baseline)"}
# score -> (label, "higher" or "lower" is better, the baselines it is compared with)
QUALITY_METRICS = {
    "faithfulness": ("faithfulness correlation", "higher", ("random_map",)),
    "infidelity": ("infidelity", "lower", ("uniform_map", "random_map")),
    "sensitivity": ("max-sensitivity", "lower", ("random_map",)),
    # ROAD (Rong et al. 2022): the target score's mean over the removal fractions, most / least
    # relevant pixels removed first and linearly imputed, and their gap LeRF - MoRF
    "road_morf": ("ROAD MoRF score", "lower", ("random_map", "uniform_map")),
    "road_lerf": ("ROAD LeRF score", "higher", ("random_map", "uniform_map")),
    "road_gap": ("ROAD gap LeRF - MoRF", "higher", ("random_map", "uniform_map")),
}


def quality_key(metric: str, method: str) -> str:
    """explanation_quality's summary key of a score's mean over the images."""
    return f"{metric}_{method}"


def quality_verdict(summary: dict, metric: str, method: str, baseline: str) -> str:
    """Plain words for one explanation_quality score against one baseline, decided by the
    paired 95% interval of their difference over the same images: "above"/"below" only when it
    excludes 0, else "not told apart from"; "" when the summary has no such difference."""
    from reportgen.results.intervals import difference_of

    difference = difference_of(summary, quality_key(metric, method),
                               quality_key(metric, baseline))
    if difference is None:
        return ""
    label = QUALITY_METRICS[metric][0]
    base = QUALITY_LABELS[baseline].removesuffix(" (baseline)")
    if difference.above(0.0):
        return f"{label} above the {base}'s"
    if difference.below(0.0):
        return f"{label} below the {base}'s"
    return f"{label} not told apart from the {base}'s"
# clrp_evaluation (Gu, Yang & Tresp, ACCV 2018): the maps scored, in their Table 1 order (their
# finding, tested, not assumed: random < gradient < LRP < CLRP), and the summary keys
CLRP_METHODS = ("random", "gradient", "lrp", "clrp1", "clrp2")
CLRP_LABELS = {"random": "random", "gradient": "gradient", "lrp": "LRP", "clrp1": "CLRP1",
               "clrp2": "CLRP2"}
CLRP_DISCRIMINATIVE = ("lrp", "clrp1", "clrp2")


def clrp_disc_key(method: str) -> str:
    return f"discriminativeness_{method}"


def clrp_pointing_key(method: str) -> str:
    return f"pointing_{method}"


def clrp_drop_key(method: str) -> str:
    return f"ablation_drop_{method}"


# explanation_localisation (MultiMNIST): the maps scored against each digit's mask (the site's
# explanations, a CNN's LRP and CLRP1, then the random and uniform baselines), the two scores,
# the summary keys and the verdicts (decided by the paired intervals over the same pairs)
LOCALISATION_METHODS = ("rpv_modified", "rpv_original", "builtin", "gradcam_pp", "lrp", "clrp1",
                        "random_map", "uniform_map")
LOCALISATION_BASELINES = ("random_map", "uniform_map")
LOCALISATION_LABELS = {**{m: METHOD_LABELS[m] for m in ("rpv_modified", "rpv_original",
                                                        "builtin", "gradcam_pp")},
                       "lrp": "LRP", "clrp1": "CLRP1", "random_map": "random map",
                       "uniform_map": "uniform map"}
LOCALISATION_METRICS = {"pointing": "pointing game", "mass": "relevance mass accuracy"}


def localisation_key(metric: str, method: str, against: str = "own") -> str:
    """explanation_localisation's summary key of a score's mean over the pairs, against the
    explained ("own") or the other digit's mask."""
    return f"{metric}_{method}_{against}"


def localisation_verdict(summary: dict, metric: str, method: str, baseline: str) -> str:
    """Words for an explanation's own-digit score against `baseline` ("uniform_map" or
    "random_map": that map's on the same digit; "other": its own score against the other
    digit), by the paired 95% interval: "above"/"below" when it excludes 0, else "not told
    apart from"; "" when the summary has no such difference."""
    from reportgen.results.intervals import difference_of

    against = localisation_key(metric, method, "other") if baseline == "other" \
        else localisation_key(metric, baseline)
    difference = difference_of(summary, localisation_key(metric, method), against)
    if difference is None:
        return ""
    what = ("its score on the other digit" if baseline == "other"
            else f"the {LOCALISATION_LABELS[baseline]}'s")
    label = f"{LOCALISATION_LABELS[method]} {LOCALISATION_METRICS[metric]}"
    if difference.above(0.0):
        return f"{label} above {what}"
    if difference.below(0.0):
        return f"{label} below {what}"
    return f"{label} not told apart from {what}"
