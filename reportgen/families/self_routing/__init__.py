"""Self-Routing capsules (Hahn, Pyeon & Kim, NeurIPS 2019): settings, description and parameter
count (the routing, the Keras layers and the model in this package's routing, layers and
network modules).

The authors' SmallNet in SR mode (github.com/coder3000/SR-CapsNet, models/smallnet.py):

    conv1: `[[conv]]` convolutions without bias, each + BatchNorm + its activation
    primary_conv: `[primary]` types x dims pose channels (no bias) + BatchNorm
    primary_activation_conv: `[primary]` types channels (no bias) + BatchNorm + sigmoid
    -> primary_caps: a pose of `dims` values and an activation per type on the grid
    -> conv_caps1: convolutional Self-Routing capsules (W1, W2, beta) + BatchNorm on the poses
    -> class_caps: Self-Routing over the whole grid, activations only (W2, beta)
    loss: negative log-likelihood of the true class's activation

Every convolution and the ConvCaps zero-pad their input by `self_routing.padding`; the field
of every grid is the one before it through its kernel, stride and padding. Its own settings:

    [self_routing]
    padding = 1                  # zero padding of every convolution and of the ConvCaps
    conv_caps_types = 16         # ConvCaps output types B, pose size D, kernel, stride
    conv_caps_dims = 16
    conv_caps_kernel_size = 3
    conv_caps_strides = 2
    batch_norm_momentum = 0.9    # Keras's (PyTorch's momentum 0.1)

Parameters of MNIST_SelfRouting (28x28): conv 7x7x256 = 12,544 + BN 512; activation conv
5x5x256x16 = 102,400 + BN 32; pose conv 5x5x256x256 = 1,638,400 + BN 512; ConvCaps over
3x3x16 = 144 child slots: W1 144x256x16 = 589,824, W2 144x16x16 = 36,864, beta 144x16 = 2,304,
BN 512; class capsules over 5x5x16 = 400 slots: W2 400x10x16 = 64,000, beta 400x10 = 4,000:
2,451,904.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from reportgen.sdk import (INPUT_FIELD, XLA, CapsuleLayer, ConvLayer, DecoderParams, Family, Head,
                           ModelDescription, RoutingWeights, cite, fail)

NAME = "self_routing"
# The couplings c_ij = softmax_j(W2_i u_i + beta_i): predicted by each child from its own pose,
# no iterations; each child's sum to 1 over its parents (Hahn, Pyeon & Kim 2019, eq. 2). A
# child seen by several windows has its couplings divided among them, so its weights into the
# next layer still sum to 1 (the entropy against uniform stays per child).
ROUTING = RoutingWeights(kind="self_routing", words="self-routing coupling coefficients",
                         lacks="self-routing", sums_over="parents", paths=True, iterations=0,
                         symbol="c")


# The SmallNet's BatchNorm layers are not layers of the description.
LEAVES_OUT = (
    "BatchNorm after every convolution, before its activation: the feature maps shown are "
    "after it, the kernels shown before it, and its statistics are not shown.",
    "BatchNorm of the ConvCaps poses: the poses the analyses read are after it.",
)


@dataclass(frozen=True)
class SelfRoutingParams:
    padding: int = 1                    # zero padding of every convolution and of the ConvCaps
    conv_caps_types: int = 16           # ConvCaps output types B
    conv_caps_dims: int = 16            # ConvCaps pose size D
    conv_caps_kernel_size: int = 3      # ConvCaps kernel
    conv_caps_strides: int = 2          # ConvCaps stride
    batch_norm_momentum: float = 0.9    # Keras's (PyTorch's momentum 0.1)


def _out(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def _conv(name, filters, kernel, stride, pad, activation, capsules, grid, field) -> ConvLayer:
    """A convolution of the zero-padded input (padding "valid" of the padded input; the
    field starts `pad` input cells earlier)."""
    return ConvLayer(name=name, filters=filters, kernel_size=(kernel, kernel),
                     strides=(stride, stride), padding="valid", activation=activation,
                     grid=(_out(grid[0], kernel, stride, pad), _out(grid[1], kernel, stride, pad)),
                     receptive_field=field.through((kernel,) * 2, (stride,) * 2, (pad, pad)),
                     capsules=capsules)


def describe(params) -> ModelDescription:
    sr, p = params.family_settings, params.primary
    pad = sr.padding
    grid, field, convs = tuple(params.input_shape[:2]), INPUT_FIELD, []
    for i, c in enumerate(params.conv):
        convs.append(_conv(f"conv{i + 1}", c.filters, c.kernel_size, c.strides, pad,
                           c.activation, "", grid, field))
        grid, field = convs[-1].grid, convs[-1].receptive_field
    poses = _conv("primary_conv", p.types * p.dims, p.kernel_size, p.strides, pad, "none",
                  "primary_caps", grid, field)
    activations = _conv("primary_activation_conv", p.types, p.kernel_size, p.strides, pad,
                        "sigmoid", "primary_caps", grid, field)
    routed = dict(pose="vector", activation="logistic", routing=ROUTING)
    primary = CapsuleLayer(name="primary_caps", grid=poses.grid, types=p.types,
                           pose_size=p.dims, receptive_field=poses.receptive_field, **routed)
    k, s = sr.conv_caps_kernel_size, sr.conv_caps_strides
    conv_caps = CapsuleLayer(name="conv_caps1", grid=tuple(_out(g, k, s, pad) for g in poses.grid),
                             types=sr.conv_caps_types, pose_size=sr.conv_caps_dims,
                             receptive_field=primary.receptive_field.through((k, k), (s, s),
                                                                             (pad, pad)),
                             kernel_size=(k, k), strides=(s, s), **routed)
    # The class capsules keep no pose (no W1): their activations are the class scores
    classes = CapsuleLayer(name="class_caps", pose="none", grid=None,
                           types=params.num_classes, pose_size=0, activation="logistic")
    return ModelDescription(input_shape=tuple(params.input_shape),
                            conv_layers=(*convs, poses, activations),
                            capsule_layers=(primary, conv_caps, classes),
                            head=Head(kind="capsules", classes=params.num_classes,
                                      layer="class_caps"),
                            leaves_out=LEAVES_OUT)


def count_params(params) -> int:
    """Convolution kernels (no biases) and their BatchNorm's scale and offset; per ConvCaps
    child slot (kernel position, input type) W1 (B·D x C), W2 (B x C) and beta (B), and the
    BatchNorm of its B·D pose channels; per class-capsule slot (every grid cell and type) W2
    (classes x C) and beta (classes)."""
    description = describe(params)
    channels, total = description.input_shape[2], 0
    for conv in description.conv_layers:      # both primary convolutions read the last plain one
        total += conv.kernel_size[0] * conv.kernel_size[1] * channels * conv.filters \
            + 2 * conv.filters
        if not conv.capsules:
            channels = conv.filters
    primary, conv_caps, classes = description.capsule_layers
    slots = conv_caps.kernel_size[0] * conv_caps.kernel_size[1] * primary.types
    b, d, c = conv_caps.types, conv_caps.pose_size, primary.pose_size
    total += slots * (b * d * c + b * c + b) + 2 * b * d
    slots = conv_caps.grid[0] * conv_caps.grid[1] * conv_caps.types
    total += slots * (classes.types * d + classes.types)
    return total


def check(params, raw: dict, source: str):
    """No decoder (the loss is the likelihood of the class activations); positive sizes; every
    grid at least 1x1 after the padding."""
    decoder = raw.get("decoder", {})
    if isinstance(decoder, dict) and decoder.get("enabled", False):
        raise fail(source, "decoder.enabled",
                   "false (Self-Routing has no decoder; its loss is the negative log-likelihood "
                   "of the class activations)", True)
    for i, conv in enumerate(raw.get("conv", []) if isinstance(raw.get("conv"), list) else
                             [raw.get("conv", {})]):
        if isinstance(conv, dict) and "padding" in conv:
            raise fail(source, f"conv[{i}].padding",
                       "not set (Self-Routing zero-pads every convolution by "
                       "self_routing.padding cells)", conv["padding"])
    sr = params.family_settings
    for key in ("conv_caps_types", "conv_caps_dims", "conv_caps_kernel_size",
                "conv_caps_strides"):
        if getattr(sr, key) < 1:
            raise fail(source, f"self_routing.{key}", "an integer >= 1", getattr(sr, key))
    if sr.padding < 0:
        raise fail(source, "self_routing.padding", "an integer >= 0", sr.padding)
    if not 0 <= sr.batch_norm_momentum < 1:
        raise fail(source, "self_routing.batch_norm_momentum", "a number in [0, 1)",
                   sr.batch_norm_momentum)
    h, w = params.input_shape[:2]
    steps = [(f"conv[{i}].kernel_size", c.kernel_size, c.strides)
             for i, c in enumerate(params.conv)]
    steps += [("primary.kernel_size", params.primary.kernel_size, params.primary.strides),
              ("self_routing.conv_caps_kernel_size", sr.conv_caps_kernel_size,
               sr.conv_caps_strides)]
    for key, kernel, stride in steps:
        h, w = _out(h, kernel, stride, sr.padding), _out(w, kernel, stride, sr.padding)
        if h < 1 or w < 1:
            raise fail(source, key, "a kernel no larger than its padded input", kernel)
    return replace(params, decoder=DecoderParams(enabled=False))


def build(params):
    from reportgen.families.self_routing.network import build_self_routing

    return build_self_routing(params)


# bench/bench_xla.py on MNIST_SelfRouting, XLA / the best of eager and tf.function, busy
# 2-core CPU: forward 0.94x, forward + backward 0.76x: no XLA.
XLA_PASSES = XLA(forward=False, gradients=False)


# A tiny model for the contract tests (Family.example), every convolution padded by 1: 12x12 ->
# conv 12x12x8 -> primary (kernel 3, stride 2) 6x6 x 2 types of 4 -> ConvCaps (kernel 3,
# stride 2) 3x3 x 3 types of 4 -> 3 classes
EXAMPLE = {"input_shape": [12, 12, 1], "num_classes": 3,
           "conv": [{"filters": 8, "kernel_size": 3}],
           "primary": {"types": 2, "dims": 4, "kernel_size": 3, "strides": 2},
           "self_routing": {"conv_caps_types": 3, "conv_caps_dims": 4},
           "decoder": {"enabled": False}}

FAMILY = Family(name=NAME, describe=describe, build=build, count_params=count_params,
                display_name=lambda params: "Self-Routing", table=NAME,
                settings=SelfRoutingParams, check=check, routing=(ROUTING,), xla=XLA_PASSES,
                citations=cite("hahn2019self"), example=EXAMPLE,
                # the negative log-likelihood of the class activations
                classification_loss="nll",
                # reportgen.capsnet re-exports the routing function for notebooks
                modules=(__name__, f"{__name__}.network", f"{__name__}.layers",
                         f"{__name__}.routing"))
