"""reportgen's public surface for model families and techniques: what a family or technique
package imports, in the tree or outside it (as `keras` is the surface over `keras.src`). The
names listed in `__all__` keep their meaning within one `SDK_VERSION`; everything else under
`reportgen` may move.

A family package declares `FAMILY = Family(...)`: its description (`describe(params)` ->
ModelDescription, in the capsule vocabulary below), its Keras network (`build(params)` ->
Network), its parameter count, its citations and a tiny example model; a technique package
declares `TECHNIQUE = Technique(...)`: what it reads (`needs`), what a model must have
(`applies_to`), `compute` and `render`. Both are registered by entry points (CONTRIBUTING.md,
"Add a model family"; examples/ holds two complete packages) and held by `reportgen.sdk.testing`.

The capsule vocabulary (a ModelDescription's CapsuleLayer and Head):
- poses: a vector of any size ("vector"), a p x q matrix ("matrix" with `pose_shape`), or none
  (an activation only);
- activations: the pose's length ("length"), a unit of its own ("logistic") or none
  (pose-only capsules, e.g. LayerNorm-ed poses);
- class scores (Head.readout): the class capsules' length, their activation, or a learnt
  layer reading each class pose out into a logit ("learnt": a capsule head all the same); what
  the encoder returns (Head.scores: "lengths", "activations", "logits", "probabilities") is
  declared and checked on a batch;
- routing weights (RoutingWeights): what they are called, whether routing paths lead through
  them, and how they are normalised (`sums_over`: "parents", "children" or "window";
  ROUTING_SUMS), checked on the network's own tensors;
- a family's own squash (Family.squash) for the techniques that squash for it.

Importing this module imports neither TensorFlow nor matplotlib: the Keras layers and ops
(`Length`, `Mask`, `squash`, `safe_norm`, `margin_loss`, `reconstruction_loss`) and the
drawing helpers (`new_figure`, `figure_pair`, `legend_below`, `style_axes`, `styled`) are
loaded on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from reportgen.capsnet.description import (ACTIVATION_KINDS, HEAD_KINDS, INPUT_FIELD, POSE_KINDS,
                                           READOUTS, ROUTING_SUMS, SCORE_KINDS, CapsuleLayer,
                                           ConvLayer, DecoderDescription, Head, ModelDescription,
                                           ReceptiveField, RoutingWeights, capsule_convs,
                                           conv_output, conv_stack, decoder_of, describe,
                                           parents_per_child, routing_spread)
from reportgen.capsnet.network import (Network, build_decoder, capsule_losses,
                                       conv_param_count, decoder_param_count, dense_param_count)
from reportgen.capsnet.param_count import count_trainable_params
from reportgen.errors import ReportgenError
from reportgen.figures.figure import Figure, RenderContext
from reportgen.probe.probe import ProbeBatch
from reportgen.results.references import cite
from reportgen.sdk.protocols import (Build, Compute, CountParams, Describe, Render, Summarize,
                                     Variants)
from reportgen.settings.families import XLA, Family, FamilyCosts
from reportgen.settings.model_params import (DecoderParams, check_primary_fits, choices,
                                             conv_grid, fail, load_model_params,
                                             parse_model_params, parse_section)
from reportgen.techniques.base import Technique, lazy

# Bumped when a name of `__all__` changes its meaning or goes; a package may check it.
SDK_VERSION = 1

# Loaded on first use (they import Keras or matplotlib): name -> "module:attribute".
_LAZY = {
    "Length": "reportgen.capsnet.layers:Length",
    "Mask": "reportgen.capsnet.layers:Mask",
    "squash": "reportgen.capsnet.ops:squash",
    "safe_norm": "reportgen.capsnet.ops:safe_norm",
    "margin_loss": "reportgen.capsnet.losses:margin_loss",
    "reconstruction_loss": "reportgen.capsnet.losses:reconstruction_loss",
    "new_figure": "reportgen.figures.encode:new_figure",
    "figure_pair": "reportgen.figures.plots:figure_pair",
    "legend_below": "reportgen.figures.plots:legend_below",
    "style_axes": "reportgen.figures.plots:style_axes",
    "styled": "reportgen.figures.plots:styled",
}

if TYPE_CHECKING:
    from reportgen.capsnet.layers import Length, Mask
    from reportgen.capsnet.losses import margin_loss, reconstruction_loss
    from reportgen.capsnet.ops import safe_norm, squash
    from reportgen.figures.encode import new_figure
    from reportgen.figures.plots import figure_pair, legend_below, style_axes, styled

__all__ = [
    "SDK_VERSION",
    # declarations
    "Family", "FamilyCosts", "XLA", "Technique", "lazy", "cite",
    # the capsule vocabulary
    "ModelDescription", "ConvLayer", "CapsuleLayer", "RoutingWeights", "Head",
    "DecoderDescription", "ReceptiveField", "POSE_KINDS", "ACTIVATION_KINDS", "HEAD_KINDS",
    "READOUTS", "SCORE_KINDS", "ROUTING_SUMS", "INPUT_FIELD",
    "conv_stack", "capsule_convs", "conv_output", "decoder_of", "describe", "parents_per_child",
    "routing_spread",
    # the network
    "Network", "capsule_losses", "build_decoder", "decoder_param_count", "dense_param_count",
    "conv_param_count", "count_trainable_params",
    # settings
    "fail", "choices", "conv_grid", "check_primary_fits", "load_model_params", "parse_model_params",
    "parse_section", "DecoderParams",
    # techniques and figures
    "ProbeBatch", "Figure", "RenderContext",
    # signatures
    "Describe", "Build", "CountParams", "Compute", "Render", "Summarize", "Variants",
    # errors
    "ReportgenError",
    # loaded on first use
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'reportgen.sdk' has no attribute '{name}'")
    module, attribute = target.split(":")
    value = getattr(import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
