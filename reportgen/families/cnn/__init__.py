"""The CNN baselines of Gu 2022 (dissertation, Ch.5; Gu & Tresp, CVPR 2020): the conv layers
`[[conv]]`, then the head `[cnn]` (the Keras model and the heads' maths in
reportgen.families.cnn.network). No capsules: a head of logits; the heads "r", "cr" and "cr_sf"
have classes x dims feature units (`class_caps.dims`), the counterpart of the class capsules."""

from __future__ import annotations

import math
from dataclasses import dataclass

from reportgen.sdk import (XLA, Family, FamilyCosts, Head, ModelDescription, choices, cite,
                           conv_grid, conv_param_count, conv_stack, decoder_of, decoder_param_count,
                           dense_param_count)

NAME = "cnn"
# The heads (Gu 2022, Ch.5):
#   avg:   global average pooling of the last conv layer + FC(classes), softmax cross-entropy
#   fc:    flatten + FC(dense...) + FC(classes), softmax cross-entropy
#   r:     flatten + FC(classes*dims) + FC(classes); reconstruction from all classes*dims units
#   cr:    flatten + FC(classes*dims) seen as classes x dims; class score = sigmoid(sum of the
#          class's dims); reconstruction from the true (at evaluation: the top) class's dims only
#   cr_sf: cr with the squash: the last conv's channels squashed as vectors of `vector_dims`,
#          FC(classes*dims) without bias, each class's dims squashed; score = the length
#          (= a CapsNet with uniform coupling coefficients, No-R)
CNN_HEADS = ("avg", "fc", "r", "cr", "cr_sf")
# Their names in Gu 2022's tables.
HEAD_NAMES = {"avg": "ConvNet-Avg", "fc": "ConvNet-FC", "r": "ConvNet-R", "cr": "ConvNet-CR",
              "cr_sf": "ConvNet-CR-SF"}


@dataclass(frozen=True)
class CNNParams:
    head: str = choices("avg", CNN_HEADS)   # one of the heads above (Gu 2022, Ch.5)
    dense: tuple[int, ...] = ()       # hidden FC units of the "fc" head (Gu: [328, 192])
    vector_dims: int = 8              # "cr_sf": the squashed vectors' size (primary capsules)


def describe(params) -> ModelDescription:
    """The conv layers, then a head of logits. "cr" and "cr_sf" reconstruct from the masked
    features of one class (a decoder the analyses can use), "r" from all of them (trained with
    it, but not class-conditional: not described)."""
    convs = conv_stack(params.input_shape, [
        (f"conv{i + 1}", conv.filters, conv.kernel_size, conv.strides, conv.padding,
         conv.activation, "") for i, conv in enumerate(params.conv)])
    head = params.family_settings.head
    dims = params.class_caps.dims
    features = {"r": (1, params.num_classes * dims), "cr": (params.num_classes, dims),
                "cr_sf": (params.num_classes, dims)}.get(head)
    decoder = decoder_of(params, params.num_classes * dims) if head in ("cr", "cr_sf") else None
    return ModelDescription(input_shape=tuple(params.input_shape), conv_layers=convs,
                            capsule_layers=(), head=Head(kind="logits",
                                                         classes=params.num_classes,
                                                         layer="logits"),
                            decoder=decoder, class_features=features)


def count_params(params) -> int:
    description = describe(params)
    cnn = params.family_settings
    head, classes, dims = cnn.head, params.num_classes, params.class_caps.dims
    last = description.conv_layers[-1]
    flat = last.grid[0] * last.grid[1] * last.filters
    total = conv_param_count(description)
    if head == "avg":
        total += dense_param_count([last.filters, classes])
    elif head == "fc":
        total += dense_param_count([flat, *cnn.dense, classes])
    else:
        total += dense_param_count([flat, classes * dims], bias=head != "cr_sf")
        if head == "r":
            total += dense_param_count([classes * dims, classes])
            if params.decoder.enabled:   # the unmasked reconstruction (not in the description)
                total += dense_param_count([classes * dims, *params.decoder.units,
                                            math.prod(params.input_shape)])
    return total + decoder_param_count(description)


def check(params, raw, source: str):
    conv_grid(params, source)         # no primary capsules
    return params


def build(params):
    from reportgen.families.cnn.network import build_cnn

    return build_cnn(params)


# Seconds per unit at MNIST_Demo's size on the reference CPU (reportgen.commands.build_time),
# from a cold build of MNIST_ConvNet_R (Gu's 8.2 M-parameter baseline, the size users build) on
# the idle machine, each measured cost times REFERENCE_SLOWDOWN (the reference costs are kept
# as measured under load 3-5). A 27 k-parameter CNN's dataset analyses cost a third of this per
# image: the estimate of such a tiny build errs high, by seconds. The dataset analyses' kinds
# are scaled as the capsnet family's were by its measurement with the drawing worker (0.29x,
# 0.72x); not measured for a CNN yet.
COSTS = FamilyCosts(reference={"model": 4.8, "step": 0.18, "input": 0.026,
                               "analysed_step": 2.0, "eval_image": 0.18})

# bench/bench_xla.py on MNIST_ConvNet_R, XLA / the best of eager and tf.function, busy 2-core
# CPU: forward 1.24x; forward + backward 0.04x (XLA's CPU backward of the 9x9 convolutions).
XLA_PASSES = XLA(forward=True, gradients=False)


# A tiny model for the contract tests (Family.example): 12x12 -> conv 10x10x8 -> conv (stride
# 2) 4x4x8 -> class units 3 x 4 (ConvNet-CR)
EXAMPLE = {"input_shape": [12, 12, 1], "num_classes": 3,
           "conv": [{"filters": 8, "kernel_size": 3},
                    {"filters": 8, "kernel_size": 3, "strides": 2}],
           "cnn": {"head": "cr", "dense": [12], "vector_dims": 4}, "class_caps": {"dims": 4},
           "decoder": {"units": [16]}}

FAMILY = Family(name=NAME, describe=describe, build=build, count_params=count_params,
                display_name=lambda params: HEAD_NAMES[params.family_settings.head],
                table="cnn", settings=CNNParams, check=check, costs=COSTS, xla=XLA_PASSES,
                citations=cite("gu2021capsule", "gu2022explainability"), example=EXAMPLE,
                # softmax cross-entropy; the "cr" head's and two labels' sigmoid scores pay the
                # binary cross-entropy summed over the classes; "cr_sf" trains the margin loss
                # (Network.classification_loss, reportgen.families.cnn.network)
                classification_loss="cross_entropy",
                modules=(__name__, f"{__name__}.network", f"{__name__}.layers"))
