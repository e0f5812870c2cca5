"""What of single techniques' numbers the modules reading several techniques read (findings,
baselines, capsules_vs_cnns), here below the techniques so that those modules import none of
them; each technique's numbers module (reportgen/techniques/<name>/numbers.py) takes its own
from here.

- capsule_semantics' compactness summary keys (Gu 2022, Ch.5): compactness_<factor> pooled
  (the aggregation of Gu's Table 5); compactness_per_image_<factor> the per-image KL averaged;
  compactness_chance_pooled / _per_image: [mean, 95th percentile] of an isotropic random change;
- explanation_fidelity's method labels;
- clrp_evaluation's maps, in Gu, Yang & Tresp's Table 1 order, their labels and summary keys;
- multimnist_segmentation's chance level of top-2 accuracy.
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
