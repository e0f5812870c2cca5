"""The model families (`family` in params.toml): each is one plug-in, a module of the package
`reportgen.families` that declares `FAMILY = Family(...)`. Nothing else in reportgen names a
family: settings, descriptions, builds, parameter counts, display names and cost estimates are
looked up here.

The plug-ins are found by listing that package (`pkgutil`), not imported by name, so that this
module — which `reportgen.settings.model_params` reads at load time — stays below the layers
the plug-ins use (the descriptions of reportgen.capsnet, the shared settings sections).
`register` adds one more (a test's toy family, a notebook's experiment).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable

from reportgen.errors import ReportgenError

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
    modules:       the reportgen modules that are this family's own (they may name it).
    xla:           which of its passes are XLA-compiled (XLA), with the measured ratio beside
                   the setting in its module.
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


_REGISTRY: dict[str, Family] = {}
_LOADED = False


def register(family: Family) -> Family:
    """Add (or replace) a family; returns it."""
    _REGISTRY[family.name] = family
    return family


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def _load_plugins() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True                # a plug-in that looks a family up while loading sees the rest
    try:
        package = importlib.import_module(PLUGIN_PACKAGE)
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
            module = importlib.import_module(f"{PLUGIN_PACKAGE}.{info.name}")
            declared = getattr(module, "FAMILY", None)
            if isinstance(declared, Family):
                _REGISTRY.setdefault(declared.name, declared)
    except BaseException:
        _LOADED = False           # try again next time rather than run with half the families
        raise


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


def family_of(params) -> Family:
    """The family of a ModelParams (or of anything with a `family` name)."""
    return family(getattr(params, "family", DEFAULT_FAMILY))


def costs(name: str) -> FamilyCosts:
    """The build-time costs of family `name`, the default family's reference where it has none
    of its own (or is not registered: a cost group measured before a family was removed)."""
    _load_plugins()
    found = _REGISTRY.get(name)
    own = found.costs if found is not None else FamilyCosts()
    return FamilyCosts(reference=own.reference or _REGISTRY[DEFAULT_FAMILY].costs.reference,
                       seconds_per_eval_image=own.seconds_per_eval_image)
