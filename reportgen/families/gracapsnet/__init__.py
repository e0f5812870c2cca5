"""GraCapsNet (Gu, Wu & Tresp, AAAI 2021; Gu 2022, Ch.4): the CapsNet's conv layers and primary
capsules, then multi-head graph pooling (one head per capsule type) instead of routing; the
attention over the grid nodes is the routing weight (reportgen.families.gracapsnet.layers, the
Keras model in reportgen.families.gracapsnet.network). `[gracapsnet]`… no: its table is `[graph]`.

Parameters on MNIST without the decoder (conv 3x3 s1 256, primary conv 3x3 s2 256 = 32 heads x
8 dims on a 12x12 grid, class capsules 10 x 16): 2,560 + 590,080 + 4,608 x 16 x 8 projections
+ 16 x 10 pooling = 1,182,624 (Gu: 1.18M).
"""

from __future__ import annotations

from dataclasses import dataclass

from reportgen.sdk import (XLA, CapsuleLayer, Family, Head, ModelDescription, ReportgenError,
                           RoutingWeights, capsule_convs, check_primary_fits, cite, conv_grid,
                           conv_param_count, decoder_of, decoder_param_count)

NAME = "gracapsnet"
# Graph pooling's attention Att^l: per head and class, a softmax over the grid nodes, so each
# parent's weights over its children sum to 1; they pool, rather than route each child to
# its parents, so no routing path is followed through them.
GRAPH_ATTENTION = RoutingWeights(kind="attention", words="attention weights",
                                 lacks="graph-pooling attention of GraCapsNet (Gu, Wu & Tresp "
                                       "2021)", sums_over="children", paths=False,
                                 symbol="Att", output="attention")


@dataclass(frozen=True)
class GraphParams:
    """GraCapsNet's graph pooling: the Gaussian adjacency A_pq = exp(-|p - q|^2 / (2 sigma^2))
    over grid positions p, q (in grid cells). Gu, Wu & Tresp do not publish sigma."""

    sigma: float = 2.0                  # the adjacency's width, in grid cells


def describe(params) -> ModelDescription:
    """The same conv and primary capsules as the CapsNet, then graph pooling whose attention
    over the grid nodes is the routing weight; optional decoder."""
    sigma = params.family_settings.sigma
    if sigma <= 0:
        raise ReportgenError("Invalid model parameter 'graph.sigma'.",
                             expected="a number > 0 (grid cells)", received=repr(sigma))
    p = params.primary
    convs = capsule_convs(params, p.dims, p.activation)
    primary = CapsuleLayer(name="primary_caps", pose="vector", grid=convs[-1].grid,
                           types=p.types, pose_size=p.dims, activation="length",
                           routing=GRAPH_ATTENTION, receptive_field=convs[-1].receptive_field)
    classes = CapsuleLayer(name="class_caps", pose="vector", grid=None,
                           types=params.num_classes, pose_size=params.class_caps.dims,
                           activation="length")
    return ModelDescription(input_shape=tuple(params.input_shape), conv_layers=convs,
                            capsule_layers=(primary, classes),
                            head=Head(kind="capsules", classes=params.num_classes,
                                      layer="class_caps"),
                            decoder=decoder_of(params,
                                               params.num_classes * params.class_caps.dims))


def count_params(params) -> int:
    description = describe(params)
    primary = description.primary_capsules
    classes = description.class_capsules
    return (conv_param_count(description)
            + primary.capsules * classes.pose_size * primary.pose_size   # u'_i = W_i u_i
            + classes.pose_size * classes.types                          # W of the pooling
            + decoder_param_count(description))


def check(params, raw, source: str):
    check_primary_fits(params, *conv_grid(params, source), source)
    return params


def build(params):
    from reportgen.families.gracapsnet.network import build_gracapsnet

    return build_gracapsnet(params)


# bench/bench_xla.py on MNIST_GraCaps, XLA / the best of eager and tf.function, busy 2-core
# CPU: forward 0.68x, forward + backward 0.93x: no XLA.
XLA_PASSES = XLA(forward=False, gradients=False)


# A tiny model for the contract tests (Family.example): 12x12 -> conv 10x10 -> primary (kernel
# 3, stride 2) 4x4 grid x 4 heads -> 3 classes x 4D
EXAMPLE = {"input_shape": [12, 12, 1], "num_classes": 3,
           "conv": [{"filters": 8, "kernel_size": 3}],
           "primary": {"types": 4, "dims": 4, "kernel_size": 3, "strides": 2},
           "class_caps": {"dims": 4}, "graph": {"sigma": 1.5}, "decoder": {"units": [16]}}

# Its built-in explanation E (Gu, Wu & Tresp 2021, eq. 9) is a model output; the attention of
# every head is its own output, read by its own technique (gracaps_attention).
FAMILY = Family(name=NAME, describe=describe, build=build, count_params=count_params,
                display_name=lambda params: "GraCapsNet", table="graph", settings=GraphParams,
                check=check, routing=(GRAPH_ATTENTION,), xla=XLA_PASSES,
                capabilities={"explanation"},
                outputs={"attention": "(B, heads, gh*gw, classes) the graph-pooling attention "
                                      "Att^l of each head over the primary grid's nodes"},
                citations=cite("gu2021graph"), example=EXAMPLE, classification_loss="margin_loss",
                modules=(__name__, f"{__name__}.network", f"{__name__}.layers"))
