"""Self-Routing capsules (Hahn, Pyeon & Kim, NeurIPS 2019): the routing as a NumPy function, its
Keras layers and the Keras model of the family (reportgen.families.self_routing describes it).

No iterations: each child capsule i (pose u_i of C values, activation a_i in (0, 1)) predicts
its own routing to the parent types j from its pose:

    vote            u_hat_j|i = W1_i u_i                 (W1_i: (B·D, C))
    routing logit   b_ij = (W2_i u_i)_j + beta_ij        (W2_i: (B, C); W2 = beta = 0 at first)
    coupling        c_ij = softmax_j(b_ij)               (over the parents, per child)
    activation      a_j = sum_i a_i c_ij / sum_i a_i
    pose            v_j = sum_i (a_i c_ij / sum_k a_k c_kj) u_hat_j|i        (no squash)

W1, W2 and beta belong to a child *slot*: a (kernel position, child type) of a window, shared
by every window (the authors' SelfRouting2d, github.com/coder3000/SR-CapsNet, modules.py). In
the convolutional layer the children of a parent position are its k x k window of the zero-
padded grid, A types each, and every window is routed on its own (a child seen by several
windows gets a coupling in each). The class layer's window is the whole grid and it gives
activations only (W2 and beta, no W1).

The Keras model's outputs: conv maps by layer name ("conv1" after BatchNorm + ReLU, the two
primary convolutions after their BatchNorm and, for the activations, the sigmoid); for each
capsule layer L on a grid "L_poses" (B, H, W, types, D) and "L_activations" (B, H, W, types);
"L_routing" (B, children, parents) the routing weights out of L, dense and each child's
summing to 1 over every parent it reaches: its coupling in each window divided by the
number of windows that see it (so a child shares itself out like an EM assignment; in the
class layer one window, the coupling itself); "activations" (B, classes) the class activations
(they sum to 1, since every child's couplings do) and "class_capsules" (B, classes, 1) the
same as 1-value poses (the class layer has none of its own). Loss: the negative log-likelihood
of the true class's activation (the authors' `out.log()` and NLLLoss).
"""

from __future__ import annotations

import math

import keras
import numpy as np
from keras import ops

PACKAGE = "reportgen"          # Keras serialisation (`.keras` files), as reportgen.capsnet.layers
# Floor of the sums divided by (sum_i a_i, sum_k a_k c_kj): 0/0 -> 0 for a window of padding.
TINY = 1e-30


def self_routing(votes, activations, logits):
    """Self-routing of children to parents, NumPy in and out (batch first).

    votes (B, children, parents, D) or None (activations only); activations (B, children);
    logits (B, children, parents) -> (activations (B, parents), poses (B, parents, D) or None,
    coupling (B, children, parents)).
    """
    logits = np.asarray(logits)
    a = np.asarray(activations)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    coupling = exp / exp.sum(axis=-1, keepdims=True)
    weighted = a[..., None] * coupling                                      # (B, N, P)
    parent = weighted.sum(axis=1) / np.maximum(a.sum(axis=1, keepdims=True), TINY)
    poses = None
    if votes is not None:
        share = weighted / np.maximum(weighted.sum(axis=1, keepdims=True), TINY)
        poses = np.einsum("bnp,bnpd->bpd", share, np.asarray(votes))
    return parent, poses, coupling


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


def _routing_ops(votes, activations, logits):
    """`self_routing` in keras.ops, over any leading axes: votes (..., N, P, D) or None,
    activations (..., N), logits (..., N, P)."""
    coupling = ops.softmax(logits, axis=-1)
    weighted = ops.expand_dims(activations, -1) * coupling
    total = ops.maximum(ops.sum(activations, axis=-1, keepdims=True), TINY)
    parent = ops.sum(weighted, axis=-2) / total
    poses = None
    if votes is not None:
        share = weighted / ops.maximum(ops.sum(weighted, axis=-2, keepdims=True), TINY)
        poses = ops.sum(ops.expand_dims(share, -1) * votes, axis=-3)
    return parent, poses, coupling


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
        return _routing_ops(votes, activations, logits)


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


def build_self_routing(params):
    """The Keras model of a Self-Routing description (the authors' SmallNet in SR mode): a
    reportgen.capsnet.network.Network whose loss is the negative log-likelihood."""
    from keras import layers

    from reportgen.capsnet.description import describe
    from reportgen.capsnet.network import Network

    description = describe(params)
    sr = params.family_settings
    pad = sr.padding

    def batch_norm(name):
        # PyTorch's BatchNorm2d: epsilon 1e-5; `batch_norm_momentum` is Keras's (PyTorch 0.1 =
        # Keras 0.9)
        return layers.BatchNormalization(momentum=sr.batch_norm_momentum, epsilon=1e-5,
                                         name=name)

    def conv(conv_desc, x):
        """zero padding, the convolution (no bias), BatchNorm, its activation."""
        x = layers.ZeroPadding2D(pad, name=f"{conv_desc.name}_padding")(x)
        x = layers.Conv2D(conv_desc.filters, conv_desc.kernel_size, strides=conv_desc.strides,
                          padding="valid", use_bias=False, kernel_initializer="he_uniform",
                          name=conv_desc.name)(x)
        x = batch_norm(f"{conv_desc.name}_batch_norm")(x)
        if conv_desc.activation != "none":
            x = layers.Activation(conv_desc.activation, name=f"{conv_desc.name}_"
                                  f"{conv_desc.activation}")(x)
        return x

    image = keras.Input(params.input_shape, name="image")
    outputs = {}
    *plain, pose_conv, activation_conv = description.conv_layers
    x = image
    for conv_desc in plain:
        x = outputs[conv_desc.name] = conv(conv_desc, x)
    pose_maps = outputs[pose_conv.name] = conv(pose_conv, x)
    activations = outputs[activation_conv.name] = conv(activation_conv, x)
    primary, conv_caps_desc, class_desc = description.capsule_layers
    gh, gw = primary.grid
    poses = layers.Reshape((gh, gw, primary.types, primary.pose_size), name=primary.name)(
        pose_maps)
    outputs[f"{primary.name}_poses"] = poses
    outputs[f"{primary.name}_activations"] = activations
    conv_caps = SelfRoutingConvCaps(conv_caps_desc.types, conv_caps_desc.pose_size,
                                    conv_caps_desc.kernel_size[0], conv_caps_desc.strides[0],
                                    pad, name=conv_caps_desc.name)
    poses, activations, routing = conv_caps([poses, activations])
    outputs[f"{primary.name}_routing"] = routing
    ch, cw = conv_caps_desc.grid
    channels = conv_caps_desc.types * conv_caps_desc.pose_size
    poses = layers.Reshape((ch, cw, channels))(poses)
    poses = batch_norm(f"{conv_caps_desc.name}_batch_norm")(poses)
    poses = layers.Reshape((ch, cw, conv_caps_desc.types, conv_caps_desc.pose_size))(poses)
    outputs[f"{conv_caps_desc.name}_poses"] = poses
    outputs[f"{conv_caps_desc.name}_activations"] = activations
    class_caps = SelfRoutingClassCaps(class_desc.types, name=class_desc.name)
    scores, routing = class_caps([poses, activations])
    outputs[f"{conv_caps_desc.name}_routing"] = routing
    class_vectors = layers.Reshape((class_desc.types, 1), name="class_activation_poses")(scores)
    outputs["class_capsules"] = class_vectors
    outputs["activations"] = scores
    model = keras.Model(image, outputs, name="self_routing_capsnet")
    encoder = keras.Model(image, [class_vectors, scores], name="self_routing_encoder")

    def training_losses(images, one_hot):
        _, probabilities = encoder(images, training=True)
        nll = -ops.sum(one_hot * ops.log(ops.maximum(probabilities, TINY)), axis=-1)
        return nll, ops.zeros_like(nll), probabilities

    return Network(params=params, description=description, model=model, encoder=encoder,
                   decoder=None, primary_conv=model.get_layer(pose_conv.name),
                   class_caps=class_caps, training_losses=training_losses,
                   capsule_layers={conv_caps_desc.name: conv_caps, class_desc.name: class_caps})
