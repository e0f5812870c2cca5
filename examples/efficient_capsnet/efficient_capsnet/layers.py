"""Efficient-CapsNet's Keras 3 layers (Mazzia, Salvetti & Chiaberge 2021): the squash variant,
the primary capsules of a depthwise convolution and the fully connected capsules routed by
self-attention. Weights are created in build(), call() uses keras.ops only, and every layer
gives its constructor arguments back in get_config(), so a model saved as `.keras` loads again.

Capsule order: primary capsule i = (row * grid width + column) * types + type, as everywhere in
reportgen.
"""

from __future__ import annotations

import keras
from keras import ops

from reportgen.sdk import safe_norm

PACKAGE = "efficient_capsnet"


def efficient_squash(s, epsilon: float = 1e-20, axis: int = -1):
    """squash(s) = (1 - 1/e^|s|) s/|s|   (Mazzia et al. 2021, eq. 2).

    Written as the authors compute it, (1 - 1/(e^|s| + epsilon)) s/(|s| + epsilon), so that
    s = 0 gives 0; |s| is reportgen's exact safe_norm (0 with a zero gradient at 0). Unlike
    Sabour et al.'s squash it saturates fast: a capsule of length 3 is squashed to 0.95.
    """
    n = safe_norm(s, axis=axis, keepdims=True)
    return (1.0 - 1.0 / (ops.exp(n) + epsilon)) * (s / (n + epsilon))


def self_attention_routing(votes, bias=None, epsilon: float = 1e-20):
    """Self-attention routing (Mazzia et al. 2021, eqs. 3-5) in keras.ops, batch first.

    votes (B, children, parents, D) u_hat[j|i]; bias (children, parents) b_ij or None ->
    (parent capsules v_j (B, parents, D), coupling c_ij (B, children, parents), the weights
    c_ij + b_ij the votes are summed with (B, children, parents)).

    For each parent j the self-attention matrix of its votes is A_j = U_j U_j^T / sqrt(D)
    (children x children); a child's logit is its row sum, sum_k A_j[i, k] = u_hat[j|i] .
    sum_k u_hat[j|k] / sqrt(D), so A_j is never formed. The softmax is over the parents.
    """
    dims = votes.shape[-1]
    total = ops.sum(votes, axis=1, keepdims=True)                       # (B, 1, P, D)
    logits = ops.sum(votes * total, axis=-1) / ops.sqrt(ops.cast(dims, votes.dtype))
    coupling = ops.softmax(logits, axis=-1)                             # (B, N, P)
    weights = coupling if bias is None else coupling + bias
    s = ops.sum(ops.expand_dims(weights, -1) * votes, axis=1)           # (B, P, D)
    return efficient_squash(s, epsilon), coupling, weights


@keras.saving.register_keras_serializable(package=PACKAGE)
class PrimaryCaps(keras.layers.Layer):
    """The primary capsules of the depthwise convolution's output: its channels read as
    `types` capsules of `dims` values per grid cell, squashed by Efficient-CapsNet's squash.
    Input (B, H, W, types*dims); output (B, H*W*types, dims). No weights (the depthwise
    convolution before it, a keras.layers.DepthwiseConv2D, holds them)."""

    def __init__(self, types: int, dims: int, squash_epsilon: float = 1e-20, **kwargs):
        super().__init__(**kwargs)
        self.types, self.dims = int(types), int(dims)
        self.squash_epsilon = float(squash_epsilon)

    def compute_output_shape(self, input_shape):
        batch, h, w, channels = input_shape
        if channels != self.types * self.dims:
            raise ValueError(f"PrimaryCaps expects {self.types * self.dims} channels "
                             f"({self.types} types x {self.dims} dims). Received: {channels}")
        return (batch, h * w * self.types, self.dims)

    def call(self, inputs):
        h, w = inputs.shape[1], inputs.shape[2]
        poses = ops.reshape(inputs, (-1, h * w * self.types, self.dims))
        return efficient_squash(poses, self.squash_epsilon)

    def get_config(self):
        return {**super().get_config(), "types": self.types, "dims": self.dims,
                "squash_epsilon": self.squash_epsilon}


@keras.saving.register_keras_serializable(package=PACKAGE)
class FCCaps(keras.layers.Layer):
    """Fully connected capsules by self-attention routing (Mazzia et al. 2021, section
    "Self-attention routing"). Input: primary capsules (B, children, child dims). Outputs:
    [class capsules (B, classes, dims), coupling c_ij (B, children, classes), weights c_ij +
    b_ij (B, children, classes)].

    Weights in the authors' layout (their FCCaps: W (classes, children, child dims, dims),
    b (classes, children, 1)), so their checkpoints convert by copying: W he_normal, b zeros.
    `routing_bias` False leaves b out (the ablation without it).
    """

    def __init__(self, classes: int, dims: int, routing_bias: bool = True,
                 squash_epsilon: float = 1e-20, kernel_initializer="he_normal", **kwargs):
        super().__init__(**kwargs)
        self.classes, self.dims = int(classes), int(dims)
        self.routing_bias = bool(routing_bias)
        self.squash_epsilon = float(squash_epsilon)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, input_shape):
        _, children, child_dims = input_shape
        self.children = int(children)
        self.W = self.add_weight(shape=(self.classes, self.children, int(child_dims), self.dims),
                                 initializer=self.kernel_initializer, name="W")
        self.b = None
        if self.routing_bias:
            self.b = self.add_weight(shape=(self.classes, self.children, 1),
                                     initializer="zeros", name="b")

    def votes(self, primary):
        """u_hat[j|i] = W_ij u_i: primary capsules (B, children, child dims) -> (B, children,
        classes, dims)."""
        return ops.einsum("bnd,knde->bnke", primary, self.W)

    def bias(self):
        """b_ij as (children, classes), or None without the routing bias."""
        return None if self.b is None else ops.transpose(self.b[..., 0])

    def call(self, primary):
        return self_attention_routing(self.votes(primary), self.bias(), self.squash_epsilon)

    def compute_output_shape(self, input_shape):
        batch, children, _ = input_shape
        return [(batch, self.classes, self.dims), (batch, children, self.classes),
                (batch, children, self.classes)]

    def get_config(self):
        return {**super().get_config(), "classes": self.classes, "dims": self.dims,
                "routing_bias": self.routing_bias, "squash_epsilon": self.squash_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer)}
