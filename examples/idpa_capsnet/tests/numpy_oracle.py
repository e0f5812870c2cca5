"""Capsules with inverted dot-product attention routing (Tsai, Srivastava, Goh & Salakhutdinov,
ICLR 2020) in plain NumPy: float64, explicit loops over images, output positions, window entries
and capsules where the paper has sums. The test oracle; it shares no code with the package and
uses no index tables or einsum of it.

Written from the paper (Procedure 1, "Inverted dot-product attention routing"; section 2's
concurrent routing), and, where the text leaves a choice open,
from what the authors' code computes (apple/ml-capsules-inverted-attention-routing,
src/layers.py; the window extraction as fixed in cinjon/ml-capsules-inverted-attention-routing):

- the vote is the child's pose matrix times W, v_ij = P_i W_ij (the paper writes W_ij . p_i;
  the code multiplies the pose on the left, einsum 'bnax,nxdm->bmad');
- the agreement is scaled: a_ij = <p_j, v_ij> / sqrt(d), d = 16 pose values (the code's
  `scale`);
- r_ij = softmax over the parents j (in a convolutional layer: over the output types at one
  output position, separately for every window entry); before any parent pose exists the
  agreement is 0, so r_ij = 1 / parents;
- p_j = LayerNorm(sum_i r_ij v_ij) over the 16 values, biased variance, epsilon 1e-5
  (torch.nn.LayerNorm), then its learnt scale and offset;
- concurrent routing (the authors' default): iteration 1 computes every layer from the one
  below with uniform weights; each later iteration recomputes every layer from the poses of
  the previous iteration (the layer below's and its own); sequential routing finishes one
  layer's iterations before the next layer starts.
"""

from __future__ import annotations

import numpy as np


def layer_norm(x, gamma, beta, epsilon: float = 1e-5):
    x = np.asarray(x, np.float64)
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def conv2d(x, kernel, bias, stride: int):
    """Valid cross-correlation of x (B, H, W, C) with kernel (k, k, C, F), as sums."""
    x = np.asarray(x, np.float64)
    k, _, _, filters = kernel.shape
    batch, height, width, _ = x.shape
    ho, wo = (height - k) // stride + 1, (width - k) // stride + 1
    out = np.zeros((batch, ho, wo, filters))
    for y in range(ho):
        for z in range(wo):
            window = x[:, y * stride:y * stride + k, z * stride:z * stride + k, :]
            out[:, y, z, :] = np.tensordot(window, kernel, axes=([1, 2, 3], [0, 1, 2]))
    return out + (0 if bias is None else bias)


def softmax(a):
    e = np.exp(a - a.max())
    return e / e.sum()


def conv_caps(children, W, gamma, beta, stride: int, parents=None, epsilon: float = 1e-5):
    """One routing step of a convolutional capsule layer for ONE image.

    children (H, W, Tin, 16); W (k, k, Tin, 4, 4, Tout); parents (Ph, Pw, Tout, 16) or None ->
    (parents (Ph, Pw, Tout, 16), r (Ph, Pw, k, k, Tin, Tout))."""
    height, width, types_in, dims = children.shape
    k, _, _, q, _, types_out = W.shape
    ph, pw = (height - k) // stride + 1, (width - k) // stride + 1
    poses = np.zeros((ph, pw, types_out, dims))
    r = np.zeros((ph, pw, k, k, types_in, types_out))
    for y in range(ph):
        for x in range(pw):
            s = np.zeros((types_out, dims))
            for a in range(k):
                for b in range(k):
                    for n in range(types_in):
                        child = children[y * stride + a, x * stride + b, n].reshape(q, q)
                        votes = np.stack([(child @ W[a, b, n, :, :, m]).reshape(-1)
                                          for m in range(types_out)])
                        if parents is None:
                            agreement = np.zeros(types_out)
                        else:
                            agreement = np.array([votes[m] @ parents[y, x, m]
                                                  for m in range(types_out)]) / np.sqrt(dims)
                        r[y, x, a, b, n] = softmax(agreement)
                        s += r[y, x, a, b, n][:, None] * votes
            poses[y, x] = layer_norm(s, gamma, beta, epsilon)
    return poses, r


def fc_caps(children, W, gamma, beta, parents=None, epsilon: float = 1e-5):
    """One routing step of a fully connected capsule layer for ONE image.

    children (N, 16); W (N, 4, 4, M); parents (M, 16) or None -> (parents (M, 16), r (N, M))."""
    n_children, dims = children.shape
    _, q, _, classes = W.shape
    s = np.zeros((classes, dims))
    r = np.zeros((n_children, classes))
    for i in range(n_children):
        child = children[i].reshape(q, q)
        votes = np.stack([(child @ W[i, :, :, j]).reshape(-1) for j in range(classes)])
        agreement = np.zeros(classes) if parents is None else \
            np.array([votes[j] @ parents[j] for j in range(classes)]) / np.sqrt(dims)
        r[i] = softmax(agreement)
        s += r[i][:, None] * votes
    return layer_norm(s, gamma, beta, epsilon), r


def forward(weights: dict, images, iterations: int = 2, concurrent: bool = True,
            epsilon: float = 1e-5):
    """The whole network for a batch. weights: conv1 (kernel, bias, stride; + ReLU), primary
    (kernel, stride; no bias), primary_norm (gamma, beta), conv_caps [(W, gamma, beta, stride),
    ...], class_caps (W, gamma, beta), readout (kernel (16,), bias ()). Returns a dict: conv1, primary_capsules (B, N, 16),
    conv_caps (poses the class capsules were routed from, per layer), conv_caps_routing (the
    last iteration's r, per layer), class_capsules, class_routing, logits, probabilities."""
    kernel, bias, stride = weights["conv1"]
    conv1 = np.maximum(conv2d(images, kernel, bias, stride), 0.0)
    kernel, stride = weights["primary"]
    maps = conv2d(conv1, kernel, None, stride)
    batch, gh, gw, channels = maps.shape
    dims = weights["primary_norm"][0].shape[0]
    # channel c of a cell is value c % 16 of type c // 16
    primary = layer_norm(maps.reshape(batch, gh, gw, channels // dims, dims),
                         *weights["primary_norm"], epsilon)
    layers = [("conv", *w) for w in weights["conv_caps"]] + [("fc", *weights["class_caps"])]

    def step(layer, children, parents):
        if layer[0] == "conv":
            _, W, gamma, beta, stride = layer
            return conv_caps(children, W, gamma, beta, stride, parents, epsilon)
        _, W, gamma, beta = layer
        return fc_caps(children.reshape(-1, dims), W, gamma, beta, parents, epsilon)

    classes, class_routing, below, below_routing = [], [], [], []
    for image in range(batch):
        if concurrent:
            # iteration 1: every layer from the one below, uniform weights
            poses, routing = [primary[image]], []
            for layer in layers:
                p, r = step(layer, poses[-1], None)
                poses.append(p)
                routing.append(r)
            fed = poses
            # iterations 2..T: every layer from the previous iteration's poses
            for _ in range(iterations - 1):
                fed = poses
                stepped = [step(layer, fed[i], fed[i + 1]) for i, layer in enumerate(layers)]
                poses = [primary[image]] + [p for p, _ in stepped]
                routing = [r for _, r in stepped]
            classes.append(poses[-1])
            # what the last iteration's class capsules were routed from
            below.append(fed[1:-1])
        else:
            x, fed, routing = primary[image], [], []
            for layer in layers:
                p, r = step(layer, x, None)
                for _ in range(iterations - 1):
                    p, r = step(layer, x, p)
                fed.append(p)
                routing.append(r)
                x = p
            classes.append(x)
            below.append(fed[:-1])
        class_routing.append(routing[-1])
        below_routing.append(routing[:-1])
    class_capsules = np.stack(classes)
    kernel, bias = weights["readout"]
    logits = class_capsules @ kernel + bias
    e = np.exp(logits - logits.max(-1, keepdims=True))
    hidden = range(len(layers) - 1)
    return {"conv1": conv1, "primary_capsules": primary.reshape(batch, -1, dims),
            "class_capsules": class_capsules, "class_routing": np.stack(class_routing),
            "conv_caps": [np.stack([b[i] for b in below]) for i in hidden],
            "conv_caps_routing": [np.stack([b[i] for b in below_routing]) for i in hidden],
            "logits": logits, "probabilities": e / e.sum(-1, keepdims=True)}
