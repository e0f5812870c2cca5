"""Sabour, Frosst & Hinton 2017's CapsNet (the default family): `[[conv]]`, `[primary]`,
`[class_caps]`, `[decoder]`. Gu 2022's No-R (`class_caps.routing = "none"`: uniform coupling
coefficients) and Aff-CapsNet (`class_caps.weight_sharing = "all"`: one transformation matrix
per class, shared by every primary capsule) are settings of it."""

from __future__ import annotations

import math

from reportgen.sdk import (XLA, CapsuleLayer, Family, FamilyCosts, Head, ModelDescription,
                           RoutingWeights, capsule_convs, check_primary_fits, cite, conv_grid,
                           decoder_of)

NAME = "capsnet"


def dynamic_routing(iterations: int, softmax: str = "classes") -> RoutingWeights:
    """The coupling coefficients c_ij of dynamic routing (Sabour et al. 2017, Procedure 1)
    after `iterations` iterations (1: uniform, Gu 2022's No-R). `softmax` "classes": each
    primary capsule's couplings sum to 1 (the paper); "inputs": each class's couplings over
    the primary capsules do (some PyTorch implementations a model can be imported from)."""
    return RoutingWeights(kind="dynamic_routing", words="coupling coefficients of dynamic routing",
                          lacks="dynamic routing",
                          sums_over="parents" if softmax == "classes" else "children",
                          paths=True, iterations=iterations, symbol="c", output="coupling")


# `primary.batch_norm` (Gu's capsule code) is not a layer of the description.
PRIMARY_BATCH_NORM = ("BatchNorm of the primary capsules' channels before the squash: the "
                      "primary convolution's maps shown are before it.",)


def describe(params) -> ModelDescription:
    """Conv layers, primary capsules formed by a conv, class capsules by dynamic routing
    (`routing_iterations`; 1 = uniform couplings), and an optional decoder."""
    p, c = params.primary, params.class_caps
    convs = capsule_convs(params, p.dims, p.activation)
    primary_conv = convs[-1]
    primary = CapsuleLayer(name="primary_caps", pose="vector", grid=primary_conv.grid,
                           types=p.types, pose_size=p.dims, activation="length",
                           routing=dynamic_routing(
                               1 if c.routing == "none" else c.routing_iterations,
                               c.routing_softmax),
                           receptive_field=primary_conv.receptive_field)
    classes = CapsuleLayer(name="class_caps", pose="vector", grid=None,
                           types=params.num_classes, pose_size=c.dims, activation="length")
    return ModelDescription(input_shape=tuple(params.input_shape), conv_layers=convs,
                            capsule_layers=(primary, classes),
                            head=Head(kind="capsules", classes=params.num_classes,
                                      layer="class_caps"),
                            decoder=decoder_of(params, params.num_classes * c.dims),
                            leaves_out=PRIMARY_BATCH_NORM if p.batch_norm else ())


def count_params(params) -> int:
    channels = params.input_shape[2]
    total = 0
    for c in params.conv:
        total += c.kernel_size ** 2 * channels * c.filters + c.filters
        channels = c.filters
    p = params.primary
    total += p.kernel_size ** 2 * channels * p.types * p.dims + p.types * p.dims
    h, w = describe(params).primary_capsules.grid
    sharing = params.class_caps.weight_sharing      # "all": one matrix per class (Gu 2022)
    matrices = 1 if sharing == "all" else p.types if sharing else h * w * p.types
    total += matrices * params.num_classes * params.class_caps.dims * p.dims
    if params.decoder.enabled:
        width = params.num_classes * params.class_caps.dims
        for units in (*params.decoder.units, math.prod(params.input_shape)):
            total += width * units + units
            width = units
    return total


def display_name(params) -> str:
    """Its kind in Gu 2022's tables (Ch.5 Table 1)."""
    c = params.class_caps
    no_routing = c.routing == "none" or c.routing_iterations == 1
    if c.weight_sharing == "all":
        return "Aff-CapsNet" if no_routing else "Aff-CapsNet-DR"
    return "CapsNet-NoR" if no_routing else "CapsNet"


def check(params, raw, source: str):
    check_primary_fits(params, *conv_grid(params, source), source)
    return params


def build(params):
    from reportgen.families.capsnet.network import build_vector_capsnet

    return build_vector_capsnet(params)


# Seconds per unit at MNIST_Demo's size on the reference CPU (reportgen.commands.build_time):
# the mean of three cold `reportgen demo` builds (302 to 365 s); the dataset analyses' kinds
# since their figures are drawn in a worker while the next analysis computes
# (reportgen.pages.drawing_pool): `reportgen demo` on a fresh clone of the idle machine measured
# 2.34 s waiting for the figures per analysed step (11.7 s drawing them without the worker) and
# 0.34 s per evaluation image, each times REFERENCE_SLOWDOWN over the probe's 1.1x slowness.
COSTS = FamilyCosts(reference={"model": 6.9, "step": 0.2, "input": 0.098, "analysed_step": 4.2,
                               "eval_image": 0.61})

# bench/bench_xla.py, XLA / the best of eager and tf.function, busy 2-core CPU: forward 1.66x
# (MNIST_Demo), 1.44x (MNIST), 1.54x (MNIST_NoR), 1.37x (MNIST_AffCaps); forward + backward
# 0.31x, 0.04x, 0.05x, 0.05x (XLA's CPU backward of the 9x9 convolutions).
XLA_PASSES = XLA(forward=True, gradients=False)

def setting_citations(params) -> tuple[str, ...]:
    """Gu's No-R and Aff-CapsNet variants (settings of Sabour et al.'s network) cite Gu."""
    if display_name(params) == "CapsNet":
        return ()
    return cite("gu2021capsule", "gu2022explainability")


# A tiny model for the contract tests (Family.example): 12x12 -> conv 10x10 -> primary (kernel
# 3, stride 2) 4x4 grid x 4 types -> 3 classes x 4D
EXAMPLE = {"input_shape": [12, 12, 1], "num_classes": 3,
           "conv": [{"filters": 8, "kernel_size": 3}],
           "primary": {"types": 4, "dims": 4, "kernel_size": 3, "strides": 2},
           "class_caps": {"dims": 4}, "decoder": {"units": [16]}}

FAMILY = Family(name=NAME, describe=describe, build=build, count_params=count_params,
                display_name=display_name, check=check, costs=COSTS, xla=XLA_PASSES,
                routing=(dynamic_routing(3),), capabilities={"votes"},
                citations=cite("sabour2017dynamic"), setting_citations=setting_citations,
                example=EXAMPLE, modules=(__name__, f"{__name__}.network", f"{__name__}.layers",
                         f"{__name__}.routing"),
                classification_loss="margin_loss")
