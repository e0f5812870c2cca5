"""NumPy forward passes of the CapsNets reportgen imports, written from the source projects'
code (XifengGuo/CapsNet-Keras capsulelayers.py / capsulenet.py; gram-ai/capsule-networks
capsule_network.py, whose network the Udacity-style notebook shares), in their own tensor
layouts and orders, independent of reportgen's conversion.

Inputs in [0, 1]; outputs (class capsules (B, classes, dims), lengths (B, classes), the
coupling coefficients in the source's own shape, the reconstruction in the source's own pixel
order).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

KERAS_EPSILON = 1e-7      # keras.backend.epsilon()


def relu(x):
    return np.maximum(x, 0.0)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def conv_nhwc(x, kernel, bias, stride):
    """Keras Conv2D, padding 'valid': x (B, H, W, C), kernel (k, k, C, O)."""
    k = kernel.shape[0]
    windows = sliding_window_view(x, (k, k), axis=(1, 2))[:, ::stride, ::stride]
    return np.einsum("bhwcij,ijco->bhwo", windows, kernel) + bias


def conv_nchw(x, weight, bias, stride):
    """PyTorch Conv2d, padding 0: x (B, C, H, W), weight (O, C, k, k)."""
    k = weight.shape[-1]
    windows = sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("bchwij,ocij->bohw", windows, weight) + bias[None, :, None, None]


# -- XifengGuo/CapsNet-Keras ---------------------------------------------------------------------

def keras_squash(vectors):
    norm2 = np.sum(np.square(vectors), -1, keepdims=True)
    return norm2 / (1 + norm2) / np.sqrt(norm2 + KERAS_EPSILON) * vectors


def capsnet_keras_forward(w: dict, x: np.ndarray, routings: int = 3):
    """w: conv1_kernel, conv1_bias, primary_kernel, primary_bias, W (classes, N, 16, dims),
    decoder [(kernel, bias), ...]; x (B, H, W, C)."""
    x = np.asarray(x, np.float64)
    conv1 = relu(conv_nhwc(x, w["conv1_kernel"], w["conv1_bias"], 1))
    primary = conv_nhwc(conv1, w["primary_kernel"], w["primary_bias"], 2)     # no activation
    dims = w["W"].shape[3]
    u = keras_squash(primary.reshape(len(x), -1, dims))                  # Reshape([-1, dims])
    inputs_hat = np.einsum("jidk,bik->bjid", w["W"], u)                  # (B, classes, N, 16)
    b = np.zeros(inputs_hat.shape[:3])
    for i in range(routings):
        c = softmax(b, axis=1)                                           # tf.nn.softmax(b, dim=1)
        outputs = keras_squash(np.einsum("bji,bjid->bjd", c, inputs_hat))
        if i < routings - 1:
            b = b + np.einsum("bjd,bjid->bji", outputs, inputs_hat)
    lengths = np.sqrt(np.sum(np.square(outputs), -1) + KERAS_EPSILON)   # Length
    mask = np.eye(outputs.shape[1])[np.argmax(np.sqrt(np.sum(outputs ** 2, -1)), 1)]
    h = (outputs * mask[:, :, None]).reshape(len(x), -1)                 # Mask: batch_flatten
    for n, (kernel, bias) in enumerate(w["decoder"]):
        h = h @ kernel + bias
        h = sigmoid(h) if n == len(w["decoder"]) - 1 else relu(h)
    return outputs, lengths, c, h.reshape(x.shape)


# -- gram-ai/capsule-networks (and the Udacity-style notebook) ---------------------------------

def torch_squash(tensor):
    norm2 = (tensor ** 2).sum(-1, keepdims=True)
    return norm2 / (1 + norm2) * tensor / np.sqrt(norm2)


def gram_ai_forward(sd: dict, x: np.ndarray, iterations: int = 3):
    """sd: conv1.weight/bias, primary_capsules.capsules.{d}.weight/bias,
    digit_capsules.route_weights (classes, N, dims, 16), decoder.{n}.weight/bias (gram-ai's
    names); x (B, C, H, W). Returns capsules, lengths, probs (classes, B, N), reconstruction
    (B, C*H*W)."""
    x = np.asarray(x, np.float64)
    h = relu(conv_nchw(x, sd["conv1.weight"], sd["conv1.bias"], 1))
    dims = len([k for k in sd if k.startswith("primary_capsules.capsules.") and
                k.endswith(".weight")])
    u = np.concatenate([conv_nchw(h, sd[f"primary_capsules.capsules.{d}.weight"],
                                  sd[f"primary_capsules.capsules.{d}.bias"], 2)
                        .reshape(len(x), -1, 1) for d in range(dims)], axis=-1)
    u = torch_squash(u)
    route = sd["digit_capsules.route_weights"]                           # (K, N, dims, 16)
    priors = np.einsum("bik,jikd->jbid", u, route)   # x[None,:,:,None,:] @ W[:,None]: (K,B,N,16)
    logits = np.zeros(priors.shape)            # zeros(*priors.size()): one logit per output dim
    for i in range(iterations):
        probs = softmax(logits, axis=2)                                  # over the input capsules
        outputs = torch_squash((probs * priors).sum(axis=2, keepdims=True))   # (K, B, 1, 16)
        if i != iterations - 1:
            logits = logits + (priors * outputs).sum(-1, keepdims=True)
    caps = outputs[:, :, 0, :].transpose(1, 0, 2)                        # (B, K, 16)
    lengths = np.sqrt((caps ** 2).sum(-1))
    y = np.eye(caps.shape[1])[lengths.argmax(1)]
    h = (caps * y[:, :, None]).reshape(len(x), -1)
    layers = sorted({int(k.split(".")[1]) for k in sd if k.startswith("decoder.")})
    for n, index in enumerate(layers):
        h = h @ sd[f"decoder.{index}.weight"].T + sd[f"decoder.{index}.bias"]
        h = sigmoid(h) if n == len(layers) - 1 else relu(h)
    return caps, lengths, probs[..., 0], h
