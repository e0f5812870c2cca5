"""XifengGuo/CapsNet-Keras (Keras 2): weights saved with `model.save_weights('....h5')` (its
`trained_model.h5` and the `weights-NN.h5` of its ModelCheckpoint), in Keras 2's HDF5 layout.
Supported: master at commit 2f6d47d (2020-05-19; code of 923809b, Keras 2.0.7 / TF 1.x) and
branch tf2.2 at commit 9d7e641 (TF 2.2's tf.keras). Both save the same groups:

    conv1              kernel (9, 9, C, 256), bias (256,)
    primarycap_conv2d  kernel (9, 9, 256, 256), bias (256,)     (32 types x 8 dims)
    digitcaps          W (10, 1152, 16, 8)     = (classes, input capsules, dims, input dims)
    decoder            three Dense layers' kernel (in, out) and bias: 160 -> 512 -> 1024 -> H*W*C

Their network, as `capsulenet.py` / `capsulelayers.py` compute it: conv1 9x9 ReLU; PrimaryCap =
Conv2D(dims * types, 9, stride 2) with NO activation, reshaped channels-last to (-1, dims) (the
capsule order reportgen uses) and squashed with K.epsilon() = 1e-7 under the square root
(reportgen's squash is exact; the two squashed lengths differ by less than 1e-7);
u_hat[j|i] = W[j, i] u_i; routing with c = softmax over the classes (tf.nn.softmax(b, dim=1) of
b (batch, classes, inputs)), `--routings` iterations (default 3, not stored in the file);
decoder 512 ReLU, 1024 ReLU, sigmoid, fed the class capsules masked to the longest. Its Length
layer is sqrt(|v|^2 + 1e-7): `class_caps.length_epsilon = 1e-7` computes the same lengths.
Conversion: W is transposed to reportgen's (inputs, classes, dims, input dims); everything else
is copied. Before its commit 540f15d (Dec 2017; the tf1.4-keras branch) CapsNet-Keras routed on
`tf.stop_gradient` votes: same weights and outputs, other gradients; set
`class_caps.detach_routing_votes = true` in the imported params.toml for such a checkpoint.
"""

from __future__ import annotations

import sys

import numpy as np

from reportgen.importers.common import (Converted, ConvertedWeights, expect_shape, grid_side,
                                        mismatch, no_other_tensors, require, shape_text,
                                        square_side)
from reportgen.importers.tensors import Checkpoint

NAME = "capsnet-keras"
PROJECT = "XifengGuo/CapsNet-Keras"
VERSIONS = "master commit 2f6d47d (2020-05-19) and branch tf2.2 commit 9d7e641 (2020-05-19)"
FRAMEWORK = "Keras 2"
MODEL_SUFFIX = "CapsNetKeras"
ROUTING_ITERATIONS = 3       # capsulenet.py's --routings default
DIFFERENCES = ("no ReLU before the primary capsules' squash; DigitCaps W stored as "
               "(classes, inputs, 16, 8) and transposed")
PRIMARY_STRIDE = 2
RECONSTRUCTION_WEIGHT = 0.392   # --lam_recon default: x the MEAN squared error, as reportgen's
LENGTH_EPSILON = 1e-7            # K.epsilon() under the square root of its Length layer


def _weight(checkpoint: Checkpoint, layer: str, role: str, example, rank: int):
    """The weight `role` ('kernel', 'bias', 'W') of `layer`: Keras names it '<layer>/<role>:0'
    inside the layer's group (so its HDF5 path is '<layer>/<layer>/<role>:0')."""
    layout = sys.modules[__name__]
    for key in checkpoint.groups.get(layer, []):
        if key.rsplit("/", 1)[-1].split(":")[0] == role:
            return key, require(checkpoint, layout, key, example, rank)
    raise mismatch(checkpoint, layout, f"{layer}/{layer}/{role}:0", f"shape {shape_text(example)}",
                   "no such tensor")


def convert(checkpoint: Checkpoint, routing_iterations: int = ROUTING_ITERATIONS) -> Converted:
    ck, layout, used = checkpoint, sys.modules[__name__], set()

    key, kernel = _weight(ck, "conv1", "kernel", (9, 9, 1, 256), 4)
    k, k2, channels, filters = kernel.shape
    if k != k2 or channels not in (1, 3):
        raise mismatch(ck, layout, key, "shape (k, k, channels 1 or 3, filters)",
                       f"shape {shape_text(kernel.shape)}")
    bias_key, bias = _weight(ck, "conv1", "bias", (filters,), 1)
    expect_shape(ck, layout, bias_key, (filters,))
    used |= {key, bias_key}
    conv = [(kernel, bias)]

    p_key, p_kernel = _weight(ck, "primarycap_conv2d", "kernel", (9, 9, filters, 256), 4)
    kp, _, _, primary_channels = p_kernel.shape
    expect_shape(ck, layout, p_key, (kp, kp, filters, primary_channels))
    pb_key, p_bias = _weight(ck, "primarycap_conv2d", "bias", (primary_channels,), 1)
    expect_shape(ck, layout, pb_key, (primary_channels,))
    used |= {p_key, pb_key}

    w_key, w = _weight(ck, "digitcaps", "W", (10, 1152, 16, 8), 4)
    classes, capsules, class_dims, dims = w.shape
    used.add(w_key)
    if primary_channels % dims:
        raise mismatch(ck, layout, p_key,
                       f"a multiple of the {dims} capsule dimensions of {w_key} as output "
                       f"channels", f"shape {shape_text(p_kernel.shape)}")
    types = primary_channels // dims

    kernels = [key for key in ck.groups.get("decoder", [])
               if key.rsplit("/", 1)[-1].startswith("kernel")]
    biases = [key for key in ck.groups.get("decoder", [])
              if key.rsplit("/", 1)[-1].startswith("bias")]
    if not kernels:
        raise mismatch(ck, layout, "decoder/dense_1/kernel:0",
                       f"shape {shape_text((classes * class_dims, 512))}", "no such tensor")
    decoder, width = [], classes * class_dims
    for i, d_key in enumerate(kernels):
        units = require(ck, layout, d_key, (width, 512), 2).shape[1]
        d_kernel = expect_shape(ck, layout, d_key, (width, units))
        b_key = biases[i] if i < len(biases) else d_key.replace("kernel", "bias")
        d_bias = expect_shape(ck, layout, b_key, (units,))
        used |= {d_key, b_key}
        decoder.append((d_kernel, d_bias))
        width = units
    no_other_tensors(ck, layout, used)

    side = square_side(width, channels)
    if side is None:
        raise mismatch(ck, layout, kernels[-1], f"(n, H*W*{channels}) for a square H x W image",
                       f"shape {shape_text(ck.tensors[kernels[-1]].shape)}")
    grid = grid_side(grid_side(side, k, 1), kp, PRIMARY_STRIDE)
    if grid < 1 or grid * grid * types != capsules:
        raise mismatch(ck, layout, w_key,
                       f"shape {shape_text((classes, max(grid, 0) ** 2 * types, class_dims, dims))}"
                       f" for a {side}x{side} input", f"shape {shape_text(w.shape)}")

    raw = {
        "input_shape": [side, side, channels],
        "num_classes": classes,
        "conv": [{"filters": filters, "kernel_size": k, "strides": 1, "activation": "relu"}],
        "primary": {"types": types, "dims": dims, "kernel_size": kp, "strides": PRIMARY_STRIDE,
                    "activation": "none"},
        "class_caps": {"dims": class_dims, "routing_iterations": routing_iterations,
                       "weight_sharing": False, "kernel_init_stddev": 0.1,
                       "routing_softmax": "classes", "detach_routing_votes": False,
                       "length_epsilon": LENGTH_EPSILON},
        "decoder": {"enabled": True, "units": [d.shape[1] for d, _ in decoder[:-1]]},
        "loss": {"reconstruction_weight": RECONSTRUCTION_WEIGHT},
    }
    notes = {
        "primary.activation": "PrimaryCap's Conv2D has no activation before the squash "
                              "(Sabour et al. 2017)",
        "class_caps.routing_iterations": "not stored in the file: capsulenet.py's --routings "
                                         "default, or --routing-iterations",
        "class_caps.kernel_init_stddev": "CapsNet-Keras initialises W glorot_uniform; this only "
                                         "matters for training from scratch",
        "class_caps.length_epsilon": "its Length layer computes sqrt(|v|^2 + K.epsilon()): "
                                     "lengths below 1e-3 read as the source shows them",
        "class_caps.detach_routing_votes": "true for checkpoints of CapsNet-Keras before commit "
                                           "540f15d (tf1.4-keras branch): routing on "
                                           "stop_gradient votes",
    }
    weights = ConvertedWeights(
        conv=conv, primary=(p_kernel, p_bias),
        class_caps=np.ascontiguousarray(w.transpose(1, 0, 2, 3)), decoder=decoder)
    return Converted(raw_params=raw, notes=notes, weights=weights)
