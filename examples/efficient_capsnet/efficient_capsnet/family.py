"""Efficient-CapsNet (Mazzia, Salvetti & Chiaberge, "Efficient-CapsNet: capsule network with
self-attention routing", Scientific Reports 11, 14634, 2021) as a reportgen model family:
its params.toml table, its description, its parameter count and its checks. Importing this
module imports no TensorFlow; the Keras layers are in efficient_capsnet.layers and the model in
efficient_capsnet.network, imported when a model is built.

The network (the authors' MNIST graph, github.com/EscVM/Efficient-CapsNet,
models/efficient_capsnet_graph_mnist.py):

    conv1..conv4: `[[conv]]` convolutions with bias, each + ReLU + BatchNorm
    primary_conv: a depthwise convolution (`[primary]` kernel, one filter per input channel),
                  linear, with bias: types x dims = the last convolution's channels
    primary_caps: its channels as `types` capsules of `dims` values per grid cell, squashed by
                  Efficient-CapsNet's squash (eq. 2 below)
    class_caps:   one capsule of `[class_caps] dims` per class by self-attention routing
                  (efficient_capsnet.layers.self_attention_routing):
                      u_hat[j|i] = W_ij u_i                                   (votes)
                      A_j = U_j U_j^T / sqrt(D),  U_j = the votes for class j (children x D)
                      c_ij = softmax_j(sum_k A_j[i, k])                        (eq. 3-4)
                      s_j = sum_i (c_ij + b_ij) u_hat[j|i],  v_j = squash(s_j)  (eq. 5)
                  b_ij is the routing bias: added after the softmax
    loss:         margin loss on |v_j| + `[loss] reconstruction_weight` x the mean squared
                  pixel error of the decoder's reconstruction from the true class's capsule
                  (the authors' code: marginLoss + 0.392 x 'mse')

Efficient-CapsNet's squash (eq. 2): squash(s) = (1 - 1/e^|s|) s/|s|.

Its own settings (params.toml `[efficient_capsnet]`):

    batch_norm_momentum = 0.99   # Keras's BatchNormalization default, which the authors use
    squash_epsilon = 1e-20       # the authors' eps in (1 - 1/(e^|s| + eps)) s / (|s| + eps)
    routing_bias = true          # b_ij of eq. 5 (false: the ablation without it)
    learning_rate_decay = 0.97   # learning rate x decay^epoch (the authors' lr_dec) ...
    min_learning_rate = 5e-5     # ... never below this (their scheduler's floor)

Parameters of MNIST_EfficientCaps without the decoder (28x28x1): conv1 5x5x1x32 + 32 = 832,
conv2 3x3x32x64 + 64 = 18,496, conv3 3x3x64x64 + 64 = 36,928, conv4 3x3x64x128 + 128 = 73,856;
their BatchNorm scales and offsets 2 x (32 + 64 + 64 + 128) = 576; the depthwise 9x9 primary
convolution 9x9x128 + 128 = 10,496; W 10x16x8x16 = 20,480 and b 10x16 = 160: 161,824 (the
paper's count). The decoder 160 -> 512 -> 1024 -> 784 adds 1,411,344.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from reportgen.sdk import (XLA, CapsuleLayer, Family, Head, ModelDescription, RoutingWeights,
                           check_primary_fits, conv_grid, conv_stack, decoder_of,
                           decoder_param_count, fail)

NAME = "efficient_capsnet"

CITATION = """@article{mazzia2021efficient,
  title = {Efficient-CapsNet: capsule network with self-attention routing},
  author = {Mazzia, Vittorio and Salvetti, Francesco and Chiaberge, Marcello},
  journal = {Scientific Reports},
  volume = {11},
  pages = {14634},
  year = {2021},
  doi = {10.1038/s41598-021-93977-0}
}"""

# The coupling coefficients c_ij = softmax_j(sum_k A_j[i, k]) (eq. 4): each primary capsule's
# sum to 1 over the classes. They are what the model output "primary_caps_routing" holds; the
# weights the votes are summed with are c_ij + b_ij (eq. 5), in "primary_caps_routing_with_bias".
ROUTING = RoutingWeights(kind="self_attention_routing",
                         words="self-attention coupling coefficients (before the routing bias "
                               "is added)",
                         lacks="self-attention routing", sums_over="parents", paths=True,
                         iterations=0, symbol="c")

# The extra model outputs this family's own technique reads (efficient_capsnet.technique).
BIASED_ROUTING = "primary_caps_routing_with_bias"
OUTPUTS = {BIASED_ROUTING: "(B, primary capsules, classes) c_ij + b_ij: the self-attention "
                           "coupling coefficients after the routing bias is added, the weights "
                           "each vote u_hat[j|i] is summed with (Mazzia et al. 2021, eq. 5)"}

# What a ModelDescription cannot say about this network (one sentence each).
LEAVES_OUT = (
    "Every plain convolution is followed by batch normalization (a trainable scale and offset "
    "per channel, and moving statistics that are not trained).",
    "The primary capsules come from a depthwise convolution: each channel is filtered by its "
    "own kernel, not by a convolution across all channels.",
    "The routing bias b_ij is added to the coupling coefficients after the softmax, so the "
    "votes are summed with c_ij + b_ij, which need not sum to 1; the routing weights shown are "
    "c_ij, before the bias.",
    "The squash is Efficient-CapsNet's (1 - 1/e^|s|) s/|s|, not the squash of Sabour et al. "
    "2017.",
)


@dataclass(frozen=True)
class EfficientCapsNetParams:
    batch_norm_momentum: float = 0.99   # Keras's BatchNormalization default, which the authors use
    squash_epsilon: float = 1e-20       # the authors' eps in (1 - 1/(e^|s| + eps)) s / (|s| + eps)
    routing_bias: bool = True           # b_ij of eq. 5 (false: the ablation without it)
    learning_rate_decay: float = 0.97   # learning rate x decay^epoch (the authors' lr_dec) ...
    min_learning_rate: float = 5e-5     # ... never below this (their scheduler's floor)


def describe(params) -> ModelDescription:
    """The `[[conv]]` layers, the depthwise "primary_conv" forming "primary_caps" (vector
    capsules scored by their length) and the "class_caps" they route into."""
    p = params.primary
    convs = conv_stack(params.input_shape, [
        *((f"conv{i + 1}", c.filters, c.kernel_size, c.strides, c.padding, c.activation, "")
          for i, c in enumerate(params.conv)),
        ("primary_conv", p.types * p.dims, p.kernel_size, p.strides, "valid", p.activation,
         "primary_caps")])
    primary_conv = convs[-1]
    primary = CapsuleLayer(name="primary_caps", pose="vector", grid=primary_conv.grid,
                           types=p.types, pose_size=p.dims, activation="length",
                           routing=ROUTING, receptive_field=primary_conv.receptive_field)
    classes = CapsuleLayer(name="class_caps", pose="vector", grid=None,
                           types=params.num_classes, pose_size=params.class_caps.dims,
                           activation="length")
    return ModelDescription(input_shape=tuple(params.input_shape), conv_layers=convs,
                            capsule_layers=(primary, classes),
                            head=Head(kind="capsules", classes=params.num_classes,
                                      layer="class_caps"),
                            decoder=decoder_of(params,
                                               params.num_classes * params.class_caps.dims),
                            leaves_out=LEAVES_OUT)


def count_params(params) -> int:
    """By arithmetic: each plain convolution's kernel and bias and its BatchNorm's scale and
    offset; the depthwise convolution's k x k kernel per channel and its bias; W (classes x
    children x child dims x dims) and, with the routing bias, b (classes x children); the
    decoder's dense layers."""
    description = describe(params)
    channels, total = description.input_shape[2], 0
    for conv in description.plain_conv_layers:
        total += math.prod(conv.kernel_size) * channels * conv.filters + 3 * conv.filters
        channels = conv.filters
    primary_conv = description.layer("primary_conv")
    total += math.prod(primary_conv.kernel_size) * channels + channels
    primary, classes = description.primary_capsules, description.class_capsules
    children = primary.capsules
    total += classes.types * children * primary.pose_size * classes.pose_size
    if params.family_settings.routing_bias:
        total += classes.types * children
    return total + decoder_param_count(description)


# Settings of the shared `[class_caps]` and `[primary]` tables that mean nothing here.
_NOT_HERE = {"class_caps": {"routing_iterations": "no iterations: the coupling is computed once "
                                                  "from the votes' self-attention",
                            "weight_sharing": "one W_ij per (class, primary capsule)",
                            "routing": "self-attention routing only",
                            "kernel_init_stddev": "W is initialised he_normal, as the authors do",
                            "routing_softmax": "the softmax is over the classes (eq. 4)",
                            "detach_routing_votes": "the gradient flows through the routing"},
             "primary": {"batch_norm": "batch normalization follows the plain convolutions"}}


def check(params, raw: dict, source: str):
    """Refuse shared settings that mean nothing to Efficient-CapsNet; the depthwise primary
    convolution keeps its input's channels, so `types x dims` must equal the last
    convolution's filters; every grid at least 1x1. The primary convolution is linear unless
    `[primary] activation` says otherwise (the shared default is ReLU)."""
    for table, keys in _NOT_HERE.items():
        given = raw.get(table, {})
        for key, why in keys.items():
            if isinstance(given, dict) and key in given:
                raise fail(source, f"{table}.{key}", f"not set (Efficient-CapsNet: {why})",
                           given[key])
    own = params.family_settings
    if not 0 <= own.batch_norm_momentum < 1:
        raise fail(source, f"{NAME}.batch_norm_momentum", "a number in [0, 1)",
                   own.batch_norm_momentum)
    if not 0 < own.learning_rate_decay <= 1:
        raise fail(source, f"{NAME}.learning_rate_decay", "a number in (0, 1]",
                   own.learning_rate_decay)
    h, w = conv_grid(params, source)
    check_primary_fits(params, h, w, source)
    p = params.primary
    if p.types * p.dims != params.conv[-1].filters:
        raise fail(source, "primary.types",
                   f"types x dims = {params.conv[-1].filters}, the last convolution's filters "
                   f"(a depthwise convolution keeps its input's channels)", p.types)
    if "activation" not in (raw.get("primary") or {}):
        params = replace(params, primary=replace(p, activation="none"))
    return params


def build(params):
    from efficient_capsnet.network import build_efficient_capsnet

    return build_efficient_capsnet(params)


def squash(s):
    """Efficient-CapsNet's squash (eq. 2) over the last axis, for the techniques that squash
    for the family (the vote attack's mean votes)."""
    from efficient_capsnet.layers import efficient_squash

    return efficient_squash(s)


# bench/bench_xla.py's measurement on MNIST_EfficientCaps (run with this family registered and
# the model read from this package's models/), 2 busy cores (load 6.8): forward XLA / graph
# 1.16x (496 against 428 images/s, 5.8 s to compile against 1.0 s), forward + backward 0.35x
# (32 against 90): no XLA. The small forward gain does not pay the compilation of each build.
XLA_PASSES = XLA(forward=False, gradients=False)

# A tiny model of the family (params.toml as a dict; reportgen fills in `family` and a
# dataset): reportgen's contract tests build it, run every technique over it, save and load it
# as `.keras` and build it with the default analyses. 28x28 -> conv 5x5 s2 -> 12x12 -> conv
# 3x3 s2 -> 5x5 -> depthwise 5x5 -> 1x1 grid of 4 capsules x 4 dims -> 10 classes x 8.
EXAMPLE = {"input_shape": [28, 28, 1], "num_classes": 10,
           "conv": [{"filters": 8, "kernel_size": 5, "strides": 2},
                    {"filters": 16, "kernel_size": 3, "strides": 2}],
           "primary": {"types": 4, "dims": 4, "kernel_size": 5, "strides": 1},
           "class_caps": {"dims": 8}, "decoder": {"units": [32]},
           "efficient_capsnet": {"batch_norm_momentum": 0.9}}

FAMILY = Family(
    name=NAME, describe=describe, build=build, count_params=count_params,
    display_name=lambda params: "Efficient-CapsNet", table=NAME,
    settings=EfficientCapsNetParams, check=check, routing=(ROUTING,), xla=XLA_PASSES,
    modules=(__name__, "efficient_capsnet.layers", "efficient_capsnet.network",
             "efficient_capsnet.technique", "efficient_capsnet.figures"),
    # the network contract (reportgen.contract): the votes u_hat[j|i] (Network.votes), and
    # the output the family's own technique reads
    citations=(CITATION,), capabilities=frozenset({"votes"}), outputs=OUTPUTS,
    example=EXAMPLE, squash=squash, classification_loss="margin_loss")
