"""The headline scores of the dataset analyses beside their baselines: each score with what it
is measured against (chance 1/K for an accuracy, a random change or a random order, uniform
routing) and the same score at the untrained step (0-0). A score a random network or a coin
also reaches says nothing: the Compare page puts these next to its charts.

Pure functions over the analyses' summaries (`Panel.numbers`, each technique's `summarize`).
"""

from __future__ import annotations

import math

from reportgen.probe.affine import FACTORS
from reportgen.results.intervals import interval_of
from reportgen.results.technique_numbers import CHANCE_POOLED, POOLED

CHANCE = "chance"                  # a baseline of 1 / number of classes
# technique -> [(summary key, label, baseline)]; the baseline is CHANCE, a summary key (the
# technique measured it: a random order, uniform routing), (key, index) of a [mean, 95th
# percentile] pair, or None (the untrained step is the only baseline)
SCORES: dict[str, list[tuple[str, str, object]]] = {
    "affnist_benchmark": [("clean_accuracy", "clean accuracy", CHANCE),
                          ("affnist_accuracy", "affNIST-like accuracy", CHANCE)],
    "affine_robustness": [("clean_accuracy", "clean accuracy", CHANCE),
                          *((f"{f}_mean_accuracy", f"accuracy under {f.replace('_', ' ')} "
                             f"(mean over the sweep)", CHANCE) for f in FACTORS)],
    "adversarial_robustness": [(f"accuracy_capsules_{a}_0.1", f"accuracy under {a.upper()}, "
                                f"ε = 0.1", CHANCE) for a in ("fgsm", "pgd")],
    "capsule_semantics": [(f"{POOLED}{f}", f"compactness under {f.replace('_', ' ')}",
                           (CHANCE_POOLED, 1)) for f in FACTORS],
    "routing_entropy": [("entropy_mean", "mean routing entropy into the classes (nats)",
                         "entropy_max")],
    "dead_units": [("dead_filter_fraction", "dead conv filters (share)", None),
                   ("dead_type_fraction", "inactive capsule types (share)", None)],
    "multimnist_segmentation": [("top2_accuracy", "top-2 accuracy", "top2_chance"),
                                ("segmentation_iou", "segmentation IoU (mean)",
                                 "segmentation_reference")],
    "explanation_fidelity": [(f"deletion_aopc_{m}", f"deletion AOPC, {label}",
                              "deletion_aopc_random")
                             for m, label in (("rpv_modified", "RPV (modified)"),
                                              ("gradcam_pp", "Grad-CAM++"),
                                              ("builtin", "built-in explanation"))],
    # infidelity (~1e-6 for class scores in [0, 1]) stays on the analysis's own table
    "explanation_quality": [(f"{score}_{m}", f"{words}, {label}", f"{score}_random_map")
                            for score, words in (("faithfulness", "faithfulness correlation"),
                                                 ("sensitivity", "max-sensitivity"),
                                                 ("road_gap", "ROAD gap LeRF - MoRF"))
                            for m, label in (("rpv_modified", "RPV (modified)"),
                                             ("gradcam_pp", "Grad-CAM++"),
                                             ("builtin", "built-in explanation"))],
    # Gu, Yang & Tresp 2018: CLRP's top-2 maps against LRP's, the ablation against a random map
    "clrp_evaluation": [("discriminativeness_lrp", "1 - cos of the top-2 maps, LRP", None),
                        ("discriminativeness_clrp1", "1 - cos of the top-2 maps, CLRP1",
                         "discriminativeness_lrp"),
                        *((f"ablation_drop_{m}",
                           f"logit drop, patch ablation at {label}'s maximum",
                           "ablation_drop_random")
                          for m, label in (("gradient", "the gradient"), ("lrp", "LRP"),
                                           ("clrp1", "CLRP1")))],
}
BASELINE_LABELS = {CHANCE: "chance (1/K)", "entropy_max": "uniform routing (log K)",
                   "deletion_aopc_random": "random order",
                   "discriminativeness_lrp": "LRP's", "ablation_drop_random": "a random patch",
                   "faithfulness_random_map": "random map", "sensitivity_random_map": "random map",
                   "top2_chance": "chance (1/C(K, 2))",
                   "segmentation_reference": "each class's typical digit, centred",
                   CHANCE_POOLED: "random change (95th percentile)"}


def _value(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _number(summary: dict | None, key: str) -> float | None:
    return _value((summary or {}).get(key))


def baseline(summary: dict, kind, classes: int) -> float | None:
    """A score's baseline value from its summary (None when it was not measured)."""
    if kind == CHANCE:
        return 1.0 / classes if classes else None
    if isinstance(kind, tuple):
        pair = summary.get(kind[0])
        return _value(pair[kind[1]]) if isinstance(pair, list) and len(pair) > kind[1] \
            else None
    return _number(summary, kind) if kind else None


def baseline_label(kind) -> str:
    return BASELINE_LABELS.get(kind[0] if isinstance(kind, tuple) else kind, "") if kind else ""


def scores(technique: str, summary: dict | None, untrained: dict | None,
           classes: int) -> list[dict]:
    """The technique's headline scores present in `summary`: [{key, label, value, interval,
    baseline, baseline_label, untrained}], `interval` the score's 95% interval over its images
    (None when the summary has none), `untrained` the score at 0-0 (None when 0-0 was not
    analysed or lacks it: the caller knows which)."""
    out = []
    for key, label, kind in SCORES.get(technique, []):
        value = _number(summary, key)
        if value is None:
            continue
        out.append({"key": key, "label": label, "value": value,
                    "interval": interval_of(summary or {}, key),
                    "baseline": baseline(summary or {}, kind, classes),
                    "baseline_label": baseline_label(kind),
                    "untrained": _number(untrained, key)})
    return out
