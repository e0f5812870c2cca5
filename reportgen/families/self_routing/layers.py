"""The Keras layers of Self-Routing capsules (Hahn, Pyeon & Kim, NeurIPS 2019): a convolutional
capsule layer and the class layer, routing as reportgen.families.self_routing.routing says.

W1, W2 and beta belong to a child *slot*: a (kernel position, child type) of a window, shared
by every window (the authors' SelfRouting2d, github.com/coder3000/SR-CapsNet, modules.py). In
the convolutional layer the children of a parent position are its k x k window of the zero-
padded grid, A types each, and every window is routed on its own (a child seen by several
windows gets a coupling in each). The class layer's window is the whole grid and it gives
activations only (W2 and beta, no W1).
"""

from __future__ import annotations

import math

import keras
import numpy as np
from keras import ops

from reportgen.families.self_routing.routing import self_routing_ops

PACKAGE = "reportgen"          # Keras serialisation (`.keras` files), as reportgen.capsnet.layers


def window_geometry(grid, kernel: int, stride: int, padding: int):
    """The windows of a k x k kernel with `stride` over a `grid` zero-padded by `padding`:
    (parent grid (Ph, Pw), index (Ph*Pw, k*k) of each window entry in the padded grid
    flattened row-major, selection (Ph*Pw, k*k, H*W) 1 where the entry is that real child).
    NumPy only (the constants the layers gather and scatter with)."""
    height, width = grid
    ph = (height + 2 * padding - kernel) // stride + 1
    pw = (width + 2 * padding - kernel) // stride + 1
    if ph < 1 or pw < 1:
        raise ValueError(f"A {kernel}x{kernel} kernel does not fit the {height}x{width} grid "
                         f"padded by {padding}.")
    padded_width = width + 2 * padding
    index = np.zeros((ph * pw, kernel * kernel), np.int32)
    selection = np.zeros((ph * pw, kernel * kernel, height * width), np.float32)
    for p in range(ph):
        for q in range(pw):
            for ky in range(kernel):
                for kx in range(kernel):
                    y, x = p * stride + ky, q * stride + kx        # in the padded grid
                    index[p * pw + q, ky * kernel + kx] = y * padded_width + x
                    if padding <= y < height + padding and padding <= x < width + padding:
                        child = (y - padding) * width + (x - padding)
                        selection[p * pw + q, ky * kernel + kx, child] = 1.0
    return (ph, pw), index, selection


class _SelfRoutingBase(keras.layers.Layer):
    """W2, beta (and W1 when it votes) per child slot; zero W2 and beta (uniform first
    coupling); W1 by PyTorch's kaiming_uniform_ on the authors' (slots, B·D, C) tensor, whose
    fan-in is B·D·C."""

    def _make_weights(self, slots: int, child_dims: int, with_votes: bool) -> None:
        parents, dims = self.parents, self.dims
        if with_votes:
            bound = math.sqrt(6.0 / (parents * dims * child_dims))
            self.w1 = self.add_weight(
                shape=(slots, child_dims, parents * dims), name="W1",
                initializer=keras.initializers.RandomUniform(-bound, bound))
        self.w2 = self.add_weight(shape=(slots, child_dims, parents), name="W2",
                                  initializer="zeros")
        self.beta = self.add_weight(shape=(slots, parents), name="beta", initializer="zeros")

    def _route(self, poses, activations, with_votes: bool):
        """poses (B, L, S, C), activations (B, L, S) of L windows of S slots -> (parent
        activations (B, L, P), poses (B, L, P, D) or None, coupling (B, L, S, P))."""
        logits = ops.einsum("blsc,scp->blsp", poses, self.w2) + self.beta
        votes = None
        if with_votes:
            votes = ops.einsum("blsc,scq->blsq", poses, self.w1)
            shape = ops.shape(votes)
            votes = ops.reshape(votes, (shape[0], shape[1], shape[2], self.parents, self.dims))
        return self_routing_ops(votes, activations, logits)


@keras.saving.register_keras_serializable(package=PACKAGE)
class SelfRoutingConvCaps(_SelfRoutingBase):
    """Convolutional Self-Routing capsules. Inputs [poses (B, H, W, A, C), activations (B, H,
    W, A)] -> [poses (B, Ph, Pw, types, dims), activations (B, Ph, Pw, types), routing (B,
    H*W*A, Ph*Pw*types)] (module docstring: the routing is dense, per child over all parents)."""

    def __init__(self, types: int, dims: int, kernel_size: int, strides: int = 1,
                 padding: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.parents, self.dims = int(types), int(dims)
        self.kernel_size, self.strides, self.padding = int(kernel_size), int(strides), int(padding)

    def build(self, input_shape):
        pose_shape, _ = input_shape
        _, height, width, types_in, child_dims = pose_shape
        self.grid, index, selection = window_geometry((height, width), self.kernel_size,
                                                      self.strides, self.padding)
        self.types_in = int(types_in)
        self._index = index
        self._selection = selection
        # a child's routing weights are divided by how many windows see it
        self._windows_per_child = np.maximum(selection.sum((0, 1)), 1.0)
        self._make_weights(self.kernel_size ** 2 * self.types_in, int(child_dims), True)

    def _windows(self, x):
        """(B, H, W, A, ...) -> (B, L, k*k, A, ...): the window entries, zero outside."""
        pad = self.padding
        x = ops.pad(x, [(0, 0), (pad, pad), (pad, pad)] + [(0, 0)] * (len(x.shape) - 3))
        shape = ops.shape(x)
        flat = ops.reshape(x, (shape[0], shape[1] * shape[2], *x.shape[3:]))
        return ops.take(flat, ops.convert_to_tensor(self._index), axis=1)

    def call(self, inputs):
        poses, activations = inputs
        kk_a = self.kernel_size ** 2 * self.types_in
        windows = len(self._index)
        pose_windows = self._windows(poses)
        b = ops.shape(poses)[0]
        pose_windows = ops.reshape(pose_windows, (b, windows, kk_a, poses.shape[-1]))
        act_windows = ops.reshape(self._windows(activations), (b, windows, kk_a))
        parent, out_poses, coupling = self._route(pose_windows, act_windows, True)
        ph, pw = self.grid
        out_poses = ops.reshape(out_poses, (b, ph, pw, self.parents, self.dims))
        parent = ops.reshape(parent, (b, ph, pw, self.parents))
        coupling = ops.reshape(coupling, (b, windows, self.kernel_size ** 2, self.types_in,
                                          self.parents))
        dense = ops.einsum("lky,blkao->byalo", ops.convert_to_tensor(self._selection), coupling)
        dense = dense / ops.convert_to_tensor(
            self._windows_per_child.astype(np.float32))[None, :, None, None, None]
        children = self._selection.shape[-1] * self.types_in
        dense = ops.reshape(dense, (b, children, windows * self.parents))
        return out_poses, parent, dense

    def get_config(self):
        return {**super().get_config(), "types": self.parents, "dims": self.dims,
                "kernel_size": self.kernel_size, "strides": self.strides,
                "padding": self.padding}


@keras.saving.register_keras_serializable(package=PACKAGE)
class SelfRoutingClassCaps(_SelfRoutingBase):
    """Self-Routing class capsules over the whole grid, activations only. Inputs [poses (B, H,
    W, A, C), activations (B, H, W, A)] -> [activations (B, classes), coupling (B, H*W*A,
    classes)]."""

    def __init__(self, classes: int, **kwargs):
        super().__init__(**kwargs)
        self.parents, self.dims = int(classes), 0

    def build(self, input_shape):
        pose_shape, _ = input_shape
        _, height, width, types_in, child_dims = pose_shape
        self.children = int(height * width * types_in)
        self._make_weights(self.children, int(child_dims), False)

    def call(self, inputs):
        poses, activations = inputs
        b = ops.shape(poses)[0]
        poses = ops.reshape(poses, (b, 1, self.children, poses.shape[-1]))
        activations = ops.reshape(activations, (b, 1, self.children))
        parent, _, coupling = self._route(poses, activations, False)
        return parent[:, 0], coupling[:, 0]

    def get_config(self):
        return {**super().get_config(), "classes": self.parents}
