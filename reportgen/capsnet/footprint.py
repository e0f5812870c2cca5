"""What a model needs in memory, from its params.toml alone (no TensorFlow), against this machine.

A params.toml can describe a network no machine can hold (45 trillion parameters, a 100000 x
100000 input): validated here, it is refused in one line with the numbers, instead of failing
late inside TensorFlow with an out-of-memory error. The bounds, both against `machine_memory()`:

- trainable parameters: training holds 16 bytes for each (float32 weight, its gradient and
  Adam's two moments), which must fit in the machine's memory;
- activations of one image: the forward pass's float32 values (conv maps, capsule poses, routing
  votes and weights, decoder units), kept for the backward pass beside their gradients (twice
  the bytes), must fit in the machine's memory: no batch size could train it otherwise.

Both are lower bounds of what a run takes (the framework, the data and a batch of more than one
image come on top), so a model refused here cannot run on this machine. The batch a command
will run is checked when it is known (`batch_bytes`, `largest_batch`): training holds the
training state and the batch's activations with their gradients; a build, the weights and the
batch's activations with the gradients Grad-CAM++ takes (the same two copies).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from reportgen.capsnet.description import describe
from reportgen.capsnet.param_count import count_trainable_params
from reportgen.errors import ReportgenError
from reportgen.sizes import size_text

BYTES_PER_VALUE = 4                    # float32
BYTES_PER_PARAMETER = 4 * BYTES_PER_VALUE   # weight, gradient, Adam's first and second moment
ACTIVATION_COPIES = 2                  # forward values kept for the backward pass + gradients
# Where the machine's memory cannot be read (no sysconf, e.g. Windows): a laptop's.
FALLBACK_MEMORY = 16 * 1024 ** 3
# Memory limits of the process's control group (v2, then v1); "max" or a huge number = none.
_CGROUP_LIMITS = (Path("/sys/fs/cgroup/memory.max"),
                  Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))


def machine_memory() -> int:
    """Bytes of memory this process can use: the physical memory, or its control group's
    limit when that is lower (a container); FALLBACK_MEMORY where neither can be read."""
    found = []
    try:
        found.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        pass
    for path in _CGROUP_LIMITS:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < 2 ** 60:
            found.append(int(text))
    found = [n for n in found if n > 0]
    return min(found) if found else FALLBACK_MEMORY


def max_trainable_params(memory: int | None = None) -> int:
    """The most trainable parameters whose training state fits in `memory` bytes."""
    return (machine_memory() if memory is None else memory) // BYTES_PER_PARAMETER


def max_activationsize_text(memory: int | None = None) -> int:
    """The most bytes one image's forward activations may take (see the module docstring)."""
    return (machine_memory() if memory is None else memory) // ACTIVATION_COPIES


def activation_values(description) -> int:
    """float32 values of one image's forward pass through the model `description` describes
    (reportgen.capsnet.description): the input, every conv layer's output, every capsule
    layer's poses and activations, the votes and routing weights into each routed layer, the
    decoder's units and reconstruction. A lower bound: a layer's temporaries are not counted."""
    total = math.prod(description.input_shape)
    total += sum(c.grid[0] * c.grid[1] * c.filters for c in description.conv_layers)
    layers = description.capsule_layers
    for layer in layers:
        total += layer.capsules * (layer.pose_size + 1)
    for child, parent in zip(layers, layers[1:]):
        if child.routing is None:
            continue
        if parent.kernel_size is not None:      # a convolutional capsule layer: a kernel's
            kh, kw = parent.kernel_size        # children vote for each parent cell
            routes = parent.grid[0] * parent.grid[1] * kh * kw * child.types * parent.types
        else:
            routes = child.capsules * parent.capsules
        total += routes * (parent.pose_size + 1)          # votes and routing weights
    if description.decoder is not None:
        total += sum(description.decoder.units) + math.prod(description.decoder.output_shape)
    return total


def check_footprint(params, source: str, memory: int | None = None) -> None:
    """Refuse a model whose trainable parameters or per-image activations cannot fit in this
    machine's memory (module docstring): one line with the numbers and the bound."""
    memory = machine_memory() if memory is None else memory
    what = f"The model in {source} is too large for this machine's {size_text(memory)} of memory"
    trainable = count_trainable_params(params)
    if trainable > max_trainable_params(memory):
        raise ReportgenError(
            what, expected=f"at most {max_trainable_params(memory):,} trainable parameters "
                           f"(training holds {BYTES_PER_PARAMETER} bytes for each: weight, "
                           f"gradient, Adam's two moments)",
            received=f"{trainable:,} trainable parameters "
                     f"({size_text(trainable * BYTES_PER_PARAMETER)} to train)",
            fix="make the layers in params.toml smaller (conv filters, capsule types, decoder "
                "units, the input size)")
    values = activation_values(describe(params))
    if values * BYTES_PER_VALUE > max_activationsize_text(memory):
        raise ReportgenError(
            what, expected=f"at most {size_text(max_activationsize_text(memory))} of activations per "
                           f"image (kept for the backward pass beside their gradients: "
                           f"{ACTIVATION_COPIES}x that)",
            received=f"{size_text(values * BYTES_PER_VALUE)} per image ({values:,} float32 "
                     f"values: conv maps, capsule poses, routing votes)",
            fix="make the input, the conv layers or the capsule grid in params.toml smaller "
                "(larger strides, fewer filters or capsule types)")


def batch_bytes(params, batch: int, training: bool) -> int:
    """Bytes a pass over `batch` images holds: the weights (with their gradients and Adam's
    moments when `training`) and the batch's activations with their gradients."""
    weights = count_trainable_params(params) * (BYTES_PER_PARAMETER if training
                                                else BYTES_PER_VALUE)
    per_image = activation_values(describe(params)) * BYTES_PER_VALUE * ACTIVATION_COPIES
    return weights + batch * per_image


def largest_batch(params, training: bool, memory: int | None = None) -> int:
    """The most images a pass may hold in this machine's memory (0: not even one)."""
    memory = machine_memory() if memory is None else memory
    fixed = batch_bytes(params, 0, training)
    per_image = batch_bytes(params, 1, training) - fixed
    return max(0, (memory - fixed) // max(per_image, 1))


def batch_refusal(params, batch: int, what: str, fix: str,
                  memory: int | None = None) -> ReportgenError:
    """The one-line refusal of `batch` images, with the numbers and `fix`."""
    memory = machine_memory() if memory is None else memory
    training = what.startswith("train")
    weights = batch_bytes(params, 0, training)
    per_image = batch_bytes(params, 1, training) - weights
    return ReportgenError(
        f"{what[:1].upper()}{what[1:]} with batch {batch:,} needs about "
        f"{size_text(batch_bytes(params, batch, training))} of memory, more than this "
        f"machine's {size_text(memory)} ({size_text(weights)} for the weights"
        f"{', their gradients and Adam moments' if training else ''}, "
        f"{size_text(per_image)} per image for its activations and their gradients)",
        fix=fix)
