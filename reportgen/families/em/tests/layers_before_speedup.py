"""The EM-routing capsule layers as reportgen computed them before the speed-up (keras.ops;
float32, or float64 given float64): the reference that the faster layers must match, gradients
included. Kept verbatim in its arithmetic (window form: votes (B, Ph, Pw, K, K, Tin, Tout, 16), the child normaliser
by 0/1 selection matrices); the equations are those of numpy_oracle.py beside it.
Never imports reportgen."""

from __future__ import annotations

import math

import numpy as np
from keras import ops

EPSILON, MIN_MASS, MASKED = 1e-7, 1e-8, -1e30
LOG_2PI = math.log(2.0 * math.pi)


def inverse_temperatures(iterations, inverse_temperature):
    return [inverse_temperature * (1.0 - 0.95 ** t) for t in range(1, iterations + 1)]


def _selection(parents, children, kernel, stride):
    out = np.zeros((parents, kernel, children), np.float32)
    for p in range(parents):
        for k in range(kernel):
            out[p, k, p * stride + k] = 1.0
    return out


class Windows:
    def __init__(self, grid, kernel, stride):
        self.grid, self.kernel, self.stride = tuple(grid), kernel, stride
        self.parent_grid = tuple((s - kernel) // stride + 1 for s in self.grid)
        self.rows = _selection(self.parent_grid[0], self.grid[0], kernel, stride)
        self.cols = _selection(self.parent_grid[1], self.grid[1], kernel, stride)

    def coverage(self):
        return np.einsum("ky,lx->klyx", self.rows.sum(0), self.cols.sum(0)).astype(np.float32)

    def unfold(self, x):
        x = ops.einsum("pky,bywc->bpkwc", ops.convert_to_tensor(self.rows, x.dtype), x)
        return ops.einsum("qlx,bpkxc->bpqklc", ops.convert_to_tensor(self.cols, x.dtype), x)

    def child_logsumexp(self, values):
        rows = ops.convert_to_tensor(self.rows, values.dtype)
        cols = ops.convert_to_tensor(self.cols, values.dtype)
        placed = ops.einsum("pky,bpqklc->bklyqc", rows, values)
        placed = ops.einsum("qlx,bklyqc->bklyxc", cols, placed)
        covered = ops.convert_to_tensor(self.coverage())[None, :, :, :, :, None]
        placed = ops.where(covered > 0, placed, MASKED)
        k, (h, w) = self.kernel, self.grid
        placed = ops.reshape(placed, (-1, k * k, h, w, ops.shape(values)[-1]))
        return ops.logsumexp(placed, axis=1)


def route(votes, activations, beta_u, beta_a, iterations, inverse_temperature, log_start,
          normaliser, detach=False):
    """Votes (B, G, n, m, D), activations (B, G, n) -> (a, mu, R) of the last M-step."""
    assignments = ops.exp(log_start) * ops.ones_like(votes[..., 0])
    temperatures = inverse_temperatures(iterations, inverse_temperature)
    for t, lam in enumerate(temperatures, start=1):
        r = assignments * activations[..., None]
        mass = ops.sum(r, axis=2)
        safe = ops.maximum(mass, MIN_MASS)[..., None]
        mu = ops.sum(r[..., None] * votes, axis=2) / safe
        deviation = ops.square(votes - mu[:, :, None])
        sigma2 = ops.sum(r[..., None] * deviation, axis=2) / safe + EPSILON
        log_sigma2 = ops.log(sigma2)
        cost = ops.sum((beta_u[..., None] + 0.5 * log_sigma2) * mass[..., None], axis=-1)
        logit = lam * (beta_a - cost)
        if t == len(temperatures):
            return ops.sigmoid(logit), mu, assignments
        log_p = -ops.sum(deviation * (0.5 / sigma2)[:, :, None], axis=-1) \
            - 0.5 * ops.sum(LOG_2PI + log_sigma2, axis=-1)[:, :, None, :]
        log_weight = ops.log_sigmoid(logit)[:, :, None, :] + log_p
        child_lse = normaliser(ops.logsumexp(log_weight, axis=-1))
        assignments = ops.exp(log_weight - child_lse[..., None])
        if detach:
            assignments = ops.stop_gradient(assignments)


def conv_caps(poses, activations, kernel, beta_u, beta_a, stride, iterations,
              inverse_temperature, detach=False):
    """poses (B, H, W, Tin, 16), activations (B, H, W, Tin), kernel (K, K, Tin, Tout, 4, 4) ->
    poses (B, Ph, Pw, Tout, 16), activations (B, Ph, Pw, Tout), R (B, Ph, Pw, K, K, Tin, Tout)."""
    _, h, w, tin, _ = poses.shape
    k, tout = kernel.shape[0], kernel.shape[3]
    win = Windows((h, w), k, stride)
    ph, pw = win.parent_grid
    matrices = ops.reshape(win.unfold(ops.reshape(poses, (-1, h, w, tin * 16))),
                           (-1, ph, pw, k, k, tin, 4, 4))
    votes = ops.einsum("bpqklirc,klioce->bpqkliore", matrices, kernel)
    groups, slots = ph * pw, k * k * tin
    votes = ops.reshape(votes, (-1, groups, slots, tout, 16))
    slot_activations = ops.reshape(win.unfold(activations), (-1, groups, slots))
    fan_out = np.maximum(win.coverage().sum((0, 1)), 1)[:, :, None] * tout
    fan_out = np.broadcast_to(fan_out, (h, w, tin)).astype(np.float32)
    log_start = ops.reshape(win.unfold(ops.convert_to_tensor(-np.log(fan_out)[None],
                                                             poses.dtype)),
                            (1, groups, slots, 1))

    def normaliser(slot_lse):
        per_child = win.child_logsumexp(ops.reshape(slot_lse, (-1, ph, pw, k, k, tin)))
        return ops.reshape(win.unfold(per_child), (-1, groups, slots))

    a, mu, r = route(votes, slot_activations, beta_u, beta_a, iterations, inverse_temperature,
                     log_start, normaliser, detach)
    return (ops.reshape(mu, (-1, ph, pw, tout, 16)), ops.reshape(a, (-1, ph, pw, tout)),
            ops.reshape(r, (-1, ph, pw, k, k, tin, tout)))


def class_caps(poses, activations, kernel, beta_u, beta_a, offsets, iterations,
               inverse_temperature, detach=False):
    """poses (B, H, W, Tin, 16), activations (B, H, W, Tin), kernel (Tin, C, 4, 4), offsets
    (H, W, 1, 1, 4, 4) or None -> poses (B, C, 16), activations (B, C), R (B, H*W*Tin, C)."""
    _, h, w, tin, _ = poses.shape
    classes = kernel.shape[1]
    matrices = ops.reshape(poses, (-1, h, w, tin, 4, 4))
    votes = ops.einsum("byxirc,ioce->byxiore", matrices, kernel)
    if offsets is not None:
        votes = votes + ops.convert_to_tensor(offsets, votes.dtype)
    votes = ops.reshape(votes, (-1, 1, h * w * tin, classes, 16))
    flat = ops.reshape(activations, (-1, 1, h * w * tin))
    log_start = ops.full((1, 1, h * w * tin, 1), -math.log(classes), poses.dtype)
    a, mu, r = route(votes, flat, beta_u, beta_a, iterations, inverse_temperature, log_start,
                     lambda lse: lse, detach)
    return mu[:, 0], a[:, 0], r[:, 0]
