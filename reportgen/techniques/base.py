"""What a technique is: one declaration per module (see reportgen/techniques/__init__.py).

A technique turns a ProbeBatch (tensors of one forward/backward pass over a batch of images,
for one model at one training step) into a dict of float32 arrays with the batch axis first
(scope "input"), or into arrays about the checkpoint itself (scope "checkpoint", computed once
per model step, e.g. conv kernels), or into dataset-level numbers over an evaluation set (scope
"dataset": compute receives a reportgen.probe.evaluation.EvalBatch; e.g. robustness curves).
`render` draws one result (one image's slice) into figures; it never touches TensorFlow.

A technique says what it reads and what it needs of a model, and the engine obeys:
- `needs`: the probe tensors it reads (names of reportgen.probe.probe.TENSORS; "<layer>" stands
  for every conv layer of the model). The probe computes only what the techniques being
  computed declared, and hands each technique a view of the batch that refuses the rest.
- `applies_to`: features the model must have (reportgen.capsnet.description.feature_words:
  FEATURES and the kinds of routing weights the families declare);
  `applicable(description)` is the one test, and `variants(model)` is [] for a model it does
  not apply to.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any, Callable

import numpy as np

from reportgen.capsnet.description import FEATURES, ModelDescription, feature_words
# Figure and RenderContext are the figures' data types; re-exported for older imports.
from reportgen.figures.figure import Figure, RenderContext  # noqa: F401
from reportgen.probe.probe import expand_needs

LAYERS = ("model", "conv", "primary", "convcaps", "class", "decoder")
SCOPES = ("input", "checkpoint", "dataset")


def model_description(model) -> ModelDescription:
    """The ModelDescription of `model`: a description itself, or anything with one (a CapsNet)."""
    if isinstance(model, ModelDescription):
        return model
    description = getattr(model, "description", None)
    if isinstance(description, ModelDescription):
        return description
    raise TypeError("Expected a ModelDescription or a built model with a `description`. "
                    f"Received: {type(model).__name__}")


class ModelVariants:
    """`technique.variants(model)`: the params instances to compute for a model (a CapsNet or a
    ModelDescription): [] when the technique does not apply to it, else what the module's
    `variants(description)` chooses (e.g. one per conv layer); [] too for a model (with its
    parameters) trained on another number of classes per image than `labels`."""

    def __init__(self, technique: str, applies_to: frozenset[str], choose: Callable,
                 labels: tuple[int, ...] = (1, 2), unsuited: Callable | None = None):
        self.technique = technique
        self.applies_to = applies_to
        self.choose = choose
        self.labels = labels
        self.unsuited = unsuited

    def __call__(self, model) -> list:
        description = model_description(model)
        if not self.applies_to <= description.features:
            return []
        if self.unsuited is not None and self.unsuited(description) is not None:
            return []
        params = getattr(model, "params", None)
        if params is not None:
            from reportgen.data.label_arity import model_label_arity

            if model_label_arity(params) not in self.labels:
                return []
        return list(self.choose(description))

    def __repr__(self) -> str:
        return f"ModelVariants({self.technique})"


def _one_default(description) -> list:
    return [None]


@dataclass(frozen=True)
class Technique:
    name: str                          # module, template, test, cache namespace and URL anchor
    title: str                         # as in the papers / the README's technique table
    layer: str                         # one of LAYERS
    scope: str                         # one of SCOPES
    needs: frozenset[str] | Callable[..., frozenset[str]]
    """Probe tensors read, or (params) -> them when they depend on the options, or
    (params, description) -> them when they also depend on the model (e.g. its capsule
    family)."""
    applies_to: frozenset[str]         # FEATURES a model must have; frozenset() = every model
    params_type: type                  # frozen dataclass of options; hashed into the cache key
    version: int                       # bump when code outside its own modules changes its numbers
    compute: Callable[..., dict[str, np.ndarray]]     # (batch: ProbeBatch, params) -> arrays
    render: Callable[..., list[Figure]]               # (arrays of ONE item, params, ctx) -> figures
    variants: Callable[..., list[Any]] = _one_default
    """(description) -> the params instances to compute for a model; after construction,
    `technique.variants(model)` also returns [] where the technique does not apply."""
    experimental: bool = False         # opt-in (e.g. activation maximization)
    analysed_steps_only: bool = False
    """Checkpoint and input scope: computed only at the steps with dataset analyses (what is too
    heavy to ship at every step: the live decoder's weights, the perturbation grids)."""
    last_step_only: bool = False
    """Checkpoint and input scope: computed only at the last of a model's chosen steps, the
    network as trained (what is too heavy for even the analysed steps: the draw panel's whole
    network)."""
    # Dataset scope only (all optional):
    summarize: Callable[..., dict] | None = None
    """(arrays, params) -> JSON-ready dict of the headline numbers (exported as JSON and CSV)."""
    render_trend: Callable[..., list[Figure]] | None = None
    """([(step, summary dict)], params, ctx) -> figures of how the numbers evolve over steps."""
    render_compare: Callable[..., list[Figure]] | None = None
    """([(model, summary dict)], params, ctx) -> figures overlaying models (one step each)."""
    description: str = ""              # one paragraph: what it shows and where it comes from
    labels: tuple[int, ...] | None = None
    """The classes per image of the models it applies to (reportgen.data.label_arity: 1, or 2 for
    overlapping digits). None: a dataset analysis scores one class per image, (1,); an input or
    checkpoint analysis reads no label, (1, 2)."""
    numbers: Callable[..., dict] | None = None
    """(arrays of one item, params, ctx) -> the JSON-ready numbers other pages read
    (`Panel.numbers`: class capsules' poses, the live decoder's manifest), handed on as data
    rather than read back from the figures; a dataset technique's are its `summarize`."""
    data: Callable[..., dict] | None = None
    """(arrays of one item, params, ctx) -> bulky JSON-ready data one page reads (`Panel.data`:
    the live decoder's quantised weights); kept in the store, not in the site's record."""
    page_layer: Callable[..., str] | None = None
    """(params) -> the layer page of one variant when variants belong on different pages
    (capsule heatmaps of the primary and of the convolutional capsule layers); else `layer`."""
    title_for: Callable[..., str] | None = None
    """(params) -> the title of one variant where it is not `title` (the capsule heatmaps of a
    convolutional capsule layer are not primary-capsule heatmaps)."""
    unsuited: Callable[..., str | None] | None = None
    """(description) -> why the technique means nothing for this model although it has the
    features `applies_to` names, as a plain clause ("its input is 12x12, not the benchmark's
    40x40"), or None when it suits the model; the plan reports it as "not applicable"."""
    citations: tuple[str, ...] = ()
    """The BibTeX entries of the papers the method comes from (reportgen.bibtex); "About the
    methods" and the supplement's references.bib cite them. () cites nothing."""
    may_hold_nan: tuple[tuple[str, str], ...] | None = None
    """(array name, why) pairs: the result's arrays where NaN means something, and what ("*":
    every array); any other NaN fails the technique (reportgen.engine.result_checks). None:
    not declared (no NaN anywhere, for reportgen's own the NaN their modules document)."""

    def __post_init__(self):
        if self.layer not in LAYERS:
            raise ValueError(f"Technique {self.name}: layer must be one of {LAYERS}. "
                             f"Received: {self.layer}")
        if self.scope not in SCOPES:
            raise ValueError(f"Technique {self.name}: scope must be one of {SCOPES}. "
                             f"Received: {self.scope}")
        applies_to = frozenset(self.applies_to)
        # the routing kinds (declared by the families) are looked up only when needed
        unknown = sorted(applies_to - set(FEATURES))
        if unknown:
            unknown = sorted(applies_to - set(feature_words()))
        if unknown:
            raise ValueError(f"Technique {self.name}: applies_to must name features of "
                             f"{sorted(feature_words())}. Received: {unknown}")
        object.__setattr__(self, "applies_to", applies_to)
        if not callable(self.needs):
            object.__setattr__(self, "needs", frozenset(self.needs))
        choose = self.variants.choose if isinstance(self.variants, ModelVariants) \
            else self.variants
        if self.labels is None:
            object.__setattr__(self, "labels", (1,) if self.scope == "dataset" else (1, 2))
        object.__setattr__(self, "variants",
                           ModelVariants(self.name, applies_to, choose, tuple(self.labels),
                                         self.unsuited))
        from reportgen.bibtex import check_entries

        check_entries(self.citations, f"Technique {self.name}")
        object.__setattr__(self, "citations", tuple(self.citations))

    def title_of(self, params) -> str:
        """The title of one variant: `title_for(params)`, else `title` (also for params None:
        a trend or compare panel over several variants)."""
        return self.title_for(params) if self.title_for is not None and params is not None \
            else self.title

    def layer_for(self, params) -> str:
        """The layer page a variant's results are shown on."""
        layer = self.page_layer(params) if self.page_layer is not None else self.layer
        if layer not in LAYERS:
            raise ValueError(f"Technique {self.name}: page_layer must return one of {LAYERS}. "
                             f"Received: {layer}")
        return layer

    def applicable(self, model) -> bool:
        """True when the model (a ModelDescription, or a CapsNet) has every feature of
        `applies_to` and the technique suits it (`unsuited`)."""
        description = model_description(model)
        return self.applies_to <= description.features and self.unsuited_reason(model) is None

    def unsuited_reason(self, model) -> str | None:
        """Why the technique does not suit a model that has its features (`unsuited`)."""
        if self.unsuited is None:
            return None
        return self.unsuited(model_description(model))

    def missing_features(self, model) -> frozenset[str]:
        """The features of `applies_to` the model lacks (for a "not applicable" note)."""
        return self.applies_to - model_description(model).features

    def needs_for(self, params, model) -> frozenset[str]:
        """The concrete probe tensors this technique reads for `params` on `model`."""
        description = model_description(model)
        names = self.needs
        if callable(names):
            names = names(params, description) if _arity(names) == 2 else names(params)
        return expand_needs(names, description)


def _arity(function) -> int:
    """How many positional arguments `function` takes (1 or 2 for a needs function)."""
    import inspect

    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in inspect.signature(function).parameters.values() if p.kind in kinds)


def lazy(module: str, function: str, default_params: Callable[[], Any] | None = None) -> Callable:
    """A renderer `(data, params, ctx) -> figures` calling `module.function`, imported on the
    first call (a technique module imports without matplotlib or the figures modules).

    With `default_params`, a params of None is replaced by `default_params()` (e.g. Params).
    """
    def call(data, params, ctx):
        if params is None and default_params is not None:
            params = default_params()
        return getattr(import_module(module), function)(data, params, ctx)

    call.__name__ = call.__qualname__ = f"lazy_{function}"
    call.lazy_module = module       # whose source keys its figures (reportgen.engine.code_identity)
    return call
