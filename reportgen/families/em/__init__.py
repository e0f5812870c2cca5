"""Matrix capsules with EM routing (Hinton, Sabour & Frosst 2018): settings, description and
parameter count (the Keras model in reportgen.families.em.network, the layers in
reportgen.families.em.layers, the geometry helpers in reportgen.families.em.description).

An EM model reuses `[[conv]]` (the ReLU convolutions before the capsules) and `[primary]`
(`types`, `kernel_size`, `strides` of the convolution forming the primary capsules: 16 pose
values and one logistic activation per type); its own settings are the `[em]` table:

    [em]
    routing_iterations = 3          # T, for every routed layer
    inverse_temperature = 0.01      # lambda; lambda_t = lambda (1 - 0.95^t)
    coordinate_addition = true      # class capsules: add the scaled receptive-field centre
    margin_start = 0.2              # spread loss margin, growing linearly over training ...
    margin_end = 0.9                # ... to this
    kernel_init_stddev = 1.0        # the 4x4 transforms' Normal initialiser
    detach_assignments = false      # true: gradients treat the E-steps' R_ij as constants (faster; learns poorly)
    learning_rate_decay = 0.0       # the learning rate falls linearly by this share over training

    [[em.conv_caps]]                # convolutional capsule layers, in order
    types = 16
    kernel_size = 3
    strides = 2

    conv1 … (ReLU)  ->  primary_conv (1x1 or k x k, types x (16 pose + 1 activation), linear)
    -> primary_caps: 4x4 pose + logistic activation per type on the conv grid
    -> conv_caps1, conv_caps2, …: convolutional capsule layers (kernel, stride), EM routing
    -> class_caps: one capsule per class, transforms shared over positions, coordinate addition

Every grid layer's receptive field is the previous one's through its kernel and stride, so the
ConvCaps grids are placed on the input like any conv grid.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from reportgen.capsnet.description import POSE, PRIMARY_CHANNELS
from reportgen.sdk import (XLA, CapsuleLayer, DecoderParams, Family, FamilyCosts, Head,
                           ModelDescription, ReportgenError, RoutingWeights, capsule_convs, cite,
                           conv_grid, conv_output, fail, parse_section)

NAME = "em"


def em_assignments(iterations: int) -> RoutingWeights:
    """The assignments R_ij of EM routing (Hinton et al. 2018, Procedure 1) after `iterations`
    EM iterations: each child's over the parents that see it sum to 1. The model outputs them
    as "<layer>_routing" (reportgen.families.em.network)."""
    return RoutingWeights(kind="em_routing", words="EM assignments", lacks="EM routing",
                          sums_over="parents", paths=True, iterations=iterations,
                          symbol="R")


@dataclass(frozen=True)
class ConvCapsParams:
    types: int = 16                     # capsule types of this convolutional capsule layer
    kernel_size: int = 3                # its window over the capsules before it
    strides: int = 1                    # the window's step over that grid


@dataclass(frozen=True)
class EMParams:
    conv_caps: tuple[ConvCapsParams, ...] = ()     # convolutional capsule layers, in order
    routing_iterations: int = 3         # T, for every routed layer
    inverse_temperature: float = 0.01   # lambda; lambda_t = lambda (1 - 0.95^t)
    coordinate_addition: bool = True    # class capsules: add the scaled receptive-field centre
    margin_start: float = 0.2           # spread loss margin, growing linearly over training ...
    margin_end: float = 0.9             # ... to this
    kernel_init_stddev: float = 1.0     # the 4x4 transforms' Normal initialiser
    # true: gradients treat the E-steps' R_ij as constants (faster; learns poorly)
    detach_assignments: bool = False
    # the learning rate falls linearly by this share over training
    learning_rate_decay: float = 0.0

    def margin(self, progress: float) -> float:
        """The spread-loss margin after `progress` (0 … 1) of training: linear from margin_start
        to margin_end."""
        progress = min(max(float(progress), 0.0), 1.0)
        return self.margin_start + (self.margin_end - self.margin_start) * progress

    def learning_rate_factor(self, progress: float) -> float:
        """1 at the start of training, 1 - learning_rate_decay at its end, linear between."""
        return 1.0 - self.learning_rate_decay * min(max(float(progress), 0.0), 1.0)


def parse(raw: Any, source: str) -> EMParams:
    """The [em] table with its [[em.conv_caps]] layers."""
    if not isinstance(raw, dict):
        raise fail(source, "em", "a table", raw)
    table = dict(raw)
    layers = table.pop("conv_caps", [])
    if isinstance(layers, dict):
        layers = [layers]
    if not isinstance(layers, list):
        raise fail(source, "em.conv_caps", "[[em.conv_caps]] tables", layers)
    em = parse_section(EMParams, table, source, "em")
    conv_caps = tuple(parse_section(ConvCapsParams, c, source, f"em.conv_caps[{i}]")
                      for i, c in enumerate(layers))
    if em.inverse_temperature <= 0:
        raise fail(source, "em.inverse_temperature", "a number > 0", em.inverse_temperature)
    if not 0 <= em.margin_start <= em.margin_end:
        raise fail(source, "em.margin_end", f"a margin >= margin_start ({em.margin_start})",
                   em.margin_end)
    if em.learning_rate_decay >= 1:
        raise fail(source, "em.learning_rate_decay", "a share in [0, 1)",
                   em.learning_rate_decay)
    return EMParams(**{**{f.name: getattr(em, f.name) for f in fields(EMParams)},
                       "conv_caps": conv_caps})


def check(params, raw: dict, source: str):
    """An EM model's primary capsules are 4x4 poses with a logistic activation, and it has no
    decoder: refuse the settings that would mean something else; the capsule layers must
    leave at least a 1x1 grid."""
    fixed = sorted(set(raw.get("primary", {})) - {"types", "kernel_size", "strides"})
    if fixed:
        raise fail(source, f"primary.{fixed[0]}",
                   "only types, kernel_size and strides (matrix capsules have 4x4 poses and a "
                   "logistic activation)", fixed[0])
    if raw.get("decoder", {}).get("enabled", False) if isinstance(raw.get("decoder"), dict) \
            else False:
        raise fail(source, "decoder.enabled",
                   "false (the EM family has no decoder; its loss is the spread loss)", True)
    params = replace(params, decoder=DecoderParams(enabled=False))
    h, w = conv_grid(params, source)
    p = params.primary
    h, w = (h - p.kernel_size) // p.strides + 1, (w - p.kernel_size) // p.strides + 1
    for i, c in enumerate(params.family_settings.conv_caps):
        h, w = (h - c.kernel_size) // c.strides + 1, (w - c.kernel_size) // c.strides + 1
        if h < 1 or w < 1:
            raise fail(source, f"em.conv_caps[{i}].kernel_size",
                       "a kernel no larger than the capsule grid before it", c.kernel_size)
    if (h - p.kernel_size) // p.strides + 1 < 1 or (w - p.kernel_size) // p.strides + 1 < 1:
        raise fail(source, "primary.kernel_size",
                   f"a kernel no larger than the {h}x{w} conv output", p.kernel_size)
    return params


def primary_conv_layer(params):
    """(every conv layer, the one forming the primary capsules)."""
    convs = capsule_convs(params, PRIMARY_CHANNELS, "none")
    return convs, convs[-1]


def describe(params) -> ModelDescription:
    em = params.family_settings
    convs, primary_conv = primary_conv_layer(params)
    grid, field = primary_conv.grid, primary_conv.receptive_field
    routed = dict(pose="matrix4x4", pose_size=POSE, activation="logistic",
                  routing=em_assignments(em.routing_iterations))
    layers = [CapsuleLayer(name="primary_caps", grid=grid, types=params.primary.types,
                           receptive_field=field, **routed)]
    for i, c in enumerate(em.conv_caps):
        name = f"conv_caps{i + 1}"
        (h, _), (w, _) = (conv_output(size, c.kernel_size, c.strides, "valid") for size in grid)
        if h < 1 or w < 1:
            raise ReportgenError(f"Layer {name} has no output: its {c.kernel_size}x"
                                 f"{c.kernel_size} kernel is larger than the {grid[0]}x"
                                 f"{grid[1]} capsule grid before it.",
                                 fix="Use smaller kernels or strides, or a larger input.")
        field = field.through((c.kernel_size,) * 2, (c.strides,) * 2, (0, 0))
        grid = (h, w)
        layers.append(CapsuleLayer(name=name, grid=grid, types=c.types, receptive_field=field,
                                   kernel_size=(c.kernel_size,) * 2, strides=(c.strides,) * 2,
                                   **routed))
    classes = CapsuleLayer(name="class_caps", pose="matrix4x4", grid=None,
                           types=params.num_classes, pose_size=POSE, activation="logistic",
                           coordinate_addition=em.coordinate_addition)
    return ModelDescription(input_shape=tuple(params.input_shape), conv_layers=convs,
                            capsule_layers=(*layers, classes),
                            head=Head(kind="capsules", classes=params.num_classes,
                                      layer="class_caps"))


def count_params(params) -> int:
    """Trainable parameters by arithmetic: conv kernels and biases; per ConvCaps layer one 4x4
    transform per (kernel position, input type, output type) and beta_u, beta_a per output
    type; class capsules one 4x4 transform per (input type, class), beta_u, beta_a per class."""
    description = describe(params)
    channels, total = description.input_shape[2], 0
    for conv in description.conv_layers:
        total += conv.kernel_size[0] * conv.kernel_size[1] * channels * conv.filters + conv.filters
        channels = conv.filters
    capsules = list(description.capsule_layers)
    for before, layer in zip(capsules, capsules[1:]):
        kernel = layer.kernel_size[0] * layer.kernel_size[1] if layer.kernel_size else 1
        total += kernel * before.types * layer.types * POSE + 2 * layer.types
    return total


def build(params):
    from reportgen.families.em.network import build_em_capsnet

    return build_em_capsnet(params)


# EM routing iterates over every position's votes, so MNIST_EM's 68 k parameters cost about
# 3 s per evaluation image and analysed step (4.5 s measured on a 2-core CPU shared with a
# training run), most of it in the adversarial attacks' gradients through the routing: more
# than its size says (reportgen.commands.build_settings).
COSTS = FamilyCosts(seconds_per_eval_image=3.0)

# bench/bench_xla.py on MNIST_EM, busy 2-core CPU: forward XLA 260 img/s, tf.function 97,
# eager 261 (eager calls compile each layer's routing: reportgen.families.em.layers);
# forward + backward 3.06x (EM routing's chains of elementwise operations fuse).
XLA_PASSES = XLA(forward=True, gradients=True)


# A tiny model for the contract tests (Family.example): 12x12 -> conv 3x3 -> 10x10 -> primary
# 1x1 -> ConvCaps k3 s2 -> 4x4 -> ConvCaps k2 s1 -> 3x3
EXAMPLE = {"input_shape": [12, 12, 1], "num_classes": 3,
           "conv": [{"filters": 4, "kernel_size": 3}],
           "primary": {"types": 2, "kernel_size": 1, "strides": 1},
           "em": {"routing_iterations": 2, "inverse_temperature": 0.5,
                  "conv_caps": [{"types": 3, "kernel_size": 3, "strides": 2},
                                {"types": 2, "kernel_size": 2, "strides": 1}]}}

FAMILY = Family(name=NAME, describe=describe, build=build, count_params=count_params,
                display_name=lambda params: "EM-CapsNet", table="em", settings=EMParams,
                parse=parse, check=check, costs=COSTS, routing=(em_assignments(3),),
                xla=XLA_PASSES, citations=cite("hinton2018matrix"), example=EXAMPLE,
                classification_loss="spread_loss",
                modules=(__name__, f"{__name__}.network", f"{__name__}.layers",
                         f"{__name__}.routing", f"{__name__}.description"))
