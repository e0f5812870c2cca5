"""The technique registry, in page order. Adding a technique = one module + one line here
(+ its test; CONTRIBUTING.md). tests/test_technique_contract.py runs every registered technique
through a probe view restricted to what it declared."""

from __future__ import annotations

from importlib import import_module

from reportgen.techniques.base import Technique

# Module names = technique names.
TECHNIQUE_MODULES = (
    "predictions",
    "gradcam_pp",
    "conv_feature_maps",
    "conv_kernels",
    "primary_heatmaps",
    "class_capsules",
    "rpv",
    "gracaps_attention",
    "live_decoder",
    "decoder_length",
    "decoder_perturbation",
    "multimnist_pair",
    "activation_maximization",
    # dataset level, over the evaluation set
    "routing_entropy",
    "vote_agreement",
    "dead_units",
    "capsule_semantics",
    "explanation_fidelity",
    "affine_robustness",
    "adversarial_robustness",
    "affnist_benchmark",
    "multimnist_segmentation",
)


def all_techniques() -> tuple[Technique, ...]:
    return tuple(import_module(f"reportgen.techniques.{m}").TECHNIQUE for m in TECHNIQUE_MODULES)


def get_technique(name: str) -> Technique:
    from reportgen.errors import ReportgenError

    if name not in TECHNIQUE_MODULES:
        raise ReportgenError(f"Unknown technique '{name}'.",
                             expected=f"one of: {', '.join(TECHNIQUE_MODULES)}")
    return import_module(f"reportgen.techniques.{name}").TECHNIQUE
