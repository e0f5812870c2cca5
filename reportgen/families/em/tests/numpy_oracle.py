"""NumPy oracle of EM routing (Hinton, Sabour & Frosst 2018, Procedure 1), written from the
equations, in float64, one parent and one child at a time: slow and plain on purpose.

    R_ij = 1 / (number of parents i can route to)
    M-step: r_ij = R_ij a_i; mu_jh = sum_i r_ij V_ijh / sum_i r_ij;
            sigma2_jh = sum_i r_ij (V_ijh - mu_jh)^2 / sum_i r_ij + 1e-7;
            cost_jh = (beta_u_j + 0.5 ln sigma2_jh) sum_i r_ij;
            a_j = logistic(lambda_t (beta_a_j - sum_h cost_jh)),  lambda_t = lambda (1 - 0.95^t)
    E-step: p_ij = prod_h N(V_ijh; mu_jh, sigma2_jh); R_ij = a_j p_ij / sum_j' a_j' p_ij'
            (over the parents j' child i can route to), computed with logs.
The only guard: sum_i r_ij is floored at 1e-8 in the two divisions (a parent without input).
"""

from __future__ import annotations

import math

import numpy as np


def em_routing(votes, activations, beta_u, beta_a, iterations=3, inverse_temperature=0.01,
               mask=None):
    """votes (B, N, P, D), activations (B, N), beta_u/beta_a (P,) or scalars, mask (N, P) bool.
    Returns (a (B, P), mu (B, P, D), R (B, N, P)) in float64."""
    votes = np.asarray(votes, np.float64)
    activations = np.asarray(activations, np.float64)
    batch, children, parents, dims = votes.shape
    beta_u = np.broadcast_to(np.asarray(beta_u, np.float64), (parents,))
    beta_a = np.broadcast_to(np.asarray(beta_a, np.float64), (parents,))
    mask = np.ones((children, parents), bool) if mask is None else np.asarray(mask, bool)
    a_out = np.zeros((batch, parents))
    mu_out = np.zeros((batch, parents, dims))
    r_out = np.zeros((batch, children, parents))
    for b in range(batch):
        R = np.zeros((children, parents))
        for i in range(children):
            allowed = np.flatnonzero(mask[i])
            if len(allowed):
                R[i, allowed] = 1.0 / len(allowed)
        for t in range(1, iterations + 1):
            lam = inverse_temperature * (1.0 - 0.95 ** t)
            a = np.zeros(parents)
            mu = np.zeros((parents, dims))
            sigma2 = np.zeros((parents, dims))
            for j in range(parents):
                r = R[:, j] * activations[b]
                mass = r.sum()
                mu[j] = (r[:, None] * votes[b, :, j]).sum(0) / max(mass, 1e-8)
                sigma2[j] = (r[:, None] * (votes[b, :, j] - mu[j]) ** 2).sum(0) / max(mass, 1e-8) \
                    + 1e-7
                cost = (beta_u[j] + 0.5 * np.log(sigma2[j])) * mass
                a[j] = 1.0 / (1.0 + math.exp(-lam * (beta_a[j] - cost.sum())))
            if t == iterations:
                a_out[b], mu_out[b], r_out[b] = a, mu, R
                break
            R = np.zeros((children, parents))
            for i in range(children):
                allowed = np.flatnonzero(mask[i])
                if not len(allowed):
                    continue
                log_terms = np.array([
                    math.log(a[j]) - np.sum((votes[b, i, j] - mu[j]) ** 2 / (2 * sigma2[j])
                                            + 0.5 * np.log(2 * math.pi * sigma2[j]))
                    for j in allowed])
                top = log_terms.max()
                weights = np.exp(log_terms - top)
                R[i, allowed] = weights / weights.sum()
    return a_out, mu_out, r_out
