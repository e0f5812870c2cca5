"""Capsules with inverted dot-product attention routing (Tsai, Srivastava, Goh & Salakhutdinov,
ICLR 2020) as a reportgen model family: its params.toml table, its description, its parameter
count and its checks. Importing this module imports no TensorFlow; the Keras layers are in
idpa_capsnet.layers and the model in idpa_capsnet.network, imported when a model is built.

The network (the authors' CapsModel, github.com/apple/ml-capsules-inverted-attention-routing,
src/capsule_model.py, with the simple backbone and matrix poses):

    conv1..:      `[[conv]]` convolutions with bias, each + its activation (ReLU)
    primary_conv: a convolution without bias to `[primary] types` x `dims` channels
    primary_caps: each cell's channels as `types` poses of `dims` = q x q values, each
                  LayerNorm'd over its values (learnt scale and offset)
    conv_caps1..: convolutional capsule layers (`[idpa] conv_caps_types`, kernel sizes and
                  strides, valid padding), routed by inverted dot-product attention
    class_caps:   one pose per class, every capsule of the layer below voting for every class
    readout:      a linear map of each class pose to its logit, shared by the classes (16 -> 1)
    loss:         cross-entropy of the softmax of the logits

Inverted dot-product attention routing (the paper's Procedure 1, as the authors' code computes
it; idpa_capsnet.layers): votes v_ij = P_i W_ij (the child's pose matrix times a learnt q x q
matrix), agreement a_ij = <p_j, v_ij> / sqrt(q^2) with the parent's pose of the previous
iteration (none yet: 0, so the first iteration is uniform), r_ij = softmax over the parents j
(in a convolutional layer: over the output types at each output position, one row per window
entry), p_j = LayerNorm(sum_i r_ij v_ij). `[idpa] iterations` (the authors' default 2) of
concurrent routing: each iteration recomputes every layer from the poses of the iteration
before; `sequential_routing = true` finishes each layer's iterations before the next layer.

Its own settings (params.toml `[idpa]`):

    conv_caps_types = [8]          # per convolutional capsule layer: output types ...
    conv_caps_kernel_sizes = [3]   # ... its square kernel over the grid below ...
    conv_caps_strides = [2]        # ... and its stride (valid padding)
    iterations = 2                 # routing iterations (the authors' num_routing)
    sequential_routing = false     # true: one layer at a time (the authors' --sequential_routing)
    layer_norm_epsilon = 1e-5      # torch.nn.LayerNorm's, as the authors use it

Parameters of MNIST_IDPA (28x28): conv1 5x5x1x64 + 64 = 1,664; primary_conv
3x3x64x128 = 73,728 (no bias); its LayerNorm 2 x 16 = 32; conv_caps1 3x3 (kernel) x 8 (in) x
4x4 x 8 (out) = 9,216 + LayerNorm 32; class_caps 4x4x8 = 128 children x 4x4 x 10 = 20,480 +
LayerNorm 32; readout 16 + 1 = 17: 105,201.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from reportgen.sdk import (XLA, CapsuleLayer, DecoderParams, Family, Head, ModelDescription,
                           RoutingWeights, check_primary_fits, conv_grid, conv_stack, fail)

NAME = "idpa"

CITATION = """@inproceedings{tsai2020capsules,
  title = {Capsules with Inverted Dot-Product Attention Routing},
  author = {Tsai, Yao-Hung Hubert and Srivastava, Nitish and Goh, Hanlin and Salakhutdinov, Ruslan},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year = {2020},
  url = {https://openreview.net/forum?id=HJe6uANtwH}
}"""

KIND = "inverted_attention_routing"
_WORDS = "inverted dot-product attention routing weights (a softmax over the parents of each " \
         "child's vote's agreement with the parent's pose)"
_LACKS = "inverted dot-product attention routing"
# Into a convolutional capsule layer: window form (B, Ph, Pw, K, K, Tin, Tout); for every output
# position and every child in its window the weights over the Tout parent types sum to 1
INTO_CONV_CAPS = RoutingWeights(kind=KIND, words=_WORDS, lacks=_LACKS, sums_over="window",
                                paths=True, iterations=2, symbol="r")
# Into the class capsules: (B, children, classes), each child's sum to 1 over the classes
INTO_CLASSES = RoutingWeights(kind=KIND, words=_WORDS, lacks=_LACKS, sums_over="parents",
                              paths=True, iterations=2, symbol="r")

def leaves_out(pose_size: int, concurrent: bool) -> tuple[str, ...]:
    """What a ModelDescription cannot say about this network (one sentence each)."""
    return (
        f"Every capsule layer's poses are LayerNorm'd over their {pose_size} values after each "
        f"routing sum, with a learnt scale and offset per value; the poses shown are after it.",
        f"The capsules have no activation: the class scores are logits, a learnt linear readout "
        f"({pose_size} -> 1, shared by the classes) of the class poses.",
        f"The agreement of a vote with its parent's pose is their dot product divided by "
        f"{math.sqrt(pose_size):g} (the square root of the {pose_size} pose values), as the "
        f"authors' code computes it.",
        *(("Under concurrent routing the class capsules of the last iteration are routed from "
           "the poses of the layer below of the iteration before it; the routing weights shown "
           "for every layer are those of the last iteration.",) if concurrent else ()),
        "The convolution forming the primary capsules has no bias.",
    )


@dataclass(frozen=True)
class IDPAParams:
    conv_caps_types: tuple[int, ...] = (8,)         # per convolutional capsule layer: types,
    conv_caps_kernel_sizes: tuple[int, ...] = (3,)  # its square kernel over the grid below,
    conv_caps_strides: tuple[int, ...] = (2,)       # and its stride (valid padding)
    iterations: int = 2                             # routing iterations (num_routing)
    sequential_routing: bool = False                # one layer at a time, not all per iteration
    layer_norm_epsilon: float = 1e-5                # torch.nn.LayerNorm's


def conv_caps_names(params) -> tuple[str, ...]:
    return tuple(f"conv_caps{i + 1}" for i in range(len(params.family_settings.conv_caps_types)))


def describe(params) -> ModelDescription:
    """The `[[conv]]` layers and "primary_conv" forming "primary_caps"; the convolutional
    capsule layers; "class_caps". Every capsule is a q x q pose matrix without an activation;
    the head reads logits from the class poses through a learnt readout."""
    own, p = params.family_settings, params.primary
    convs = conv_stack(params.input_shape, [
        *((f"conv{i + 1}", c.filters, c.kernel_size, c.strides, c.padding, c.activation, "")
          for i, c in enumerate(params.conv)),
        ("primary_conv", p.types * p.dims, p.kernel_size, p.strides, "valid", p.activation,
         "primary_caps")])
    side = math.isqrt(p.dims)
    pose = dict(pose="matrix", pose_shape=(side, side), pose_size=p.dims, activation="none")
    into_conv = replace(INTO_CONV_CAPS, iterations=own.iterations)
    into_classes = replace(INTO_CLASSES, iterations=own.iterations)
    names = ("primary_caps", *conv_caps_names(params))
    grid, field = convs[-1].grid, convs[-1].receptive_field
    shapes = [(grid, p.types, field, None, None)]
    for types, k, s in zip(own.conv_caps_types, own.conv_caps_kernel_sizes,
                           own.conv_caps_strides):
        grid = tuple((g - k) // s + 1 for g in grid)
        field = field.through((k, k), (s, s), (0, 0))
        shapes.append((grid, types, field, (k, k), (s, s)))
    layers = []
    for index, (name, (grid, types, field, kernel, stride)) in enumerate(zip(names, shapes)):
        last = index == len(names) - 1
        layers.append(CapsuleLayer(name=name, grid=grid, types=types, receptive_field=field,
                                   routing=into_classes if last else into_conv,
                                   kernel_size=kernel, strides=stride, **pose))
    classes = CapsuleLayer(name="class_caps", grid=None, types=params.num_classes,
                           **{**pose, "pose_size": params.class_caps.dims})
    return ModelDescription(input_shape=tuple(params.input_shape), conv_layers=convs,
                            capsule_layers=(*layers, classes),
                            head=Head(kind="capsules", classes=params.num_classes,
                                      layer="class_caps", readout="learnt", scores="logits"),
                            leaves_out=leaves_out(p.dims, not own.sequential_routing))


def count_params(params) -> int:
    """By arithmetic: each plain convolution's kernel and bias; the primary convolution's
    kernel (no bias); per capsule layer its LayerNorm's scale and offset (2 x pose values); per
    convolutional capsule layer W (K x K x Tin x q x q x Tout); the class capsules' W (children
    x q x q x classes); the readout (pose values + 1)."""
    description = describe(params)
    channels, total = description.input_shape[2], 0
    for conv in description.conv_layers:
        total += math.prod(conv.kernel_size) * channels * conv.filters
        total += 0 if conv.capsules else conv.filters
        channels = conv.filters
    capsules = description.capsule_layers
    for below, layer in zip(capsules, capsules[1:]):
        side = math.isqrt(below.pose_size)
        children = below.types * (math.prod(layer.kernel_size) if layer.kernel_size
                                  else math.prod(below.grid))
        total += children * side * side * layer.types
    total += sum(2 * layer.pose_size for layer in capsules)
    return total + description.class_capsules.pose_size + 1


# Settings of the shared tables that mean nothing here.
_NOT_HERE = {
    "class_caps": {"routing_iterations": "its routing iterations are [idpa] iterations",
                   "weight_sharing": "one W per child, kernel position and parent",
                   "routing": "inverted dot-product attention routing only",
                   "kernel_init_stddev": "W is initialised as the authors do",
                   "routing_softmax": "the softmax is over the parents",
                   "detach_routing_votes": "the gradient flows through the routing",
                   "length_epsilon": "the class scores are logits, not lengths"},
    "primary": {"batch_norm": "the primary poses are LayerNorm'd"},
    "loss": {"reconstruction_weight": "no decoder", "m_plus": "the loss is cross-entropy",
             "m_minus": "the loss is cross-entropy", "down_weight": "the loss is cross-entropy"},
}


def check(params, raw: dict, source: str):
    """Refuse shared settings that mean nothing here (the margin loss, the decoder, dynamic
    routing's); the poses are square matrices, the class poses as large as the primary ones;
    the three `[idpa]` lists as long as each other; every grid at least 1x1. The primary
    convolution is linear unless `[primary] activation` says otherwise (the shared default is
    ReLU); there is no decoder."""
    for table, keys in _NOT_HERE.items():
        given = raw.get(table, {})
        for key, why in keys.items():
            if isinstance(given, dict) and key in given:
                raise fail(source, f"{table}.{key}", f"not set (inverted dot-product attention "
                                                      f"routing: {why})", given[key])
    decoder = raw.get("decoder", {})
    if isinstance(decoder, dict) and decoder.get("enabled", False):
        raise fail(source, "decoder.enabled", "false (this family has no decoder; its loss "
                                              "is the cross-entropy of the logits)", True)
    own, p = params.family_settings, params.primary
    side = math.isqrt(p.dims)
    if side * side != p.dims:
        raise fail(source, "primary.dims", "a square number (the poses are q x q matrices: "
                                           "16 for 4x4)", p.dims)
    if params.class_caps.dims != p.dims:
        raise fail(source, "class_caps.dims", f"{p.dims}, the primary poses' size (a vote is "
                                              f"a pose matrix times a square matrix)",
                   params.class_caps.dims)
    lengths = {key: len(getattr(own, key)) for key in ("conv_caps_types",
                                                       "conv_caps_kernel_sizes",
                                                       "conv_caps_strides")}
    if len(set(lengths.values())) != 1:
        raise fail(source, f"{NAME}.conv_caps_kernel_sizes", f"lists as long as "
                                                             f"{NAME}.conv_caps_types "
                                                             f"({lengths['conv_caps_types']})",
                   lengths)
    h, w = conv_grid(params, source)
    check_primary_fits(params, h, w, source)
    grid = ((h - p.kernel_size) // p.strides + 1, (w - p.kernel_size) // p.strides + 1)
    for i, (k, s) in enumerate(zip(own.conv_caps_kernel_sizes, own.conv_caps_strides)):
        if k > min(grid):
            raise fail(source, f"{NAME}.conv_caps_kernel_sizes",
                       f"kernels no larger than their grid (layer {i + 1}: "
                       f"{grid[0]}x{grid[1]})", list(own.conv_caps_kernel_sizes))
        grid = tuple((g - k) // s + 1 for g in grid)
    if own.layer_norm_epsilon <= 0:
        raise fail(source, f"{NAME}.layer_norm_epsilon", "a positive number",
                   own.layer_norm_epsilon)
    params = replace(params, decoder=DecoderParams(enabled=False))
    if "activation" not in (raw.get("primary") or {}):
        params = replace(params, primary=replace(p, activation="none"))
    return params


def build(params):
    from idpa_capsnet.network import build_idpa

    return build_idpa(params)


# Measured on MNIST_IDPA with this package's own script (bench/bench_xla.py reads only
# reportgen's models/), 2 cores at load 2-4: a forward pass of 256 images XLA / graph 1.7-2.5x
# (569-621 against 247-335 images/s) but 8 s more to compile (11.5 s against 3.3 s); training
# by reportgen's trainer, 3 epochs on 4,000 digits: 31.3 s with `[training] xla = true`, 34.2 s
# without, compilation included. Neither pays the compilation of every build: no XLA.
XLA_PASSES = XLA(forward=False, gradients=False)

# A tiny model of the family (params.toml as a dict; reportgen fills in `family` and a
# dataset): reportgen's contract tests build it, run every technique over it, save and load it
# as `.keras` and build it with the default analyses. 28x28 -> conv 5x5 s2 -> 12x12x8 ->
# primary 3x3 s2 -> 5x5 grid of 4 types of 4x4 poses -> conv caps 3x3 s1 -> 3x3 x 4 -> 10
# classes.
EXAMPLE = {"input_shape": [28, 28, 1], "num_classes": 10,
           "conv": [{"filters": 8, "kernel_size": 5, "strides": 2}],
           "primary": {"types": 4, "dims": 16, "kernel_size": 3, "strides": 2},
           "class_caps": {"dims": 16},
           "idpa": {"conv_caps_types": [4], "conv_caps_kernel_sizes": [3],
                    "conv_caps_strides": [1]}}

FAMILY = Family(
    name=NAME, describe=describe, build=build, count_params=count_params,
    display_name=lambda params: "IDPA-CapsNet", table=NAME, settings=IDPAParams, check=check,
    routing=(INTO_CONV_CAPS, INTO_CLASSES), xla=XLA_PASSES,
    modules=(__name__, "idpa_capsnet.layers", "idpa_capsnet.network"),
    # the network contract: the votes v_ij into the class capsules (Network.votes)
    capabilities=frozenset({"votes"}), citations=(CITATION,),
    classification_loss="cross_entropy", example=EXAMPLE)
