"""EM routing between matrix-capsule layers (Hinton, Sabour & Frosst 2018, Procedure 1).

Children i (votes V_ij = M_i W_ij, 16 values h each, activations a_i) are routed to parents j
for t = 1 … T iterations with the inverse temperature lambda_t = lambda (1 - 0.95^t):

    R_ij = 1 / (number of parents child i can route to)                 (start)
    M-step, per parent j:  r_ij = R_ij a_i
                           mu_jh = sum_i r_ij V_ijh / sum_i r_ij
                           sigma2_jh = sum_i r_ij (V_ijh - mu_jh)^2 / sum_i r_ij + 1e-7
                           cost_jh = (beta_u_j + 0.5 ln sigma2_jh) sum_i r_ij
                           a_j = logistic(lambda_t (beta_a_j - sum_h cost_jh))
    E-step, per child i (not after the last M-step):
                           ln p_ij = -sum_h [(V_ijh - mu_jh)^2 / (2 sigma2_jh)
                                             + 0.5 ln(2 pi sigma2_jh)]
                           R_ij = softmax over the child's parents j of (ln a_j + ln p_ij)

The E-step is computed in the log domain (ln a_j as log_sigmoid, a log-sum-exp over the
parents), so a very sharp Gaussian (sigma2 near 1e-7) gives assignments near 0 or 1, never NaN.
The one guard the equations need: sum_i r_ij is floored at MIN_MASS in the divisions, so a parent
that receives nothing (all-zero activations) gets mean 0 and variance 1e-7 instead of 0/0; its
cost is 0 and its activation logistic(lambda_t beta_a).

In a convolutional capsule layer a child votes only for the parents whose kernel covers it, and
it shares itself out over ALL of them — parents at every position that sees it, not only the
parents of one kernel window (the correction of the 2019 IBM re-implementation). The layers use
the memory-sane "window" form: votes (B, Ph, Pw, K, K, Tin, Tout, 16), one per (parent
position, kernel offset, child type, parent type); the E-step's normaliser of a child gathers the
window entries that are that child (`ConvWindows`). The dense form (B, children, parents, 16)
with an optional (children, parents) mask is the same computation (tests/test_routing.py
in this package checks one against the other and both against a NumPy oracle).

Internally the votes are laid out by parent, (B, groups, parents, children, 16), so that every
sum over children is a batched matrix-vector product (`_route`); the layers compute their votes
in that layout (`route_windows`), `em_routing` transposes what it is given.
"""

from __future__ import annotations

import math

import numpy as np
from keras import ops

from reportgen.capsnet.conv_windows import ConvWindows
from reportgen.capsnet.gradient_pass import gradient_taken

EPSILON = 1e-7          # added to every variance (the equations above)
MIN_MASS = 1e-8         # floor of sum_i r_ij in the divisions (a parent that receives nothing)
TEMPERATURE_DECAY = 0.95
_MASKED = -1e30         # a log-weight that exp() turns into exactly 0
_LOG_2PI = math.log(2.0 * math.pi)


def inverse_temperatures(iterations: int, inverse_temperature: float) -> list[float]:
    """lambda_t = lambda (1 - 0.95^t) for t = 1 … T."""
    return [float(inverse_temperature) * (1.0 - TEMPERATURE_DECAY ** t)
            for t in range(1, int(iterations) + 1)]


def em_routing(votes, activations, beta_u, beta_a, iterations: int = 3,
               inverse_temperature: float = 0.01, mask=None, windows: ConvWindows | None = None,
               detach_assignments: bool = False):
    """EM routing (module docstring). Returns (activations, poses, assignments).

    Dense form: votes (B, children, parents, 16), activations (B, children), beta_u and beta_a
    broadcastable to (parents,), optional mask (children, parents) of the routes that exist ->
    activations (B, parents), poses (B, parents, 16), assignments R (B, children, parents): those
    of the last E-step (uniform over each child's parents for one iteration).

    Window form (`windows`, as convolutional capsule layers use it): votes (B, Ph, Pw, K, K,
    Tin, Tout, 16), activations (B, H, W, Tin) of the children, beta_u and beta_a broadcastable
    to (Tout,) -> activations (B, Ph, Pw, Tout), poses (B, Ph, Pw, Tout, 16), assignments
    (B, Ph, Pw, K, K, Tin, Tout) (`windows.densify` makes them dense).

    float32 throughout. Given NumPy arrays, returns NumPy arrays (for notebooks); given tensors,
    tensors (differentiable: the layers train through it). `detach_assignments`: the gradient
    treats the E-steps' assignments as constants (the values are the same; training takes
    about half the time).
    """
    as_numpy = all(isinstance(x, (np.ndarray, np.generic, int, float))
                   for x in (votes, activations, beta_u, beta_a))
    if int(iterations) < 1:
        raise ValueError(f"iterations must be >= 1. Received: {iterations}")
    votes = ops.cast(ops.convert_to_tensor(votes), "float32")
    activations = ops.cast(ops.convert_to_tensor(activations), "float32")
    beta_u = ops.cast(ops.convert_to_tensor(beta_u), "float32")
    beta_a = ops.cast(ops.convert_to_tensor(beta_a), "float32")
    if windows is None:
        out = _dense(votes, activations, beta_u, beta_a, iterations, inverse_temperature, mask,
                     detach_assignments)
    else:
        if mask is not None:
            raise ValueError("Give either a mask (dense votes) or windows, not both.")
        if len(votes.shape) != 8 or len(activations.shape) != 4:
            raise ValueError("Windowed EM routing takes votes (batch, Ph, Pw, K, K, Tin, Tout, "
                             "16) and activations (batch, H, W, Tin). Received: "
                             f"{tuple(votes.shape)} and {tuple(activations.shape)}")
        _, ph, pw, k, _, tin, tout, dims = votes.shape
        by_parent = ops.reshape(ops.transpose(votes, (0, 1, 2, 6, 3, 4, 5, 7)),
                                (-1, ph * pw, tout, k * k * tin, dims))
        out = route_windows(by_parent, activations, beta_u, beta_a, iterations,
                            inverse_temperature, windows, detach_assignments)
    if as_numpy:
        return tuple(ops.convert_to_numpy(x) for x in out)
    return out


def _dense(votes, activations, beta_u, beta_a, iterations, inverse_temperature, mask, detach):
    if len(votes.shape) != 4 or len(activations.shape) != 2:
        raise ValueError("Dense EM routing takes votes (batch, children, parents, 16) and "
                         f"activations (batch, children). Received: {tuple(votes.shape)} and "
                         f"{tuple(activations.shape)}")
    children, parents = votes.shape[1], votes.shape[2]
    if mask is None:
        log_start = ops.full((1, 1, 1, children), -math.log(parents), "float32")
        slot_mask = None
    else:
        mask = np.asarray(mask, bool)
        if mask.shape != (children, parents):
            raise ValueError(f"mask must be (children, parents) = {(children, parents)}. "
                             f"Received: {mask.shape}")
        fan_out = np.maximum(mask.sum(1), 1)
        log_start = ops.convert_to_tensor(-np.log(fan_out).astype(np.float32)[None, None, None])
        slot_mask = ops.convert_to_tensor(mask.T[None, None].astype(np.float32))
    by_parent = ops.transpose(votes, (0, 2, 1, 3))[:, None]               # (B, 1, P, N, D)
    a, mu, r = _route(by_parent, activations[:, None], beta_u, beta_a, iterations,
                      inverse_temperature, log_start, slot_mask, lambda lse: lse, detach)
    return a[:, 0], mu[:, 0], ops.transpose(r[:, 0], (0, 2, 1))


def route_windows(votes, activations, beta_u, beta_a, iterations: int,
                  inverse_temperature: float, windows: ConvWindows, detach: bool = False):
    """EM routing in a convolutional capsule layer from votes laid out by parent: (B, Ph*Pw,
    Tout, K*K*Tin, 16), entry (p*Pw + q, o, (ky*K + kx)*Tin + i) the vote of the child at
    window entry (p, q, ky, kx) of type i for parent type o. Returns what `em_routing` returns
    for window-form votes (the layers compute their votes in this layout directly)."""
    if len(votes.shape) != 5 or len(activations.shape) != 4:
        raise ValueError("Windowed EM routing takes votes (batch, Ph*Pw, Tout, K*K*Tin, 16) and "
                         f"activations (batch, H, W, Tin). Received: {tuple(votes.shape)} and "
                         f"{tuple(activations.shape)}")
    _, groups, tout, slots, dims = votes.shape
    ph, pw = windows.parent_grid
    k, tin = windows.kernel, activations.shape[3]
    if groups != ph * pw or slots != k * k * tin or \
            tuple(activations.shape[1:3]) != windows.child_grid:
        raise ValueError(f"Votes {tuple(votes.shape)} and activations "
                         f"{tuple(activations.shape)} do not fit {windows}.")
    slot_activations = ops.reshape(windows.unfold(activations), (-1, groups, slots))
    log_start = ops.convert_to_tensor(windows.log_start(tin, tout))

    def normaliser(slot_lse):                      # (B, G, n) -> (B, G, n)
        per_entry = ops.reshape(slot_lse, (-1, ph, pw, k, k, tin))
        per_child = windows.child_logsumexp(per_entry)                  # (B, H, W, Tin)
        return ops.reshape(windows.unfold(per_child), (-1, groups, slots))

    a, mu, r = _route(votes, slot_activations, beta_u, beta_a, iterations,
                      inverse_temperature, log_start, None, normaliser, detach)
    r = ops.transpose(ops.reshape(r, (-1, ph, pw, tout, k, k, tin)), (0, 1, 2, 4, 5, 6, 3))
    return ops.reshape(a, (-1, ph, pw, tout)), ops.reshape(mu, (-1, ph, pw, tout, dims)), r


def _route(votes, activations, beta_u, beta_a, iterations, inverse_temperature, log_start,
           mask, normaliser, detach):
    """The procedure on votes laid out by parent, (B, G, m, n, D): G groups of m parents and n
    child entries (dense: one group), entry activations (B, G, n), the log of the starting R
    broadcastable to (B, G, m, n), an optional 0/1 mask (1, G, m, n), and `normaliser` turning
    each entry's log-sum-exp over its m parents into its child's log-sum-exp over all the
    child's parents. Returns (a (B, G, m), mu (B, G, m, D), R (B, G, m, n)). `detach`: the
    gradient treats each E-step's assignments as constants.

    Every sum over the children (and the E-step's over the 16 pose values) is a batched
    matrix-vector product of a (n, D) block: on CPU the matrix kernels run them several times
    faster than XLA's fused reductions, which write each weighted product to memory first."""
    assignments = ops.exp(log_start) * ops.ones_like(votes[..., 0])
    if mask is not None:
        assignments = assignments * mask
    temperatures = inverse_temperatures(iterations, inverse_temperature)
    for t, lam in enumerate(temperatures, start=1):
        # M-step
        r = assignments * activations[:, :, None, :]                            # (B, G, m, n)
        mass = ops.sum(r, axis=-1)                                              # (B, G, m)
        safe = ops.maximum(mass, MIN_MASS)[..., None]
        mu = ops.einsum("bgmn,bgmnd->bgmd", r, votes) / safe                    # (B, G, m, D)
        # The derivative of sigma2 with respect to mu, -2 sum_i r_ij (V_ij - mu_j) / sum_i r_ij,
        # is 0 (mu is the r-weighted mean): mu enters the deviations as a constant, which spares
        # the gradient a pass over the votes (the E-step adds back what it needs, below).
        fixed_mu = ops.stop_gradient(mu)
        deviation = ops.square(votes - fixed_mu[:, :, :, None])                # (B, G, m, n, D)
        sigma2 = ops.einsum("bgmn,bgmnd->bgmd", r, deviation) / safe + EPSILON
        log_sigma2 = ops.log(sigma2)
        cost = ops.sum((beta_u[..., None] + 0.5 * log_sigma2) * mass[..., None], axis=-1)
        logit = lam * (beta_a - cost)                                           # (B, G, m)
        if t == len(temperatures):
            return ops.sigmoid(logit), mu, assignments
        # E-step, in the log domain
        half_precision = 0.5 / sigma2
        log_p = -ops.einsum("bgmnd,bgmd->bgmn", deviation, half_precision) \
            - 0.5 * ops.sum(_LOG_2PI + log_sigma2, axis=-1)[..., None]         # (B, G, m, n)
        # ... plus 0 whose derivative with respect to mu is that of ln p_ij, 2 (V_ij - mu_j) /
        # (2 sigma2_j), as a matrix product of the votes (no product the size of the votes);
        # left out where no gradient is taken (XLA does not fold x - x for floats).
        if gradient_taken():
            shift = ops.stop_gradient(half_precision) * (mu - fixed_mu)         # 0
            log_p = log_p + 2.0 * (
                ops.einsum("bgmnd,bgmd->bgmn", ops.stop_gradient(votes), shift)
                - ops.sum(fixed_mu * shift, axis=-1)[..., None])
        log_weight = ops.log_sigmoid(logit)[..., None] + log_p
        if mask is not None:
            log_weight = ops.where(mask > 0, log_weight, _MASKED)
        child_lse = normaliser(ops.logsumexp(log_weight, axis=2))               # (B, G, n)
        assignments = ops.exp(log_weight - child_lse[:, :, None])
        if detach:
            assignments = ops.stop_gradient(assignments)
        if mask is not None:
            assignments = assignments * mask
