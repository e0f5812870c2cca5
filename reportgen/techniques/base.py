"""What a technique is: one declaration per module (see reportgen/techniques/__init__.py).

A technique turns a ProbeBatch (tensors of one forward/backward pass over a batch of images,
for one model at one training step) into a dict of float32 arrays with the batch axis first
(scope "input"), or into arrays about the checkpoint itself (scope "checkpoint", computed once
per model step, e.g. conv kernels), or into dataset-level numbers over an evaluation set (scope
"dataset": compute receives a reportgen.probe.evaluation.EvalBatch; e.g. robustness curves). `render` draws one result (one image's slice) into figures;
it never touches TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, Callable

import numpy as np

LAYERS = ("model", "conv", "primary", "class", "decoder")
SCOPES = ("input", "checkpoint", "dataset")


@dataclass(frozen=True)
class Figure:
    """One drawn file of a result. `kind` is "png" (site) or "svg"/"pdf" (paper figure)."""

    name: str             # file-name-safe, unique within one result, e.g. "heatmaps.png"
    data: bytes
    kind: str = "png"
    caption: str = ""     # what it shows: technique, options, normalisation
    width: int = 0        # pixel size of PNGs (for the page's img tags)
    height: int = 0


@dataclass(frozen=True)
class RenderContext:
    """What a renderer may know besides the arrays: labels for captions and axes."""

    model: str
    step: str
    class_names: tuple[str, ...]
    input_label: str = ""                     # e.g. "test #12 (rot90)"; "" for checkpoint scope
    image: np.ndarray | None = None           # the input image (H, W, C) in [0, 1], for overlays
    receptive_fields: tuple[tuple[int, int, int], ...] = ()   # (start, size, stride) per conv layer
    conv_layer_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Technique:
    name: str                          # module, template, test, cache namespace and URL anchor
    title: str                         # as in SPEC §3
    layer: str                         # one of LAYERS
    scope: str                         # one of SCOPES
    needs: frozenset[str]              # probe tensors read (see reportgen.probe.probe.TENSORS)
    params_type: type                  # frozen dataclass of options; hashed into the cache key
    version: int                       # bump when the numbers change
    compute: Callable[..., dict[str, np.ndarray]]     # (batch: ProbeBatch, params) -> arrays
    render: Callable[..., list[Figure]]               # (arrays of ONE item, params, ctx) -> figures
    variants: Callable[..., list[Any]] = field(default=lambda net: [None])
    """(net) -> the params instances to compute for this model ([] = not applicable)."""
    experimental: bool = False         # opt-in (e.g. activation maximization)
    # Dataset scope only (all optional):
    summarize: Callable[..., dict] | None = None
    """(arrays, params) -> JSON-ready dict of the headline numbers (exported as JSON and CSV)."""
    render_trend: Callable[..., list[Figure]] | None = None
    """([(step, summary dict)], params, ctx) -> figures of how the numbers evolve over steps."""
    render_compare: Callable[..., list[Figure]] | None = None
    """([(model, summary dict)], params, ctx) -> figures overlaying models (one step each)."""
    description: str = ""              # one paragraph: what it shows and where it comes from

    def __post_init__(self):
        if self.layer not in LAYERS:
            raise ValueError(f"Technique {self.name}: layer must be one of {LAYERS}. "
                             f"Received: {self.layer}")
        if self.scope not in SCOPES:
            raise ValueError(f"Technique {self.name}: scope must be one of {SCOPES}. "
                             f"Received: {self.scope}")


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
    return call
