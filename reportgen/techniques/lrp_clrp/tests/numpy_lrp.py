"""A slow, plain-NumPy LRP written from the papers' equations, unit by unit (loops allowed
here only): the oracle of the batched rules (reportgen.techniques.lrp_clrp.rules).

Bach et al. 2015 / Montavon et al. 2017: for a layer with inputs a_i, weights w_ij and a
contribution z_ij of input i to unit j,  R_i = sum_j z_ij / sum_i' z_i'j R_j, with
    z^beta:   z_ij = a_i w_ij - l w_ij^+ - h w_ij^-     (first layer, inputs in [l, h])
    z+:       z_ij = max(0, a_i w_ij)
    epsilon:  z_ij = a_i w_ij, denominator sum_i' z_i'j + eps sign(.)
max pooling gives R_j to the window's argmax; average pooling is a layer of weights 1/n.
Layers are given as plain dicts (kind, weights, geometry); stride and 'valid' padding only.
"""

from __future__ import annotations

import numpy as np


def conv_forward(a, kernel, bias, stride):
    kh, kw, _, filters = kernel.shape
    h = (a.shape[0] - kh) // stride + 1
    w = (a.shape[1] - kw) // stride + 1
    out = np.zeros((h, w, filters))
    for p in range(h):
        for q in range(w):
            patch = a[p * stride:p * stride + kh, q * stride:q * stride + kw, :]
            for f in range(filters):
                out[p, q, f] = (patch * kernel[..., f]).sum() + bias[f]
    return out


def _contributions(a_part, w_part, rule, low, high):
    if rule == "zbeta":
        return a_part * w_part - low * np.maximum(w_part, 0) - high * np.minimum(w_part, 0)
    if rule == "zplus":
        return np.maximum(a_part * w_part, 0.0)
    return a_part * w_part


def _share(z, r, rule, eps):
    total = z.sum()
    if rule == "epsilon":
        total = total + eps * (1.0 if total >= 0 else -1.0)
    return z / total * r if total != 0 else np.zeros_like(z)


def conv_relevance(a, kernel, stride, r_out, rule, low=0.0, high=1.0, eps=1e-2):
    kh, kw, _, filters = kernel.shape
    r_in = np.zeros_like(a)
    for p in range(r_out.shape[0]):
        for q in range(r_out.shape[1]):
            rows = slice(p * stride, p * stride + kh)
            cols = slice(q * stride, q * stride + kw)
            for f in range(filters):
                z = _contributions(a[rows, cols, :], kernel[..., f], rule, low, high)
                r_in[rows, cols, :] += _share(z, r_out[p, q, f], rule, eps)
    return r_in


def dense_relevance(a, kernel, r_out, rule, low=0.0, high=1.0, eps=1e-2):
    r_in = np.zeros_like(a)
    for j in range(kernel.shape[1]):
        z = _contributions(a, kernel[:, j], rule, low, high)
        r_in += _share(z, r_out[j], rule, eps)
    return r_in


def pool_forward(a, size, kind):
    h, w = a.shape[0] // size, a.shape[1] // size
    out = np.zeros((h, w, a.shape[2]))
    for p in range(h):
        for q in range(w):
            window = a[p * size:(p + 1) * size, q * size:(q + 1) * size, :]
            out[p, q] = window.max(axis=(0, 1)) if kind == "max" else window.mean(axis=(0, 1))
    return out


def pool_relevance(a, size, kind, r_out, rule, eps=1e-2):
    r_in = np.zeros_like(a)
    for p in range(r_out.shape[0]):
        for q in range(r_out.shape[1]):
            for c in range(a.shape[2]):
                window = a[p * size:(p + 1) * size, q * size:(q + 1) * size, c]
                if kind == "max":
                    y, x = np.unravel_index(np.argmax(window), window.shape)
                    r_in[p * size + y, q * size + x, c] += r_out[p, q, c]
                    continue
                z = _contributions(window, np.full(window.shape, 1.0 / window.size),
                                   "zplus" if rule == "zbeta" else rule, 0.0, 1.0)
                r_in[p * size:(p + 1) * size, q * size:(q + 1) * size, c] += \
                    _share(z, r_out[p, q, c], rule, eps)
    return r_in


def lrp_one(layers, x, target, first="zbeta", higher="zplus", low=0.0, high=1.0, eps=1e-2,
            seed=None):
    """Input relevance of one image x (H, W, C) for the logit `target` (seed: relevance put on
    every logit instead). `layers`: dicts with kind conv (kernel, bias, stride, relu), dense
    (kernel, bias, relu), maxpool / avgpool (size) or flatten."""
    activations = [np.asarray(x, np.float64)]
    for layer in layers:
        a = activations[-1]
        if layer["kind"] == "conv":
            out = conv_forward(a, layer["kernel"], layer["bias"], layer.get("stride", 1))
        elif layer["kind"] == "dense":
            out = a @ layer["kernel"] + layer["bias"]
        elif layer["kind"] == "flatten":
            out = a.reshape(-1)
        else:
            out = pool_forward(a, layer["size"], layer["kind"][:3])
        if layer.get("relu"):
            out = np.maximum(out, 0.0)
        activations.append(out)
    scores = activations[-1]
    if seed is None:
        seed = np.zeros_like(scores)
        seed[target] = scores[target]
    r = np.asarray(seed, np.float64)
    first_weighted = min(i for i, layer in enumerate(layers) if layer["kind"] in ("conv", "dense"))
    for i in range(len(layers) - 1, -1, -1):
        layer, a = layers[i], activations[i]
        rule = first if i == first_weighted else higher
        if layer["kind"] == "conv":
            r = conv_relevance(a, layer["kernel"], layer.get("stride", 1), r, rule, low, high, eps)
        elif layer["kind"] == "dense":
            r = dense_relevance(a, layer["kernel"], r, rule, low, high, eps)
        elif layer["kind"] == "flatten":
            r = r.reshape(a.shape)
        else:
            r = pool_relevance(a, layer["size"], layer["kind"][:3], r, rule, eps)
    return r, scores
