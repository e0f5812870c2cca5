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
image come on top), so a model refused here cannot run on this machine.

The batch a command will run is checked when it is known (`batch_bytes`, `largest_batch`)
against the memory available now (`available_memory`: MemAvailable, or the control group's
limit less its usage), not the machine's total, keeping a margin (`headroom`) below it. The
count is no lower bound but what a real pass holds, measured against the trainer's step and the
probe's passes of several families (bench/bench_batch_memory.py,
docs/benchmarks/tables/bench_batch_memory.md): the weights (with their gradients and Adam's
moments in training) and a weight-sized temporary, and the larger of XLA's compilation of the
pass and the pass itself: its workspace and for each image its activations and the values a
pass holds beside them (the conv outputs before their activation, each routing iteration's
votes), with their gradients.
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
# What a pass holds beyond its layers' values (bench/bench_batch_memory.py measures it):
# one more weight-sized temporary per parameter (a kernel's transposed or reordered copy, the
# optimizer's update before it is applied), in bytes,
WEIGHT_TEMPORARY = BYTES_PER_VALUE
# the compiled pass's own workspace (its trace, the kernels' scratch, the runtime's pools),
PASS_WORKSPACE = 128 * 1024 ** 2
# and what XLA's compilation takes besides for each routing iteration it unrolls (of a pass
# without gradients; twice that with them).
XLA_PER_ITERATION = 64 * 1024 ** 2
# The margin a batch leaves below the memory available (`headroom`): MemAvailable is the
# kernel's estimate, other processes allocate while a run grows, the allocator fragments, and
# the framework's own runtime (TensorFlow and Keras imported: 0.65 GB resident, measured) comes
# on top of what `batch_bytes` counts, since the batch is checked before it is imported.
HEADROOM_FRACTION = 0.15
HEADROOM_MIN = 1024 ** 3
# Where the machine's memory cannot be read (no sysconf, e.g. Windows): a laptop's.
FALLBACK_MEMORY = 16 * 1024 ** 3
# Memory limits of the process's control group (v2, then v1); "max" or a huge number = none.
_CGROUP_LIMITS = (Path("/sys/fs/cgroup/memory.max"),
                  Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
# (limit, usage, memory.stat's inactive page cache) of the control group, v2 then v1
_CGROUP_USAGE = ((Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory.current"),
                  "inactive_file"),
                 (Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
                  Path("/sys/fs/cgroup/memory/memory.usage_in_bytes"), "total_inactive_file"))
MEMINFO = Path("/proc/meminfo")


def machine_memory() -> int:
    """Bytes of memory this process can use: the physical memory, or its control group's
    limit when that is lower (a container); FALLBACK_MEMORY where neither can be read."""
    found = []
    try:
        found.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        pass
    for path in _CGROUP_LIMITS:
        limit = _read_bytes(path)
        if limit is not None:
            found.append(limit)
    found = [n for n in found if n > 0]
    return min(found) if found else FALLBACK_MEMORY


def _read_bytes(path: Path) -> int | None:
    """A control-group file's byte count; None if unreadable or "max" / a huge number (none)."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and 0 < int(text) < 2 ** 60 else None


def meminfo_available(text: str) -> int | None:
    """Bytes of /proc/meminfo's MemAvailable (the kernel's estimate of what can be allocated
    without swapping: free memory plus reclaimable page cache and slab), None if absent."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key == "MemAvailable":
            number, *unit = value.split()
            return int(number) * (1024 if unit == ["kB"] else 1)
    return None


def _cgroup_available() -> int | None:
    """The control group's limit less what it uses (less its inactive page cache, which the
    kernel reclaims before it fails an allocation; the sum `docker stats` shows), or None."""
    for limit_file, usage_file, cache_key in _CGROUP_USAGE:
        limit = _read_bytes(limit_file)
        usage = _read_bytes(usage_file) if limit is not None else None
        if usage is None:
            continue
        try:
            stat = dict(line.split() for line in
                        (limit_file.parent / "memory.stat").read_text().splitlines())
            usage -= min(usage, int(stat.get(cache_key, 0)))
        except (OSError, ValueError):
            pass
        return max(0, limit - usage)
    return None


def available_memory() -> int:
    """Bytes this process can still take now: MemAvailable (/proc/meminfo), or the control
    group's limit less its usage when lower; machine_memory() where neither can be read."""
    found = []
    try:
        found.append(meminfo_available(MEMINFO.read_text()))
    except OSError:
        pass
    found.append(_cgroup_available())
    found = [n for n in found if n is not None]
    return min(found) if found else machine_memory()


def headroom(available: int) -> int:
    """The safety margin a batch keeps below `available` bytes (module docstring)."""
    return max(int(HEADROOM_FRACTION * available), HEADROOM_MIN)


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
        total += _routes(child, parent) * (parent.pose_size + 1)   # votes, routing weights
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


def held_values(description) -> int:
    """float32 values one image's pass holds beyond `activation_values` until its backward
    pass, each with its gradient as well: every conv layer's output before its activation (the
    bias sum and the ReLU's output are two tensors, both kept for the backward pass), and each
    routing iteration's own vote-sized tensor and routing weights (the weighted votes it sums,
    or the votes' deviations from the parents' poses) beyond the one `activation_values`
    counts."""
    total = sum(c.grid[0] * c.grid[1] * c.filters for c in description.conv_layers)
    layers = description.capsule_layers
    for child, parent in zip(layers, layers[1:]):
        if child.routing is not None and child.routing.iterations > 1:
            total += (child.routing.iterations - 1) * _routes(child, parent) \
                * (parent.pose_size + 1)
    return total


def image_bytes(params) -> int:
    """Bytes one more image adds to a pass: its activations and held values with their
    gradients (ACTIVATION_COPIES). No convolution's patch matrix (im2col: kernel x kernel x
    input channels per output position) is counted: measured, a 4,000-channel 9x9 convolution
    added none for the batch (TensorFlow's CPU kernels work on blocks of it)."""
    description = describe(params)
    return ACTIVATION_COPIES * (activation_values(description) + held_values(description)) \
        * BYTES_PER_VALUE


def compile_bytes(params, training: bool) -> int:
    """Bytes XLA takes while it compiles the pass (0: not XLA-compiled): the pass's workspace
    and more for each routing iteration it unrolls, twice as many ops when the pass it
    compiles takes gradients (the training step; a build's gradient pass, or else only its
    forward pass). Freed before the pass runs."""
    from reportgen.settings.families import family_of

    xla = family_of(params).xla
    if training:
        compiled, gradients = xla.gradients or params.training.xla, True
    else:
        compiled, gradients = xla.forward or xla.gradients, xla.gradients
    if not compiled:
        return 0
    layers = describe(params).capsule_layers
    iterations = sum(c.routing.iterations for c in layers[:-1] if c.routing is not None)
    return PASS_WORKSPACE + XLA_PER_ITERATION * iterations * (2 if gradients else 1)


def batch_bytes(params, batch: int, training: bool) -> int:
    """Bytes a pass over `batch` images holds at its peak (measured against real passes of
    several families: docs/benchmarks/tables/bench_batch_memory.md): the weights (with their
    gradients and Adam's moments when `training`) and a weight-sized temporary, then the larger
    of XLA's compilation (`compile_bytes`) and the pass itself: its workspace and
    `image_bytes` for each image."""
    weights = count_trainable_params(params) * (
        (BYTES_PER_PARAMETER if training else BYTES_PER_VALUE) + WEIGHT_TEMPORARY)
    return weights + max(compile_bytes(params, training),
                         PASS_WORKSPACE + batch * image_bytes(params))


def largest_batch(params, training: bool, memory: int | None = None) -> int:
    """The most images a pass may hold in `memory` bytes available (default: this process's
    `available_memory()`), keeping `headroom` below it (0: not even one)."""
    memory = available_memory() if memory is None else memory
    usable = memory - headroom(memory)
    if batch_bytes(params, 0, training) > usable:       # not even XLA's compilation fits
        return 0
    fixed = batch_bytes(params, 0, training) - max(compile_bytes(params, training),
                                                   PASS_WORKSPACE) + PASS_WORKSPACE
    return max(0, (usable - fixed) // max(image_bytes(params), 1))


def batch_refusal(params, batch: int, what: str, fix: str,
                  memory: int | None = None) -> ReportgenError:
    """The one-line refusal of `batch` images, with the numbers and `fix`."""
    memory = available_memory() if memory is None else memory
    training = what.startswith("train")
    fixed = batch_bytes(params, 0, training)
    margin = headroom(memory)
    fits = largest_batch(params, training, memory)
    return ReportgenError(
        f"{what[:1].upper()}{what[1:]} with batch {batch:,} needs about "
        f"{size_text(batch_bytes(params, batch, training))} of memory, more than the "
        f"{size_text(memory - margin)} this machine can give it ({size_text(memory)} "
        f"available less a {size_text(margin)} margin; {size_text(fixed)} for the weights"
        f"{', their gradients and Adam moments' if training else ''} and the pass's "
        f"workspace, {size_text(image_bytes(params))} per image for its activations and their "
        f"gradients); the largest batch that fits is {fits:,}",
        fix=fix)


def _routes(child, parent) -> int:
    """Votes from layer `child` into `parent`: each child's for each parent it can reach (a
    convolutional capsule layer's kernel window of children vote for each parent cell)."""
    if parent.kernel_size is not None:
        kh, kw = parent.kernel_size
        return parent.grid[0] * parent.grid[1] * kh * kw * child.types * parent.types
    return child.capsules * parent.capsules
