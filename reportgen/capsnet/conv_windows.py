"""Which children a convolutional capsule layer's parents see: the kernel windows of a 'valid'
convolution over a capsule grid, as 0/1 selections (NumPy) and the Keras ops that gather and
scatter window entries. Routing weights into such a layer come in window form (B, Ph, Pw, K, K,
Tin, Tout): EM's assignments (Hinton, Sabour & Frosst 2018), each child's summing to 1 over every
window that sees it (`sums_over="parents"`), or one distribution per window
(`sums_over="window"`); `densify` turns them into the dense (B, children, parents) form every
analysis reads.

Importing this module imports neither TensorFlow nor Keras (the two Keras methods import
keras.ops when called).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_MASKED = -1e30         # a log-value that exp() turns into exactly 0


@dataclass(frozen=True)
class ConvWindows:
    """Which children a convolutional capsule layer's parents see ('valid' padding).

    Child positions form an (H, W) grid; parent position (p, q) sees the children at rows
    p*stride … p*stride + kernel - 1 and columns q*stride … q*stride + kernel - 1. A window entry
    (p, q, ky, kx) is the child at (p*stride + ky, q*stride + kx).
    """

    child_grid: tuple[int, int]
    kernel: int
    stride: int

    def __post_init__(self):
        object.__setattr__(self, "child_grid", tuple(int(v) for v in self.child_grid))
        if self.kernel < 1 or self.stride < 1:
            raise ValueError(f"kernel and stride must be >= 1. Received: {self.kernel}, "
                             f"{self.stride}")
        if min(self.parent_grid) < 1:
            raise ValueError(f"A {self.kernel}x{self.kernel} kernel does not fit the "
                             f"{self.child_grid} child grid.")

    @property
    def parent_grid(self) -> tuple[int, int]:
        return tuple((size - self.kernel) // self.stride + 1 for size in self.child_grid)

    def selection(self, axis: int) -> np.ndarray:
        """(parents, kernel, children) 0/1 along one axis: S[p, k, y] = 1 iff y = p*stride + k."""
        parents, children = self.parent_grid[axis], self.child_grid[axis]
        out = np.zeros((parents, self.kernel, children), np.float32)
        for p in range(parents):
            for k in range(self.kernel):
                out[p, k, p * self.stride + k] = 1.0
        return out

    def coverage(self) -> np.ndarray:
        """(K, K, H, W) 0/1: does some parent see child position (y, x) through offset (ky, kx)."""
        rows = self.selection(0).sum(0)                       # (K, H)
        cols = self.selection(1).sum(0)                       # (K, W)
        return np.einsum("ky,lx->klyx", rows, cols).astype(np.float32)

    def parents_per_position(self) -> np.ndarray:
        """(H, W) how many parent positions see each child position (0 at an uncovered edge)."""
        return self.coverage().sum((0, 1))

    def unfold(self, x):
        """(B, H, W, C) child values -> (B, Ph, Pw, K, K, C), the window entries."""
        from keras import ops

        rows = ops.convert_to_tensor(self.selection(0))
        cols = ops.convert_to_tensor(self.selection(1))
        x = ops.einsum("pky,bywc->bpkwc", rows, x)
        return ops.einsum("qlx,bpkxc->bpqklc", cols, x)

    def child_logsumexp(self, values):
        """(B, Ph, Pw, K, K, C) log-values of window entries -> (B, H, W, C): per child, the
        log-sum-exp over every entry that is that child (-1e30 for a child no parent sees)."""
        from keras import ops

        rows = ops.convert_to_tensor(self.selection(0))
        cols = ops.convert_to_tensor(self.selection(1))
        # One (H, W) map per kernel offset: an offset puts each parent on a different child.
        placed = ops.einsum("pky,bpqklc->bklyqc", rows, values)
        placed = ops.einsum("qlx,bklyqc->bklyxc", cols, placed)
        covered = ops.convert_to_tensor(self.coverage())[None, :, :, :, :, None]
        placed = ops.where(covered > 0, placed, _MASKED)
        k = self.kernel
        height, width = self.child_grid
        placed = ops.reshape(placed, (-1, k * k, height, width, ops.shape(values)[-1]))
        return ops.logsumexp(placed, axis=1)

    def log_start(self, types_in: int, types_out: int) -> np.ndarray:
        """(1, Ph*Pw, 1, K*K*Tin) float32: ln of every window entry's starting R, one over the
        number of parents (positions x types_out) that see its child."""
        fan_out = np.maximum(self.parents_per_position(), 1) * types_out          # (H, W)
        rows, cols = self.selection(0), self.selection(1)
        per_entry = np.einsum("pky,qlx,yx->pqkl", rows, cols, -np.log(fan_out))
        per_entry = np.broadcast_to(per_entry[..., None], (*per_entry.shape, types_in))
        return per_entry.reshape(1, -1, 1, self.kernel ** 2 * types_in).astype(np.float32)

    def dense_mask(self, types_in: int, types_out: int) -> np.ndarray:
        """(children, parents) bool: child (y, x, i) may route to parent (p, q, o). Children and
        parents are numbered row-major with the type fastest."""
        rows, cols = self.selection(0).sum(1), self.selection(1).sum(1)   # (P, H), (Q, W)
        seen = np.einsum("py,qx->yxpq", rows, cols) > 0
        mask = np.broadcast_to(seen[:, :, None, :, :, None],
                               (*self.child_grid, types_in, *self.parent_grid, types_out))
        height, width = self.child_grid
        parents = self.parent_grid[0] * self.parent_grid[1] * types_out
        return mask.reshape(height * width * types_in, parents).copy()

    def densify(self, window_weights: np.ndarray) -> np.ndarray:
        """Window-form weights (B, Ph, Pw, K, K, Tin, Tout) -> dense (B, children, parents), 0
        where a child cannot route (NumPy; for analyses)."""
        w = np.asarray(window_weights)
        b, ph, pw, k, _, tin, tout = w.shape
        height, width = self.child_grid
        dense = np.zeros((b, height, width, tin, ph, pw, tout), w.dtype)
        for p in range(ph):
            for q in range(pw):
                y, x = p * self.stride, q * self.stride
                dense[:, y:y + k, x:x + k, :, p, q, :] = w[:, p, q]
        return dense.reshape(b, height * width * tin, ph * pw * tout)


def windows_between(layer, after):
    """The kernel windows through which convolutional capsule layer `after` sees `layer`'s
    grid (two CapsuleLayers of a ModelDescription), or None when `after` is not one."""
    if after.kernel_size is None or layer.grid is None:
        return None
    return ConvWindows(layer.grid, after.kernel_size[0], after.strides[0])
