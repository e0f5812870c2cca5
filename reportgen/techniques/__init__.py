"""The technique registry, in page order. Every technique is one plug-in declaring
`TECHNIQUE = Technique(...)` under the entry-point group `reportgen.techniques`
(reportgen.plugins): reportgen's own in its pyproject.toml, in the page order of `BUILT_IN`; a
package's own after them (its input and checkpoint analyses after reportgen's, its dataset
analyses after reportgen's dataset analyses, by name). Adding one of reportgen's = one package
(reportgen/techniques/<name>/: declaration, figures, numbers, tests), one line here and one in
pyproject.toml (CONTRIBUTING.md).
tests/test_technique_contract.py runs every registered technique through a probe view
restricted to what it declared, on a tiny network of every registered family.
"""

from __future__ import annotations

import re
from importlib import import_module

from reportgen import plugins
from reportgen.techniques.base import Technique

# A family's own technique lives in its family's package (as pyproject.toml's entry point says);
# every other built-in is reportgen.techniques.<name>.
OWN_MODULES = {"gracaps_attention": "reportgen.families.gracapsnet.attention"}

# reportgen's own, in page order (module name = technique name = entry point name).
BUILT_IN = (
    "predictions",
    "gradcam_pp",
    "lrp_clrp",
    "conv_feature_maps",
    "conv_kernels",
    "primary_heatmaps",
    "class_capsules",
    "rpv",
    "routing_weights",
    "gracaps_attention",
    "live_decoder",
    "decoder_length",
    "decoder_perturbation",
    "multimnist_pair",
    "activation_maximization",
    "draw_panel",
    # dataset level, over the evaluation set
    "routing_entropy",
    "vote_agreement",
    "dead_units",
    "capsule_semantics",
    "explanation_fidelity",
    "explanation_quality",
    "explanation_randomisation",
    "pose_space",
    "clrp_evaluation",
    "affine_robustness",
    "adversarial_robustness",
    "affnist_benchmark",
    "multimnist_segmentation",
    "explanation_localisation",
)
# Older name of BUILT_IN (reportgen's own techniques; `technique_names()` lists every one).
TECHNIQUE_MODULES = BUILT_IN
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

_REGISTRY: dict[str, Technique] = {}
_FOUND: list[plugins.Plugin] = []
_ORIGINS: dict[str, plugins.Plugin] = {}
_LOADED = False


def check_technique(technique, others: dict[str, Technique]) -> None:
    """ValueError (TypeError) naming what is wrong with a technique's declaration."""
    if not isinstance(technique, Technique):
        raise TypeError(f"it is a {type(technique).__name__}, not a "
                        f"reportgen.techniques.base.Technique")
    if not _NAME.match(technique.name):
        raise ValueError(f"a technique name is lower-case letters, digits and '_' (it names "
                         f"files and URL anchors); got {technique.name!r}")
    if technique.name in others:
        raise ValueError(f"the technique name '{technique.name}' is taken")
    for key in ("compute", "render"):
        if not callable(getattr(technique, key)):
            raise ValueError(f"technique '{technique.name}': {key} must be a function")


def _accept(technique, plugin: plugins.Plugin) -> None:
    check_technique(technique, _REGISTRY)
    _REGISTRY[technique.name] = technique
    _ORIGINS[technique.name] = plugin


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    try:
        # a source tree run without being installed: its own first, so that a plug-in never
        # takes a built-in technique's name
        if not plugins.own_installed(plugins.TECHNIQUES):
            for name in BUILT_IN:
                module = OWN_MODULES.get(name, f"reportgen.techniques.{name}")
                _REGISTRY[name] = import_module(module).TECHNIQUE
                _ORIGINS[name] = plugins.own_record(plugins.TECHNIQUES, name,
                                                    f"{module}:TECHNIQUE")
        _FOUND[:] = plugins.load(plugins.TECHNIQUES, _accept)
    except BaseException:
        _LOADED = False
        raise


def _page_order(technique: Technique) -> tuple:
    own = technique.name in BUILT_IN
    return (technique.scope == "dataset", not own,
            BUILT_IN.index(technique.name) if own else 0, technique.name)


def all_techniques() -> tuple[Technique, ...]:
    """Every registered technique, in page order."""
    _load()
    return tuple(sorted(_REGISTRY.values(), key=_page_order))


def technique_names() -> tuple[str, ...]:
    return tuple(t.name for t in all_techniques())


def get_technique(name: str) -> Technique:
    from reportgen.errors import ReportgenError

    _load()
    if name not in _REGISTRY:
        raise ReportgenError(f"Unknown technique '{name}'.",
                             expected=f"one of: {', '.join(technique_names())}",
                             fix="`reportgen plugins` lists the techniques and the packages "
                                 "they come from")
    return _REGISTRY[name]


def register(technique: Technique) -> Technique:
    """Add (or replace) a technique from code (a test's, a notebook's); ValueError when its
    declaration is invalid."""
    _load()
    check_technique(technique, {n: t for n, t in _REGISTRY.items() if n != technique.name})
    _REGISTRY[technique.name] = technique
    _ORIGINS.pop(technique.name, None)     # no package's any more: registered in code
    return technique


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)
    _ORIGINS.pop(name, None)


def origin(technique: Technique) -> plugins.Plugin | None:
    """The plug-in record of a registered technique (reportgen's own too, when read from its
    package without entry points); None for one registered in code or not registered."""
    _load()
    if _REGISTRY.get(technique.name) is not technique:
        return None
    return _ORIGINS.get(technique.name)


def plugin_records() -> list[plugins.Plugin]:
    """Every technique plug-in found, loaded or not (`reportgen plugins`)."""
    _load()
    return list(_FOUND)
