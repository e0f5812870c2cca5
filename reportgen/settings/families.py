"""The model families (`family` in params.toml): each is one plug-in declaring
`FAMILY = Family(...)`, registered under the entry-point group `reportgen.families`
(reportgen.plugins) — reportgen's own in its pyproject.toml, a researcher's in their package's.
Nothing else in reportgen names a family: settings, descriptions, builds, parameter counts,
display names, citations and cost estimates are looked up here.

This module is read by `reportgen.settings.model_params` at load time, so it stays below the
layers the plug-ins use (the descriptions of reportgen.capsnet, the shared settings sections);
the plug-ins are imported when a family is first looked up. `register` adds one more from code
(a test's toy family, a notebook's experiment).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from reportgen import plugins
from reportgen.errors import ReportgenError

# reportgen's own families, listed when its package metadata (and so its entry points) is
# missing: a source tree run without `pip install -e .`
PLUGIN_PACKAGE = "reportgen.families"
# The family of a params.toml without a `family` key (every model before families existed).
DEFAULT_FAMILY = "capsnet"


@dataclass(frozen=True)
class FamilyCosts:
    """What a family's build is estimated to cost (reportgen.commands.build_time), when its
    parameter count does not tell: seconds per unit of work at MNIST_Demo's size on the
    reference CPU (keys: model, step, input, analysed_step, eval_image), and the seconds per
    evaluation image and analysed step that size the fitted evaluation set
    (reportgen.commands.build_settings). None: the default family's."""

    reference: dict[str, float] | None = None
    seconds_per_eval_image: float | None = None


@dataclass(frozen=True)
class XLA:
    """Which of a family's passes run XLA-compiled (`tf.function(jit_compile=True)`) rather
    than as a plain tf.function, decided by measuring the family's MNIST model
    (bench/bench_xla.py), not guessed. `forward`: the probe's passes without gradients and the
    evaluation; `gradients`: the probe's passes with gradients and the training step (XLA's
    CPU backward of the vector capsules' convolutions runs several times slower than
    TensorFlow's own kernels)."""

    forward: bool = False
    gradients: bool = False


@dataclass(frozen=True)
class Family:
    """One model family.

    name:          params.toml's `family` value.
    table:         the params.toml table it owns (`[em]`, `[graph]`), or None.
    settings:      the frozen dataclass that table becomes (ModelParams.family_settings); parsed
                   by `parse` when given (nested tables, cross-field checks), else field by
                   field (reportgen.settings.model_params.parse_section).
    parse:         (raw table, source) -> settings.
    check:         (ModelParams, raw document, source) -> ModelParams: refuse settings of the
                   shared tables that mean nothing to it, check its geometry fits the input.
    describe:      ModelParams -> ModelDescription, without TensorFlow.
    build:         ModelParams -> reportgen.capsnet.network.Network (Keras imported inside),
                   whose `training_losses` is the family's loss.
    count_params:  ModelParams -> trainable parameters, by arithmetic (no TensorFlow).
    display_name:  ModelParams -> the model's kind in tables and comparisons ("CapsNet",
                   "ConvNet-Avg", ...).
    costs:         its build-time costs (FamilyCosts).
    routing:       the kinds of routing weights its capsule layers have
                   (reportgen.capsnet.description.RoutingWeights; their `kind`s become model
                   features techniques can require, with their words for "not applicable").
    modules:       the modules that are this family's own: reportgen's may name it, and their
                   source is in its models' cache keys (reportgen.engine.code_identity).
    xla:           which of its passes are XLA-compiled (XLA), with the measured ratio beside
                   the setting in its module.
    citations:     the BibTeX entries of the papers its networks come from (reportgen.bibtex);
                   the model pages, "About the methods" and the supplement's bibliography cite
                   them. () cites nothing.
    setting_citations: ModelParams -> the entries some settings add (Gu 2022's No-R and
                   Aff-CapsNet are settings of the CapsNet), or None.
    capabilities:  the optional capabilities of its networks (reportgen.contract.CAPABILITIES:
                   "votes", "explanation"); each becomes a model feature techniques may require.
    outputs:       {model output: its shape and meaning} of the outputs its networks give
                   beyond the contract's (its own techniques read them as probe tensors).
    example:       a tiny model of the family as a params.toml document (a dict; its
                   "family" and "dataset" are filled in): reportgen's contract tests build it
                   and run every technique over it, a `.keras` round trip and a default
                   build, so that a plug-in is held to the tests reportgen's own families pass.
    squash:        the family's own squash, a keras.ops function s -> v over the last axis,
                   used by every technique that squashes for it (the vote attack's mean
                   votes); None: Sabour et al. 2017's (reportgen.capsnet.ops.squash).
    classification_loss: the name of the classification term of its loss (the first term
                   `Network.training_losses` returns): the key of history.json's records that
                   holds it, and what the console and the training curves call it
                   ("margin_loss", "spread_loss", "nll", "cross_entropy"; lower-case letters,
                   digits and '_', not one of HISTORY_RECORD_KEYS). A network whose settings
                   train another term names it in `Network.classification_loss`.
    """

    name: str
    describe: Callable[[Any], Any]
    build: Callable[[Any], Any]
    count_params: Callable[[Any], int]
    display_name: Callable[[Any], str]
    table: str | None = None
    settings: type | None = None
    parse: Callable[[Any, str], Any] | None = None
    check: Callable[[Any, dict, str], Any] | None = None
    costs: FamilyCosts = field(default_factory=FamilyCosts)
    routing: tuple[Any, ...] = ()
    modules: tuple[str, ...] = ()
    xla: XLA = field(default_factory=XLA)
    citations: tuple[str, ...] = ()
    setting_citations: Callable[[Any], tuple[str, ...]] | None = None
    capabilities: frozenset[str] = frozenset()
    outputs: dict[str, str] = field(default_factory=dict)
    example: dict | None = None
    squash: Callable[[Any], Any] | None = None
    classification_loss: str = "margin_loss"

    def __post_init__(self):
        object.__setattr__(self, "capabilities", frozenset(self.capabilities))
        if not isinstance(self.citations, str):
            object.__setattr__(self, "citations", tuple(self.citations))

    def citations_for(self, params) -> tuple[str, ...]:
        """The BibTeX entries a model of this family with `params` cites."""
        extra = self.setting_citations(params) if self.setting_citations is not None else ()
        from reportgen.bibtex import unique

        return tuple(unique((*self.citations, *extra)))


# The keys of params.toml every family shares (ModelParams' fields, checked by
# tests/test_plugins.py): a family's own table takes another name.
SHARED_TABLES = ("dataset", "input_shape", "num_classes", "conv", "primary", "class_caps",
                 "decoder", "loss", "training", "description", "imported_from", "family")
# The keys of a training history record (reportgen.training.trainer) beside the
# classification loss, which each family names (Family.classification_loss).
HISTORY_RECORD_KEYS = ("step", "epoch", "batch", "images_seen", "loss", "reconstruction_loss",
                       "train_accuracy", "val_accuracy", "val_images", "seconds", "wall_seconds")
_REGISTRY: dict[str, Family] = {}
_ORIGINS: dict[str, plugins.Plugin] = {}
_LOADED = False
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def register(family: Family) -> Family:
    """Add (or replace) a family from code; returns it. ValueError when its declaration is
    invalid (what `reportgen plugins` reports for an installed one)."""
    _load_plugins()
    check_family(family, {n: f for n, f in _REGISTRY.items() if n != family.name})
    _REGISTRY[family.name] = family
    _ORIGINS.pop(family.name, None)        # no package's any more: registered in code
    return family


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)
    _ORIGINS.pop(name, None)


def check_family(family, others: dict[str, Family]) -> None:
    """ValueError (TypeError) naming what is wrong with a family's declaration, given the
    families registered before it."""
    if not isinstance(family, Family):
        raise TypeError(f"it is a {type(family).__name__}, not a "
                        f"reportgen.settings.families.Family")
    if not isinstance(family.name, str) or not _NAME.match(family.name):
        raise ValueError(f"a family name is lower-case letters, digits and '_'; got "
                         f"{family.name!r}")
    if family.name in others:
        raise ValueError(f"the family name '{family.name}' is taken by "
                         f"{_origin_words(family.name)}")
    for key in ("describe", "build", "count_params", "display_name"):
        if not callable(getattr(family, key)):
            raise ValueError(f"family '{family.name}': {key} must be a function")
    if family.table is not None:
        owner = next((n for n, f in others.items() if f.table == family.table), None)
        if not isinstance(family.table, str) or not _NAME.match(family.table) \
                or family.table in SHARED_TABLES or owner:
            raise ValueError(f"family '{family.name}': its params.toml table {family.table!r} "
                             f"must be a new lower-case name (not one of {list(SHARED_TABLES)}"
                             + (f", nor family '{owner}'s" if owner else "") + ")")
        if family.settings is None:
            raise ValueError(f"family '{family.name}': a table needs its settings dataclass")
    kinds = {w.kind: n for n, f in others.items() for w in f.routing}
    for weights in family.routing:
        if not hasattr(weights, "kind") or not hasattr(weights, "paths"):
            raise ValueError(f"family '{family.name}': routing lists RoutingWeights "
                             f"(reportgen.capsnet.description); got {weights!r}")
        if kinds.get(weights.kind, family.name) != family.name:
            raise ValueError(f"family '{family.name}': the routing kind '{weights.kind}' is "
                             f"family '{kinds[weights.kind]}'s; name your own kind")
    loss = family.classification_loss
    if not isinstance(loss, str) or not _NAME.match(loss) or loss in HISTORY_RECORD_KEYS:
        raise ValueError(f"family '{family.name}': classification_loss is a history key of "
                         f"lower-case letters, digits and '_', not one of "
                         f"{list(HISTORY_RECORD_KEYS)}; got {loss!r}")
    from reportgen.contract import check_declaration

    check_declaration(family.name, family.capabilities, family.outputs)
    if family.squash is not None and not callable(family.squash):
        raise ValueError(f"family '{family.name}': squash must be a function s -> v")
    if family.example is not None and not isinstance(family.example, dict):
        raise ValueError(f"family '{family.name}': example is a params.toml document (a dict)")
    from reportgen.bibtex import check_entries

    check_entries(family.citations, f"family '{family.name}'")
    if family.setting_citations is not None and not callable(family.setting_citations):
        raise ValueError(f"family '{family.name}': setting_citations must be a function of "
                         f"the model's parameters")


def _origin_words(name: str) -> str:
    origin = _ORIGINS.get(name)
    return f"package {origin.origin}" if origin is not None else "a family registered in code"


def _accept(family, plugin: plugins.Plugin) -> None:
    check_family(family, _REGISTRY)
    _REGISTRY[family.name] = family
    _ORIGINS[family.name] = plugin


def _load_plugins() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True                # a plug-in that looks a family up while loading sees the rest
    try:
        if not plugins.own_installed(plugins.FAMILIES):
            _load_own_package()   # first: a plug-in never takes a built-in family's name
        _FOUND[:] = plugins.load(plugins.FAMILIES, _accept)
    except BaseException:
        _LOADED = False           # try again next time rather than run with half the families
        raise


def _load_own_package() -> None:
    """reportgen's own families from its package, when its entry points are not installed
    (run from a source tree); said once."""
    from reportgen import console

    console.notice("reportgen's own model families are not registered as entry points (is "
                   "reportgen installed? `pip install -e .`); reading them from its package.")
    package = importlib.import_module(PLUGIN_PACKAGE)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        declared = getattr(importlib.import_module(f"{PLUGIN_PACKAGE}.{info.name}"), "FAMILY",
                           None)
        if isinstance(declared, Family) and declared.name not in _REGISTRY:
            _REGISTRY[declared.name] = declared
            _ORIGINS[declared.name] = plugins.own_record(
                plugins.FAMILIES, declared.name, f"{PLUGIN_PACKAGE}.{info.name}:FAMILY")


_FOUND: list[plugins.Plugin] = []


def plugin_records() -> list[plugins.Plugin]:
    """Every family plug-in found, loaded or not, in registry order (`reportgen plugins`);
    a family registered from code has no record."""
    _load_plugins()
    return list(_FOUND)


def origin(declared: Family) -> plugins.Plugin | None:
    """The plug-in record of a registered family (reportgen's own too, when read from its
    package without entry points); None for one registered in code or not registered."""
    _load_plugins()
    if _REGISTRY.get(declared.name) is not declared:
        return None
    return _ORIGINS.get(declared.name)


def registered() -> tuple[str, ...]:
    """The names of every family, default first, then alphabetically."""
    _load_plugins()
    return tuple(sorted(_REGISTRY, key=lambda n: (n != DEFAULT_FAMILY, n)))


def family(name: str, source: str = "the model's parameters") -> Family:
    """The family called `name`; one line naming `source`, the value and the registered
    families when there is none."""
    _load_plugins()
    found = _REGISTRY.get(name) if isinstance(name, str) else None
    if found is None:
        known = list(registered())
        raise ReportgenError(f"Unknown model family in {source}.", expected=f"one of {known}",
                             received=repr(name),
                             fix=f"Set family in {source} to one of {known}.")
    return found


def example_params(name: str) -> dict:
    """The family's tiny example model as a params.toml document, its family and a dataset
    filled in (ValueError when it declares none)."""
    declared = family(name).example
    if declared is None:
        raise ValueError(f"family '{name}' declares no example model (Family.example)")
    return {"dataset": "mnist", **declared, "family": name}


def family_of(params) -> Family:
    """The family of a ModelParams (or of anything with a `family` name)."""
    return family(getattr(params, "family", DEFAULT_FAMILY))


def declares_costs(name: str) -> bool:
    """Whether family `name` declares reference costs of its own (FamilyCosts.reference)."""
    _load_plugins()
    found = _REGISTRY.get(name)
    return found is not None and found.costs.reference is not None


def costs(name: str) -> FamilyCosts:
    """The build-time costs of family `name`, the default family's reference where it has none
    of its own (or is not registered: a cost group measured before a family was removed)."""
    _load_plugins()
    found = _REGISTRY.get(name)
    own = found.costs if found is not None else FamilyCosts()
    return FamilyCosts(reference=own.reference or _REGISTRY[DEFAULT_FAMILY].costs.reference,
                       seconds_per_eval_image=own.seconds_per_eval_image)
