"""GraCapsNet's multi-head graph pooling (Gu, Wu & Tresp, AAAI 2021; Gu 2022, Ch.4) in Keras 3.

The primary capsules of a (gh, gw) grid with `heads` types are `heads` graphs of gh*gw nodes
each (head l = capsule type l). Every capsule is projected once, shared by all classes:
u'_i = W_i u_i (input_dims -> dims). Per head l, with X^l (nodes x dims) its projected capsules
and A (nodes x nodes) the Gaussian adjacency of the grid positions,

    A_pq  = exp(-|p - q|^2 / (2 sigma^2))            (p, q grid positions, in cells)
    Att^l = softmax over nodes of (A X^l W)          (nodes x classes; W: dims x classes shared)
    S^l   = Att^l^T X^l                              (classes x dims)
    V     = squash(mean over heads of S^l)           (class capsules)

The attention Att^l is the routing weight of this layer: every column sums to 1 over the nodes,
and E = mean over heads of Att^l is the model's built-in explanation (column y on the grid: where
the prediction y comes from). Capsule index order as reportgen.capsnet.layers: primary capsule
i = (row * gw + col) * heads + head.

Initialisation: W uniform in ±`pooling_init_range` (10, as the authors' public code), so that
the attention starts peaked rather than uniform; with a uniform average over the nodes and the
heads, the squashed class capsules start near zero length and the margin loss has no gradient
to speak of (measured: no learning in 40 batches on MNIST, 64% accuracy with this init).
"""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from reportgen.capsnet.ops import squash

PACKAGE = "reportgen"


def grid_adjacency(grid: tuple[int, int], sigma: float) -> np.ndarray:
    """(gh*gw, gh*gw) float32 A_pq = exp(-|p - q|^2 / (2 sigma^2)), nodes in row-major order."""
    rows, cols = np.meshgrid(np.arange(grid[0]), np.arange(grid[1]), indexing="ij")
    points = np.stack([rows.ravel(), cols.ravel()], -1).astype(np.float64)
    squared = ((points[:, None, :] - points[None, :, :]) ** 2).sum(-1)
    return np.exp(-squared / (2.0 * float(sigma) ** 2)).astype(np.float32)


@keras.saving.register_keras_serializable(package=PACKAGE)
class GraphPooling(keras.layers.Layer):
    """Primary capsules (batch, gh*gw*heads, input_dims) -> [class capsules (batch, classes,
    dims), attention (batch, heads, gh*gw, classes)]. Weights: the projections W_i
    (capsules, dims, input_dims), no bias, and the shared pooling matrix W (dims, classes)."""

    def __init__(self, classes: int, dims: int, heads: int, grid, sigma: float = 2.0,
                 kernel_init_stddev: float = 0.1, pooling_init_range: float = 10.0, **kwargs):
        super().__init__(**kwargs)
        self.classes = int(classes)
        self.dims = int(dims)
        self.heads = int(heads)
        self.grid = (int(grid[0]), int(grid[1]))
        self.sigma = float(sigma)
        self.kernel_init_stddev = float(kernel_init_stddev)
        self.pooling_init_range = float(pooling_init_range)
        if self.sigma <= 0:
            raise ValueError(f"sigma must be > 0. Received: {sigma}")

    @property
    def nodes(self) -> int:
        return self.grid[0] * self.grid[1]

    def build(self, input_shape):
        _, capsules, input_dims = input_shape
        if capsules != self.nodes * self.heads:
            raise ValueError(f"GraphPooling expects {self.nodes * self.heads} primary capsules "
                             f"({self.grid[0]}x{self.grid[1]} grid x {self.heads} heads). "
                             f"Received: {capsules}")
        self.projection = self.add_weight(
            name="projection", shape=(capsules, self.dims, input_dims),
            initializer=keras.initializers.RandomNormal(stddev=self.kernel_init_stddev))
        limit = self.pooling_init_range
        self.pooling = self.add_weight(
            name="pooling", shape=(self.dims, self.classes),
            initializer=keras.initializers.RandomUniform(-limit, limit))

    def heads_nodes(self, primary):
        """X^l for every head: projected capsules (batch, heads, nodes, dims)."""
        projected = ops.einsum("bik,idk->bid", primary, self.projection)
        grouped = ops.reshape(projected, (-1, self.nodes, self.heads, self.dims))
        return ops.transpose(grouped, (0, 2, 1, 3))

    def call(self, primary):
        x = self.heads_nodes(primary)
        adjacency = ops.convert_to_tensor(grid_adjacency(self.grid, self.sigma), x.dtype)
        scores = ops.einsum("pq,blqd,dk->blpk", adjacency, x, self.pooling)
        attention = ops.softmax(scores, axis=2)                       # over the nodes
        pooled = ops.einsum("blpk,blpd->blkd", attention, x)          # S^l (b, heads, K, D)
        return squash(ops.mean(pooled, axis=1)), attention

    def compute_output_shape(self, input_shape):
        batch = input_shape[0]
        return [(batch, self.classes, self.dims), (batch, self.heads, self.nodes, self.classes)]

    def get_config(self):
        return {**super().get_config(), "classes": self.classes, "dims": self.dims,
                "heads": self.heads, "grid": list(self.grid), "sigma": self.sigma,
                "kernel_init_stddev": self.kernel_init_stddev,
                "pooling_init_range": self.pooling_init_range}


@keras.saving.register_keras_serializable(package=PACKAGE)
class HeadMean(keras.layers.Layer):
    """Attention (batch, heads, gh*gw, classes) -> E (batch, classes, gh, gw): the mean over the
    heads, each class's column on the grid (Gu, Wu & Tresp 2021, eq. 9): GraCapsNet's built-in
    explanation. No weights."""

    def __init__(self, grid, **kwargs):
        super().__init__(**kwargs)
        self.grid = (int(grid[0]), int(grid[1]))

    def call(self, attention):
        mean = ops.mean(attention, axis=1)                            # (b, nodes, classes)
        return ops.reshape(ops.transpose(mean, (0, 2, 1)), (-1, mean.shape[-1], *self.grid))

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[3], *self.grid)

    def get_config(self):
        return {**super().get_config(), "grid": list(self.grid)}
