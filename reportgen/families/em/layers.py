"""Matrix-capsule layers in Keras 3 (Hinton, Sabour & Frosst 2018): weights in build(),
keras.ops in call(), get_config() complete.

A capsule layer on a grid is a pair (poses (B, H, W, types, 16), activations (B, H, W, types)):
each capsule is a 4x4 pose matrix M (flattened row-major) and a logistic activation a. Votes
are V_ij = M_i W_ij; EM routing (reportgen.families.em.routing) turns them into the next layer's
poses and activations. Capsule i of a grid layer is numbered (row * W + column) * types + type,
as the vector capsules are (reportgen.capsnet.layers).
"""

from __future__ import annotations

import math

import keras
from keras import ops

from reportgen.capsnet.description import COORDINATE_ENTRIES
from reportgen.capsnet.conv_windows import ConvWindows
from reportgen.families.em.routing import em_routing, route_windows

PACKAGE = "reportgen"
POSE = 16


def _check_pair(layer, input_shape):
    """(poses shape, activations shape) of a [poses, activations] input, checked."""
    if not isinstance(input_shape, (list, tuple)) or len(input_shape) != 2 or \
            not isinstance(input_shape[0], (list, tuple)):
        raise ValueError(f"{layer.__class__.__name__} takes [poses (B, H, W, types, 16), "
                         f"activations (B, H, W, types)]. Received: {input_shape}")
    poses, activations = (tuple(s) for s in input_shape)
    if len(poses) != 5 or poses[-1] != POSE or tuple(activations) != poses[:4]:
        raise ValueError(f"{layer.__class__.__name__} takes poses (B, H, W, types, 16) and "
                         f"activations (B, H, W, types). Received: {poses} and {activations}")
    return poses, activations


# Vote tensors (values per call) from which an eager call is worth an XLA compilation.
COMPILE_FROM = 2 ** 20


def _eagerly_compiled(layer, route, inputs):
    """`route(inputs)`, XLA-compiled once per layer when called eagerly on TensorFlow with a
    vote tensor of at least COMPILE_FROM values (the probe and the analyses call the model
    eagerly, where EM routing's chains of elementwise operations over the votes run 2-3 times
    slower); traced as it is otherwise (in the trainer's compiled step, in a functional model's
    construction), for small calls and on other backends. The same values up to float32
    rounding (XLA fuses differently); gradients flow through the compiled function."""
    if keras.backend.backend() != "tensorflow":
        return route(inputs)
    import tensorflow as tf

    if not tf.executing_eagerly() or layer.vote_count(inputs) < COMPILE_FROM:
        return route(inputs)
    compiled = layer.__dict__.get("_compiled_route")
    if compiled is None:
        compiled = tf.function(route, jit_compile=True, reduce_retracing=True)
        layer.__dict__["_compiled_route"] = compiled
    return compiled(inputs)


@ops.custom_gradient
def _matrix_votes(matrices, transforms):
    """V[b, g, o, n] = M[b, g, n] W[n, o] for 4x4 matrices: matrices (B, G, n, 4, 4), transforms
    (n, O, 4, 4) -> votes (B, G, O, n, 4, 4), laid out as EM routing reads them.

    The votes are written by one elementwise pass (a sum of four products per value); a
    batched matrix product over n with 4-long rows would need a second pass to transpose its
    output. The gradient is the two matrix products, where XLA's own derivative of the
    elementwise form would sum vote-sized products over the batch."""
    batch, groups, n = ops.shape(matrices)[0], matrices.shape[1], matrices.shape[2]
    rows = ops.reshape(matrices, (-1, 1, n, 4, 4))                        # (B*G, 1, n, 4, 4)
    by_parent = ops.transpose(transforms, (1, 0, 2, 3))[None]              # (1, O, n, 4, 4)
    # Rank-5 products (TensorFlow's eager kernels broadcast no more axes).
    votes = sum(rows[..., c, None] * by_parent[:, :, :, None, c] for c in range(4))
    votes = ops.reshape(votes, (batch, groups, transforms.shape[1], n, 4, 4))

    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        return (ops.einsum("bgonre,noce->bgnrc", upstream, transforms),
                ops.einsum("bgnrc,bgonre->noce", matrices, upstream))

    return votes, grad


def _transforms(layer, name, shape, stddev):
    return layer.add_weight(name=name, shape=shape,
                            initializer=keras.initializers.RandomNormal(stddev=stddev))


@keras.saving.register_keras_serializable(package=PACKAGE)
class MatrixPrimaryCaps(keras.layers.Layer):
    """Primary matrix capsules from the primary convolution's channels.

    Input (B, H, W, types * 17): channels [16 t, 16 t + 16) are type t's pose (linear), the
    last `types` channels the logits of the activations. Outputs: poses (B, H, W, types, 16)
    and activations (B, H, W, types) = logistic(logits).
    """

    def __init__(self, types: int, **kwargs):
        super().__init__(**kwargs)
        self.types = int(types)

    def compute_output_shape(self, input_shape):
        batch, h, w, channels = input_shape
        if channels != self.types * (POSE + 1):
            raise ValueError(f"MatrixPrimaryCaps expects {self.types * (POSE + 1)} channels "
                             f"({self.types} types x (16 pose + 1 activation)). "
                             f"Received: {channels}")
        return (batch, h, w, self.types, POSE), (batch, h, w, self.types)

    def call(self, inputs):
        h, w = inputs.shape[1], inputs.shape[2]
        split = self.types * POSE
        poses = ops.reshape(inputs[..., :split], (-1, h, w, self.types, POSE))
        return poses, ops.sigmoid(inputs[..., split:])

    def get_config(self):
        return {**super().get_config(), "types": self.types}


@keras.saving.register_keras_serializable(package=PACKAGE)
class ConvCaps(keras.layers.Layer):
    """A convolutional capsule layer with EM routing.

    Inputs [poses (B, H, W, Tin, 16), activations (B, H, W, Tin)]. Weights: one 4x4 transform
    per (kernel row, kernel column, input type, output type), `kernel` (K, K, Tin, Tout, 4, 4);
    beta_u and beta_a per output type. Every child votes for the parents whose K x K window
    (stride `strides`, no padding) covers it, and is shared out over all of them.
    Outputs: poses (B, Ph, Pw, Tout, 16), activations (B, Ph, Pw, Tout) and the assignments of
    the last E-step in window form (B, Ph, Pw, K, K, Tin, Tout) (`windows(...).densify` makes
    them (B, children, parents)). `detach_assignments`: the gradient treats the assignments as
    constants (reportgen.families.em.routing.em_routing).
    """

    def __init__(self, types: int, kernel_size: int, strides: int = 1,
                 routing_iterations: int = 3, inverse_temperature: float = 0.01,
                 kernel_init_stddev: float = 1.0, detach_assignments: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.types = int(types)
        self.kernel_size = int(kernel_size)
        self.strides = int(strides)
        self.routing_iterations = int(routing_iterations)
        self.inverse_temperature = float(inverse_temperature)
        self.kernel_init_stddev = float(kernel_init_stddev)
        self.detach_assignments = bool(detach_assignments)
        if self.routing_iterations < 1:
            raise ValueError(f"routing_iterations must be >= 1. Received: {routing_iterations}")

    def windows(self, child_grid) -> ConvWindows:
        return ConvWindows(tuple(child_grid), self.kernel_size, self.strides)

    def build(self, input_shape):
        poses, _ = _check_pair(self, input_shape)
        self.input_types = poses[3]
        k = self.kernel_size
        self.kernel = _transforms(self, "kernel", (k, k, self.input_types, self.types, 4, 4),
                                  self.kernel_init_stddev)
        self.beta_u = self.add_weight(name="beta_u", shape=(self.types,), initializer="zeros")
        self.beta_a = self.add_weight(name="beta_a", shape=(self.types,), initializer="zeros")

    def compute_output_shape(self, input_shape):
        poses, _ = _check_pair(self, input_shape)
        ph, pw = self.windows(poses[1:3]).parent_grid
        k, batch = self.kernel_size, poses[0]
        return ((batch, ph, pw, self.types, POSE), (batch, ph, pw, self.types),
                (batch, ph, pw, k, k, poses[3], self.types))

    def votes(self, poses, windows: ConvWindows):
        """V = M W for every window entry: (B, Ph, Pw, K, K, Tin, Tout, 16)."""
        ph, pw = windows.parent_grid
        k, tin = self.kernel_size, self.input_types
        votes = ops.reshape(self.votes_by_parent(poses, windows),
                            (-1, ph, pw, self.types, k, k, tin, POSE))
        return ops.transpose(votes, (0, 1, 2, 4, 5, 6, 3, 7))

    def votes_by_parent(self, poses, windows: ConvWindows):
        """The votes laid out as EM routing reads them: (B, Ph*Pw, Tout, K*K*Tin, 16)
        (reportgen.families.em.routing.route_windows)."""
        h, w = windows.child_grid
        tin, k = self.input_types, self.kernel_size
        ph, pw = windows.parent_grid
        flat = ops.reshape(poses, (-1, h, w, tin * POSE))
        matrices = ops.reshape(windows.unfold(flat), (-1, ph * pw, k * k * tin, 4, 4))
        transforms = ops.reshape(ops.convert_to_tensor(self.kernel),
                                 (k * k * tin, self.types, 4, 4))
        votes = _matrix_votes(matrices, transforms)                  # (B, G, Tout, n, 4, 4)
        return ops.reshape(votes, (-1, ph * pw, self.types, k * k * tin, POSE))

    def call(self, inputs):
        return _eagerly_compiled(self, self._route, inputs)

    def vote_count(self, inputs) -> int:
        poses = inputs[0]
        ph, pw = self.windows(poses.shape[1:3]).parent_grid
        return int(poses.shape[0]) * ph * pw * self.kernel_size ** 2 * poses.shape[3] \
            * self.types * POSE

    def _route(self, inputs):
        poses, activations = inputs
        windows = self.windows(poses.shape[1:3])
        out_activations, out_poses, assignments = route_windows(
            self.votes_by_parent(poses, windows), activations, self.beta_u, self.beta_a,
            self.routing_iterations, self.inverse_temperature, windows, self.detach_assignments)
        return out_poses, out_activations, assignments

    def get_config(self):
        return {**super().get_config(), "types": self.types, "kernel_size": self.kernel_size,
                "strides": self.strides, "routing_iterations": self.routing_iterations,
                "inverse_temperature": self.inverse_temperature,
                "kernel_init_stddev": self.kernel_init_stddev,
                "detach_assignments": self.detach_assignments}


@keras.saving.register_keras_serializable(package=PACKAGE)
class MatrixClassCaps(keras.layers.Layer):
    """Class capsules by EM routing, transforms shared over positions (Hinton et al. 2018).

    Inputs [poses (B, H, W, Tin, 16), activations (B, H, W, Tin)]: every capsule of the grid
    votes for every class with the 4x4 transform of its type, `kernel` (Tin, classes, 4, 4);
    beta_u and beta_a per class. Coordinate addition: the scaled row and column of the centre
    of the child's receptive field (`coordinates` = (rows, cols), each in [0, 1]; by default
    the cell centres (r + 0.5) / H) are added to the first two elements of the right-hand
    column of its vote matrix, entries (0, 3) and (1, 3), as the paper does.
    Outputs: poses (B, classes, 16), activations (B, classes), assignments (B, H*W*Tin, classes).
    """

    def __init__(self, classes: int, routing_iterations: int = 3,
                 inverse_temperature: float = 0.01, coordinate_addition: bool = True,
                 coordinates=None, kernel_init_stddev: float = 1.0,
                 detach_assignments: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.classes = int(classes)
        self.routing_iterations = int(routing_iterations)
        self.inverse_temperature = float(inverse_temperature)
        self.coordinate_addition = bool(coordinate_addition)
        self.coordinates = None if coordinates is None else \
            tuple(tuple(float(v) for v in axis) for axis in coordinates)
        self.kernel_init_stddev = float(kernel_init_stddev)
        self.detach_assignments = bool(detach_assignments)
        if self.routing_iterations < 1:
            raise ValueError(f"routing_iterations must be >= 1. Received: {routing_iterations}")

    def build(self, input_shape):
        poses, _ = _check_pair(self, input_shape)
        self.grid, self.input_types = tuple(poses[1:3]), poses[3]
        if self.coordinates is not None and \
                tuple(len(axis) for axis in self.coordinates) != self.grid:
            raise ValueError(f"coordinates must give {self.grid[0]} rows and {self.grid[1]} "
                             f"columns. Received: {self.coordinates}")
        self.kernel = _transforms(self, "kernel", (self.input_types, self.classes, 4, 4),
                                  self.kernel_init_stddev)
        self.beta_u = self.add_weight(name="beta_u", shape=(self.classes,), initializer="zeros")
        self.beta_a = self.add_weight(name="beta_a", shape=(self.classes,), initializer="zeros")

    def compute_output_shape(self, input_shape):
        poses, _ = _check_pair(self, input_shape)
        children = poses[1] * poses[2] * poses[3]
        return ((poses[0], self.classes, POSE), (poses[0], self.classes),
                (poses[0], children, self.classes))

    def coordinate_offsets(self):
        """(H, W, 1, 1, 4, 4) what coordinate addition adds to each vote matrix."""
        import numpy as np

        h, w = self.grid
        rows, cols = self.coordinates if self.coordinates is not None else \
            (tuple((r + 0.5) / h for r in range(h)), tuple((c + 0.5) / w for c in range(w)))
        offsets = np.zeros((h, w, 1, 1, POSE), np.float32)
        offsets[:, :, 0, 0, COORDINATE_ENTRIES[0]] = np.asarray(rows, np.float32)[:, None]
        offsets[:, :, 0, 0, COORDINATE_ENTRIES[1]] = np.asarray(cols, np.float32)[None, :]
        return offsets.reshape(h, w, 1, 1, 4, 4)

    def votes(self, poses):
        """(B, H*W*Tin, classes, 16), with coordinate addition when enabled."""
        h, w = self.grid
        matrices = ops.reshape(poses, (-1, h, w, self.input_types, 4, 4))
        votes = ops.einsum("byxirc,ioce->byxiore", matrices, self.kernel)
        if self.coordinate_addition:
            votes = votes + ops.convert_to_tensor(self.coordinate_offsets())
        return ops.reshape(votes, (-1, h * w * self.input_types, self.classes, POSE))

    def call(self, inputs):
        return _eagerly_compiled(self, self._route, inputs)

    def vote_count(self, inputs) -> int:
        poses = inputs[0]
        return int(poses.shape[0]) * math.prod(poses.shape[1:4]) * self.classes * POSE

    def _route(self, inputs):
        poses, activations = inputs
        h, w = self.grid
        flat = ops.reshape(activations, (-1, h * w * self.input_types))
        out_activations, out_poses, assignments = em_routing(
            self.votes(poses), flat, self.beta_u, self.beta_a, self.routing_iterations,
            self.inverse_temperature, detach_assignments=self.detach_assignments)
        return out_poses, out_activations, assignments

    def get_config(self):
        return {**super().get_config(), "classes": self.classes,
                "routing_iterations": self.routing_iterations,
                "inverse_temperature": self.inverse_temperature,
                "coordinate_addition": self.coordinate_addition,
                "coordinates": None if self.coordinates is None else
                [list(axis) for axis in self.coordinates],
                "kernel_init_stddev": self.kernel_init_stddev,
                "detach_assignments": self.detach_assignments}
