"""The signatures of what a family and a technique declare, as Protocols a type checker holds
a package's functions to (`Family(describe=..., build=...)`, `Technique(compute=...,
render=...)`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from reportgen.capsnet.description import ModelDescription
    from reportgen.capsnet.network import Network
    from reportgen.figures.figure import Figure, RenderContext
    from reportgen.settings.model_params import ModelParams


class Describe(Protocol):
    """params -> the model's description, without TensorFlow (Family.describe)."""

    def __call__(self, params: ModelParams, /) -> ModelDescription: ...


class Build(Protocol):
    """params -> the built Keras network, its layers made from the description (Family.build)."""

    def __call__(self, params: ModelParams, /) -> Network: ...


class CountParams(Protocol):
    """params -> trainable parameters, by arithmetic (Family.count_params)."""

    def __call__(self, params: ModelParams, /) -> int: ...


class Variants(Protocol):
    """description -> the option sets to compute for the model (Technique.variants)."""

    def __call__(self, description: ModelDescription, /) -> Sequence[Any]: ...


class Compute(Protocol):
    """(a probe batch — or an evaluation batch for a dataset technique — and the options) ->
    float32 arrays, batch axis first for an input technique (Technique.compute)."""

    def __call__(self, batch: Any, params: Any, /) -> Mapping[str, np.ndarray]: ...


class Render(Protocol):
    """(the arrays of ONE result, the options, what a renderer may know) -> figures
    (Technique.render); never touches TensorFlow."""

    def __call__(self, arrays: Mapping[str, np.ndarray], params: Any,
                 ctx: RenderContext, /) -> list[Figure]: ...


class Summarize(Protocol):
    """(a dataset technique's arrays, the options) -> JSON-ready headline numbers
    (Technique.summarize)."""

    def __call__(self, arrays: Mapping[str, np.ndarray], params: Any, /) -> dict: ...
