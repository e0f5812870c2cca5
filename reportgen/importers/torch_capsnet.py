"""The CapsNet of the public PyTorch implementations that build the primary capsules from one
Conv2d per capsule dimension (gram-ai/capsule-networks, the Udacity-style capsule_network
notebook): shared by their layouts, which differ only in their tensor names.

Their network, as their code computes it (input (batch, channels, H, W) in [0, 1]):
- conv1: Conv2d(channels, 256, 9), bias, ReLU;
- primary capsules: `dims` (8) modules Conv2d(256, types (32), 9, stride 2), bias, NO ReLU; each
  module's output (batch, types, h, w) is flattened and the modules stacked on the last axis:
  capsule i = type * h * w + row * w + column, dimension d = module d; squash;
- digit capsules: route weights (classes, capsules, dims, 16), u_hat[j|i] = u_i W[j, i], no
  bias; routing with logits of zeros and the softmax over the INPUT capsules (dim 2 of their
  (classes, batch, capsules, 1, 16) logits), 3 iterations;
- decoder: Linear(160, 512), ReLU, Linear(512, 1024), ReLU, Linear(1024, H*W*channels), Sigmoid,
  fed the class capsules masked to the longest (flattened class-major), output in (C, H, W).

Conversion into reportgen's CapsNet is exact: the convolutions are transposed, the 8 modules'
kernels interleaved into one conv (channel type * dims + d), the capsules re-ordered cell-major,
the route weights transposed, the decoder's output pixels re-ordered to (H, W, C). The one real
difference, the softmax axis, is `class_caps.routing_softmax = "inputs"`. Their squash and
lengths have no epsilon, as reportgen's (reportgen.capsnet.ops.safe_norm).
Their forward also returns softmax(lengths) as class scores; reportgen shows the lengths (the
same ranking).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from reportgen.importers.common import (Converted, ConvertedWeights, expect_shape,
                                        chw_to_hwc, grid_side, mismatch, no_other_tensors,
                                        require, shape_text, square_side, torch_conv_kernel,
                                        torch_dense_kernel, types_major_to_cells_major)
from reportgen.importers.tensors import Checkpoint

PRIMARY_STRIDE = 2          # hard-coded in both sources
DIFFERENCES = ("no ReLU before the primary capsules' squash; coupling coefficients "
               "normalised over the input capsules (softmax over i for each class) instead of "
               "over the classes; the primary capsules of its 8 Conv2d modules re-ordered into "
               "one conv")
RECONSTRUCTION_PER_PIXEL = 0.0005   # their loss: margin + 0.0005 x the SUM of squared errors


@dataclass(frozen=True)
class TorchNames:
    """Where one layout keeps each tensor of the state dict."""

    conv_weight: str
    conv_bias: str
    primary_prefix: str          # + "{d}.weight" / "{d}.bias" for capsule dimension d
    route_weights: str
    decoder_prefix: str          # + "{n}.weight" / "{n}.bias" for nn.Sequential index n


def _indexed(checkpoint: Checkpoint, prefix: str) -> list[int]:
    """The indices n of the tensors named prefix + 'n.weight', sorted."""
    pattern = re.compile(re.escape(prefix) + r"(\d+)\.weight$")
    return sorted(int(m.group(1)) for m in map(pattern.match, checkpoint.tensors) if m)


def convert_torch_capsnet(checkpoint: Checkpoint, layout: ModuleType, names: TorchNames,
                          routing_iterations: int) -> Converted:
    ck, used = checkpoint, set()

    def take(name, tensor):
        used.add(name)
        return tensor

    conv_w = take(names.conv_weight, require(ck, layout, names.conv_weight, (256, 1, 9, 9), 4))
    filters, channels, k, k2 = conv_w.shape
    if k != k2 or channels not in (1, 3):
        raise mismatch(ck, layout, names.conv_weight, "shape (filters, channels 1 or 3, k, k)",
                       f"shape {shape_text(conv_w.shape)}")
    conv_b = take(names.conv_bias, expect_shape(ck, layout, names.conv_bias, (filters,)))

    dims_found = _indexed(ck, names.primary_prefix)
    if dims_found != list(range(len(dims_found))) or not dims_found:
        missing = next(d for d in range(len(dims_found) + 1) if d not in dims_found)
        raise mismatch(ck, layout, f"{names.primary_prefix}{missing}.weight",
                       f"shape {shape_text((32, filters, 9, 9))}", "no such tensor")
    first = f"{names.primary_prefix}0.weight"
    types, _, kp, _ = require(ck, layout, first, (32, filters, 9, 9), 4).shape
    primary_w, primary_b = [], []
    for d in dims_found:
        w_name, b_name = f"{names.primary_prefix}{d}.weight", f"{names.primary_prefix}{d}.bias"
        primary_w.append(take(w_name, expect_shape(ck, layout, w_name, (types, filters, kp, kp))))
        primary_b.append(take(b_name, expect_shape(ck, layout, b_name, (types,))))
    dims = len(dims_found)

    route = require(ck, layout, names.route_weights, (10, 1152, dims, 16), 4)
    classes, capsules, _, class_dims = route.shape
    take(names.route_weights, expect_shape(ck, layout, names.route_weights,
                                           (classes, capsules, dims, class_dims)))

    layers = _indexed(ck, names.decoder_prefix)
    if not layers:
        raise mismatch(ck, layout, f"{names.decoder_prefix}0.weight",
                       f"shape {shape_text((512, classes * class_dims))}", "no such tensor")
    decoder, width = [], classes * class_dims
    for n in layers:
        w_name, b_name = f"{names.decoder_prefix}{n}.weight", f"{names.decoder_prefix}{n}.bias"
        units = require(ck, layout, w_name, (512, width), 2).shape[0]
        w = take(w_name, expect_shape(ck, layout, w_name, (units, width)))
        b = take(b_name, expect_shape(ck, layout, b_name, (units,)))
        decoder.append((torch_dense_kernel(w), np.asarray(b)))
        width = units
    no_other_tensors(ck, layout, used)

    last = f"{names.decoder_prefix}{layers[-1]}.weight"
    side = square_side(width, channels)
    if side is None:
        raise mismatch(ck, layout, last, f"(H*W*{channels}, n) for a square H x W image",
                       f"shape {shape_text(ck.tensors[last].shape)}")
    grid = grid_side(grid_side(side, k, 1), kp, PRIMARY_STRIDE)
    if grid < 1 or grid * grid * types != capsules:
        raise mismatch(ck, layout, names.route_weights,
                       f"shape {shape_text((classes, max(grid, 0) ** 2 * types, dims, class_dims))}"
                       f" for a {side}x{side} input",
                       f"shape {shape_text(route.shape)}")

    # One conv for all capsule dimensions: channel type * dims + d (reportgen's order).
    primary_kernel = torch_conv_kernel(np.stack(primary_w, axis=1).reshape(
        types * dims, filters, kp, kp))
    primary_bias = np.stack(primary_b, axis=1).reshape(types * dims)
    # Their capsule type * cells + cell -> reportgen's cell * types + type; W[j,i] (dims x 16)
    # acts as u W, reportgen's kernel[i, j] (16 x dims) as W u.
    order = types_major_to_cells_major(grid * grid, types)
    class_kernel = np.ascontiguousarray(route.transpose(1, 0, 3, 2)[order])
    pixels = chw_to_hwc(side, side, channels)
    kernel, bias = decoder[-1]
    decoder[-1] = (np.ascontiguousarray(kernel[:, pixels]), np.asarray(bias)[pixels])

    raw = {
        "input_shape": [side, side, channels],
        "num_classes": classes,
        "conv": [{"filters": filters, "kernel_size": k, "strides": 1, "activation": "relu"}],
        "primary": {"types": types, "dims": dims, "kernel_size": kp, "strides": PRIMARY_STRIDE,
                    "activation": "none"},
        "class_caps": {"dims": class_dims, "routing_iterations": routing_iterations,
                       "weight_sharing": False, "kernel_init_stddev": 1.0,
                       "routing_softmax": "inputs", "detach_routing_votes": False},
        "decoder": {"enabled": True, "units": [w.shape[1] for w, _ in decoder[:-1]]},
        "loss": {"reconstruction_weight": round(RECONSTRUCTION_PER_PIXEL * width, 6)},
    }
    notes = {
        "primary.activation": "no ReLU before the squash (Sabour et al. 2017); the "
                              f"{dims} Conv2d modules' capsules are re-ordered into one conv",
        "class_caps.routing_softmax": "their softmax runs over the input capsules (dim 2 of "
                                      "their logits), not over the classes",
        "class_caps.kernel_init_stddev": "route weights start as torch.randn (stddev 1)",
        "class_caps.routing_iterations": "not stored in the file: the source's default, or "
                                         "--routing-iterations",
        "loss.reconstruction_weight": f"their loss adds 0.0005 x the sum of squared errors over "
                                      f"{width} pixels (= this x the mean)",
    }
    weights = ConvertedWeights(conv=[(torch_conv_kernel(conv_w), np.asarray(conv_b))],
                               primary=(primary_kernel, primary_bias),
                               class_caps=class_kernel, decoder=decoder)
    return Converted(raw_params=raw, notes=notes, weights=weights)
