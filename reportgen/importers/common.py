"""What every import layout shares: the converted weights in reportgen's order, the check of a
tensor's presence and shape (one line naming the tensor, the expected and the found shape), and
the index maps between other implementations' orders and reportgen's.

reportgen's orders (reportgen.capsnet.layers): conv kernels (kh, kw, in, out); primary capsule
i = (row * grid_width + column) * types + type with channel type * dims + d of the primary conv;
the CapsNet's ClassCaps kernel (inputs, classes, dims, input_dims; its family's layers); Dense
kernels (in, out); the decoder's output pixels in (row, column, channel) order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from reportgen.errors import ReportgenError
from reportgen.importers.tensors import Checkpoint


@dataclass
class ConvertedWeights:
    """The weights of reportgen's CapsNet built from the imported params, in its orders."""

    conv: list[tuple[np.ndarray, np.ndarray]]          # (kernel, bias) of conv1, conv2, ...
    primary: tuple[np.ndarray, np.ndarray]             # the primary conv's (kernel, bias)
    class_caps: np.ndarray                             # (inputs, classes, dims, input_dims)
    decoder: list[tuple[np.ndarray, np.ndarray]]       # (kernel, bias) per Dense layer

    @property
    def parameter_count(self) -> int:
        arrays = [a for pair in (*self.conv, self.primary, *self.decoder) for a in pair]
        return int(sum(a.size for a in arrays) + self.class_caps.size)


@dataclass
class Converted:
    """A checkpoint read as one layout: reportgen's params.toml table and the weights."""

    raw_params: dict              # a params.toml document (reportgen.settings.model_params)
    notes: dict[str, str]         # dotted params key -> why the source chose this value
    weights: ConvertedWeights


def check_numbers(checkpoint: Checkpoint) -> None:
    """Every weight (a layout reads every tensor: `no_other_tensors`) a floating-point, finite
    number of plausible size (reportgen.training.checkpoints.weights_problem, the rule a
    model's own saved steps are held to); else a one-line error naming the tensor."""
    from reportgen.training.checkpoints import WEIGHT_RULE, weights_problem

    problem = weights_problem(checkpoint.tensors.items())
    if problem is not None:
        raise ReportgenError(f"{checkpoint.path.name} holds weights that are not numbers a "
                             f"network trains to: {problem}",
                             expected=WEIGHT_RULE,
                             fix="Import a checkpoint saved before training diverged, or copy "
                                 "the file again from where it was saved.")


def shape_text(shape) -> str:
    return "(" + ", ".join(str(int(d)) for d in shape) + (",)" if len(shape) == 1 else ")")


def mismatch(checkpoint: Checkpoint, layout: ModuleType, tensor: str, expected: str,
             found: str) -> ReportgenError:
    """The one-line error for a tensor a layout does not accept."""
    return ReportgenError(
        f"{checkpoint.path.name} does not match the {layout.NAME} layout ({layout.PROJECT}): "
        f"tensor '{tensor}'",
        expected=expected, received=found,
        fix=f"Check that the file was saved by {layout.PROJECT} and import it with the --from of "
            "the project that saved it (reportgen import --help lists them).")


def require(checkpoint: Checkpoint, layout: ModuleType, name: str, example, rank: int | None = None
            ) -> np.ndarray:
    """Tensor `name`; missing, or (with `rank`) of another rank, is a mismatch whose expected
    shape is `example` (the source's default architecture)."""
    tensor = checkpoint.tensors.get(name)
    if tensor is None:
        raise mismatch(checkpoint, layout, name, f"shape {shape_text(example)}", "no such tensor")
    if rank is not None and tensor.ndim != rank:
        raise mismatch(checkpoint, layout, name, f"shape {shape_text(example)} (rank {rank})",
                       f"shape {shape_text(tensor.shape)}")
    return tensor


def expect_shape(checkpoint: Checkpoint, layout: ModuleType, name: str, expected) -> np.ndarray:
    """Tensor `name`, which must have exactly shape `expected`."""
    tensor = require(checkpoint, layout, name, expected)
    if tuple(tensor.shape) != tuple(expected):
        raise mismatch(checkpoint, layout, name, f"shape {shape_text(expected)}",
                       f"shape {shape_text(tensor.shape)}")
    return tensor


def no_other_tensors(checkpoint: Checkpoint, layout: ModuleType, used: set[str]) -> None:
    """A tensor the layout does not have means another architecture: name the first one."""
    for name, tensor in checkpoint.tensors.items():
        if name not in used:
            raise mismatch(checkpoint, layout, name, "no such tensor in this architecture",
                           f"shape {shape_text(tensor.shape)}")


def square_side(pixels: int, channels: int) -> int | None:
    """The side of a square image of `pixels` values with `channels` channels, or None."""
    if pixels % channels:
        return None
    side = math.isqrt(pixels // channels)
    return side if side * side * channels == pixels else None


def grid_side(side: int, kernel: int, stride: int) -> int:
    """One axis of a valid convolution's output."""
    return (side - kernel) // stride + 1


def types_major_to_cells_major(cells: int, types: int) -> np.ndarray:
    """For each reportgen primary capsule (cell-major, type fastest), its index in an order
    where the type is slowest (index = type * cells + cell, PyTorch's view of (types, H, W))."""
    return (np.arange(types)[None, :] * cells + np.arange(cells)[:, None]).reshape(-1)


def chw_to_hwc(height: int, width: int, channels: int) -> np.ndarray:
    """For each pixel in (row, column, channel) order, its index in (channel, row, column)."""
    return np.arange(height * width * channels).reshape(channels, height, width) \
        .transpose(1, 2, 0).reshape(-1)


def torch_conv_kernel(weight: np.ndarray) -> np.ndarray:
    """PyTorch Conv2d weight (out, in, kh, kw) -> Keras Conv2D kernel (kh, kw, in, out)."""
    return np.ascontiguousarray(weight.transpose(2, 3, 1, 0))


def torch_dense_kernel(weight: np.ndarray) -> np.ndarray:
    """PyTorch Linear weight (out, in) -> Keras Dense kernel (in, out)."""
    return np.ascontiguousarray(weight.T)
