"""The Keras 3 layers of capsules with inverted dot-product attention routing (Tsai, Srivastava,
Goh & Salakhutdinov, ICLR 2020), as the authors' PyTorch code computes them
(github.com/apple/ml-capsules-inverted-attention-routing, src/layers.py: CapsuleCONV,
CapsuleFC; with the `unfold` window extraction of the first author's fork,
cinjon/ml-capsules-inverted-attention-routing, which fixes that repository's PR #1).

A capsule is a pose only: q x q values (a 4x4 matrix in the paper, held flattened row-major as
16 values), no activation. One routing step of a capsule layer, given its children's poses
p_i and its parents' poses p_j from the previous iteration (or none):

    v_ij = p_i W_ij                                   (q x q times q x q; the authors' einsum
                                                       'bnax,nxdm->bmad', pose on the left)
    a_ij = <p_j, v_ij> / sqrt(q*q)                    (agreement; the code's `scale`)
    r_ij = softmax over the parents j of a_ij         (no parents yet: a_ij = 0, r_ij uniform)
    p_j  = LayerNorm(sum_i r_ij v_ij)                 (over the q*q values, learnt scale/offset)

In the convolutional layer (ConvCaps) a parent at output position (y, x) sees the K x K window
of children below it, each with a W of its own per kernel position, input type and output
type; the softmax runs over the output types at that position, so a child covered by several
windows has one normalised row of r per window. The iterations across layers (concurrent or
sequential) are unrolled by the model (idpa_capsnet.network), which calls each layer once per
iteration with the poses of the iteration before.

Weights are created in build(), call() uses keras.ops only, and every layer gives its
constructor arguments back in get_config(), so a model saved as `.keras` loads again.
Capsule order: child i = (row * grid width + column) * types + type, as everywhere in
reportgen (the authors flatten type first; idpa_capsnet's tests map one order to the other).
"""

from __future__ import annotations

import math

import keras
import numpy as np
from keras import ops

PACKAGE = "idpa_capsnet"


def layer_norm(x, gamma, beta, epsilon: float):
    """LayerNorm over the last axis (Ba, Kiros & Hinton 2016) as torch.nn.LayerNorm computes it:
    (x - mean) / sqrt(biased variance + epsilon) * gamma + beta."""
    mean = ops.mean(x, axis=-1, keepdims=True)
    centred = x - mean
    variance = ops.mean(ops.square(centred), axis=-1, keepdims=True)
    return centred * ops.rsqrt(variance + epsilon) * gamma + beta


def _side(pose_size: int) -> int:
    side = math.isqrt(int(pose_size))
    if side * side != pose_size:
        raise ValueError(f"A matrix pose has a square number of values (q x q). Received: "
                         f"{pose_size}")
    return side


def window_index(grid, kernel_size: int, strides: int) -> np.ndarray:
    """(Ph * Pw * K * K,) the flattened grid cell (row * W + column) of every window entry of a
    valid K x K convolution with stride s over a grid (H, W): entry (y, x, k, l) is cell
    (y s + k, x s + l). What torch's `unfold(2, K, s).unfold(3, K, s)` selects."""
    height, width = grid
    ph, pw = (height - kernel_size) // strides + 1, (width - kernel_size) // strides + 1
    y, x, k, l = np.meshgrid(np.arange(ph), np.arange(pw), np.arange(kernel_size),
                             np.arange(kernel_size), indexing="ij")
    return ((y * strides + k) * width + (x * strides + l)).reshape(-1).astype(np.int32)


class _Routed(keras.layers.Layer):
    """What both capsule layers share: the parents' LayerNorm (scale `gamma`, offset `beta`
    over the pose values) and the attention step from votes to parents."""

    def __init__(self, epsilon: float = 1e-5, kernel_initializer=None, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = float(epsilon)
        # None: the authors' initialisation, Normal(0, sqrt(out types / (q x fan-in))) (their
        # weight_init_const); anything else is a Keras initializer
        self.kernel_initializer = (None if kernel_initializer is None
                                   else keras.initializers.get(kernel_initializer))

    def _initializer(self, stddev: float):
        if self.kernel_initializer is None:
            return keras.initializers.RandomNormal(0.0, stddev)
        return self.kernel_initializer

    def _make_norm(self, pose_size: int) -> None:
        self.gamma = self.add_weight(shape=(pose_size,), initializer="ones", name="gamma")
        self.beta = self.add_weight(shape=(pose_size,), initializer="zeros", name="beta")

    def _route(self, votes, parents):
        """votes (..., children, parents, D) and the parents' poses (..., parents, D) or None ->
        (LayerNorm'd parent poses (..., parents, D), r (..., children, parents))."""
        if parents is None:
            agreement = ops.zeros_like(votes[..., 0])
        else:
            scale = 1.0 / math.sqrt(votes.shape[-1])
            agreement = ops.sum(votes * ops.expand_dims(parents, -3), axis=-1) * scale
        weights = ops.softmax(agreement, axis=-1)
        s = ops.sum(ops.expand_dims(weights, -1) * votes, axis=-3)
        return layer_norm(s, self.gamma, self.beta, self.epsilon), weights

    def get_config(self):
        init = (None if self.kernel_initializer is None
                else keras.initializers.serialize(self.kernel_initializer))
        return {**super().get_config(), "epsilon": self.epsilon, "kernel_initializer": init}


@keras.saving.register_keras_serializable(package=PACKAGE)
class PrimaryCaps(_Routed):
    """The primary capsules of a convolution's output: its channels read as `types` poses of
    `pose_size` values per grid cell (channel = type * pose_size + value, as the authors'
    permute + view), each LayerNorm'd over its values. Input (B, H, W, types * pose_size);
    output (B, H, W, types, pose_size). Weights: the LayerNorm's scale and offset."""

    def __init__(self, types: int, pose_size: int, epsilon: float = 1e-5, **kwargs):
        super().__init__(epsilon=epsilon, **kwargs)
        self.types, self.pose_size = int(types), int(pose_size)

    def build(self, input_shape):
        if input_shape[-1] != self.types * self.pose_size:
            raise ValueError(f"PrimaryCaps expects {self.types * self.pose_size} channels "
                             f"({self.types} types x {self.pose_size} values). Received: "
                             f"{input_shape[-1]}")
        self._make_norm(self.pose_size)

    def call(self, inputs):
        h, w = inputs.shape[1], inputs.shape[2]
        poses = ops.reshape(inputs, (-1, h, w, self.types, self.pose_size))
        return layer_norm(poses, self.gamma, self.beta, self.epsilon)

    def compute_output_shape(self, input_shape):
        return (*input_shape[:3], self.types, self.pose_size)

    def get_config(self):
        config = super().get_config()
        config.pop("kernel_initializer")
        return {**config, "types": self.types, "pose_size": self.pose_size}


@keras.saving.register_keras_serializable(package=PACKAGE)
class ConvCaps(_Routed):
    """A convolutional capsule layer (the authors' CapsuleCONV with matrix poses, valid
    padding). Inputs: the children's poses (B, H, W, Tin, D) and, after the first iteration,
    the parents' poses of the iteration before (B, Ph, Pw, Tout, D). Outputs: [parent poses
    (B, Ph, Pw, Tout, D), routing weights in window form (B, Ph, Pw, K, K, Tin, Tout)]: r of
    the child at window entry (k, l) of type n for parent type m at (y, x); they sum to 1 over
    m. W in the authors' layout (K, K, Tin, q, q, Tout), so their weights copy over.
    """

    def __init__(self, types: int, kernel_size: int, strides: int = 1, epsilon: float = 1e-5,
                 kernel_initializer=None, **kwargs):
        super().__init__(epsilon=epsilon, kernel_initializer=kernel_initializer, **kwargs)
        self.types, self.kernel_size, self.strides = int(types), int(kernel_size), int(strides)

    def build(self, children_shape, parents_shape=None):
        _, height, width, types_in, pose_size = children_shape
        self.grid_in = (int(height), int(width))
        self.types_in, self.pose_size = int(types_in), int(pose_size)
        self.side = _side(self.pose_size)
        k = self.kernel_size
        self.grid = tuple((g - k) // self.strides + 1 for g in self.grid_in)
        if min(self.grid) < 1:
            raise ValueError(f"ConvCaps: a {k}x{k} kernel does not fit the {height}x{width} "
                             f"grid")
        self._index = window_index(self.grid_in, k, self.strides)
        stddev = math.sqrt(self.types / (self.side * self.types_in * k * k))
        self.W = self.add_weight(shape=(k, k, self.types_in, self.side, self.side, self.types),
                                 initializer=self._initializer(stddev), name="W")
        self._make_norm(self.pose_size)

    def windows(self, children):
        """(B, H, W, Tin, D) -> (B, Ph * Pw, K * K, Tin, D): the children under each window."""
        h, w = self.grid_in
        flat = ops.reshape(children, (-1, h * w, self.types_in, self.pose_size))
        taken = ops.take(flat, ops.convert_to_tensor(self._index), axis=1)
        return ops.reshape(taken, (-1, self.grid[0] * self.grid[1], self.kernel_size ** 2,
                                   self.types_in, self.pose_size))

    def votes(self, children):
        """v_ij = p_i W_ij for every window entry: (B, Ph * Pw, K * K, Tin, Tout, D)."""
        q, kk = self.side, self.kernel_size ** 2
        u = ops.reshape(self.windows(children), (-1, self.grid[0] * self.grid[1], kk,
                                                 self.types_in, q, q))
        W = ops.reshape(self.W, (kk, self.types_in, q, q, self.types))
        v = ops.einsum("bpcnax,cnxdm->bpcnmad", u, W)
        return ops.reshape(v, (-1, self.grid[0] * self.grid[1], kk, self.types_in, self.types,
                               self.pose_size))

    def call(self, children, parents=None):
        ph, pw = self.grid
        k = self.kernel_size
        votes = self.votes(children)                       # (B, P, KK, Tin, Tout, D)
        votes = ops.reshape(votes, (-1, ph * pw, k * k * self.types_in, self.types,
                                    self.pose_size))
        if parents is not None:
            parents = ops.reshape(parents, (-1, ph * pw, self.types, self.pose_size))
        poses, weights = self._route(votes, parents)
        poses = ops.reshape(poses, (-1, ph, pw, self.types, self.pose_size))
        weights = ops.reshape(weights, (-1, ph, pw, k, k, self.types_in, self.types))
        return poses, weights

    def compute_output_shape(self, children_shape, parents_shape=None):
        batch, height, width, types_in, pose_size = children_shape
        k, s = self.kernel_size, self.strides
        ph, pw = (height - k) // s + 1, (width - k) // s + 1
        return [(batch, ph, pw, self.types, pose_size), (batch, ph, pw, k, k, types_in,
                                                          self.types)]

    def get_config(self):
        return {**super().get_config(), "types": self.types, "kernel_size": self.kernel_size,
                "strides": self.strides}


@keras.saving.register_keras_serializable(package=PACKAGE)
class ClassCaps(_Routed):
    """A fully connected capsule layer (the authors' CapsuleFC with matrix poses): every child
    votes for every class. Inputs: the children's poses, on a grid (B, H, W, T, D) or flat
    (B, N, D), and after the first iteration the class poses of the iteration before (B,
    classes, D). Outputs: [class poses (B, classes, D), routing weights (B, N, classes)], which
    sum to 1 over the classes. W (N, q, q, classes) in the authors' layout, children in
    reportgen's order."""

    def __init__(self, classes: int, epsilon: float = 1e-5, kernel_initializer=None, **kwargs):
        super().__init__(epsilon=epsilon, kernel_initializer=kernel_initializer, **kwargs)
        self.classes = int(classes)

    def build(self, children_shape, parents_shape=None):
        self.children = int(math.prod(children_shape[1:-1]))
        self.pose_size = int(children_shape[-1])
        self.side = _side(self.pose_size)
        stddev = math.sqrt(self.classes / (self.side * self.children))
        self.W = self.add_weight(shape=(self.children, self.side, self.side, self.classes),
                                 initializer=self._initializer(stddev), name="W")
        self._make_norm(self.pose_size)

    def votes(self, children):
        """v_ij = p_i W_ij: (B, N, classes, D)."""
        q = self.side
        u = ops.reshape(children, (-1, self.children, q, q))
        v = ops.einsum("bnax,nxdm->bnmad", u, self.W)
        return ops.reshape(v, (-1, self.children, self.classes, self.pose_size))

    def call(self, children, parents=None):
        return self._route(self.votes(children), parents)

    def compute_output_shape(self, children_shape, parents_shape=None):
        children = math.prod(children_shape[1:-1])
        return [(children_shape[0], self.classes, children_shape[-1]),
                (children_shape[0], children, self.classes)]

    def get_config(self):
        return {**super().get_config(), "classes": self.classes}


@keras.saving.register_keras_serializable(package=PACKAGE)
class Readout(keras.layers.Layer):
    """The learnt readout of the class poses: one linear map D -> 1 shared by every class (the
    authors' `final_fc = nn.Linear(caps_dim, 1)`), (B, classes, D) -> logits (B, classes).
    Initialised as torch.nn.Linear: weight and bias uniform in +-1/sqrt(D)."""

    def build(self, input_shape):
        dims = int(input_shape[-1])
        bound = 1.0 / math.sqrt(dims)
        init = keras.initializers.RandomUniform(-bound, bound)
        self.kernel = self.add_weight(shape=(dims,), initializer=init, name="kernel")
        self.bias = self.add_weight(shape=(), initializer=init, name="bias")

    def call(self, poses):
        return ops.sum(poses * self.kernel, axis=-1) + self.bias

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1])
