"""A tiny CNN three ways with the same weights: Keras (the model under test), plain NumPy (the
reference forward pass) and PyTorch (Captum's side). conv 3x3 (tanh) -> flatten -> dense."""

from __future__ import annotations

import numpy as np

SHAPE = (8, 8, 2)          # two channels: a layout mistake (HWC vs CHW) cannot cancel out
FILTERS = 3
CLASSES = 3


def weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    h, w, c = SHAPE
    flat = (h - 2) * (w - 2) * FILTERS
    return {"kernel": rng.normal(0, 0.5, (3, 3, c, FILTERS)).astype(np.float32),
            "bias": rng.normal(0, 0.1, FILTERS).astype(np.float32),
            "dense": rng.normal(0, 0.3, (flat, CLASSES)).astype(np.float32),
            "dense_bias": rng.normal(0, 0.1, CLASSES).astype(np.float32)}


def keras_model(params: dict[str, np.ndarray]):
    import keras

    model = keras.Sequential([keras.Input(SHAPE),
                              keras.layers.Conv2D(FILTERS, 3, activation="tanh", name="conv"),
                              keras.layers.Flatten(name="flatten"),
                              keras.layers.Dense(CLASSES, name="logits")])
    model.get_layer("conv").set_weights([params["kernel"], params["bias"]])
    model.get_layer("logits").set_weights([params["dense"], params["dense_bias"]])
    return model


def numpy_forward(params: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """(N, classes) logits in float64."""
    x = np.asarray(x, np.float64)
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(1, 2))  # N,h,w,C,3,3
    conv = np.tanh(np.einsum("nhwcij,ijcf->nhwf", windows, params["kernel"]) + params["bias"])
    return conv.reshape(len(x), -1) @ params["dense"] + params["dense_bias"]


def torch_model(params: dict[str, np.ndarray]):
    """The same network on NCHW tensors (features flattened in Keras's HWC order)."""
    import torch

    class Twin(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(SHAPE[2], FILTERS, 3)
            self.dense = torch.nn.Linear((SHAPE[0] - 2) * (SHAPE[1] - 2) * FILTERS, CLASSES)
            with torch.no_grad():
                self.conv.weight.copy_(torch.from_numpy(params["kernel"].transpose(3, 2, 0, 1)))
                self.conv.bias.copy_(torch.from_numpy(params["bias"]))
                self.dense.weight.copy_(torch.from_numpy(params["dense"].T.copy()))
                self.dense.bias.copy_(torch.from_numpy(params["dense_bias"]))

        def forward(self, x):
            features = torch.tanh(self.conv(x)).permute(0, 2, 3, 1).flatten(1)
            return self.dense(features)

    return Twin().eval()


def keras_score(model, targets: np.ndarray):
    """score(batch, image_index) -> the logit of each row's image's target class."""
    def score(batch, image_index):
        logits = np.asarray(model(np.asarray(batch, np.float32), training=False))
        return logits[np.arange(len(batch)), targets[image_index]]
    return score


def keras_saliency(model, images: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(N, H, W, C) gradient of each image's target logit with respect to its input."""
    import tensorflow as tf

    x = tf.constant(np.asarray(images, np.float32))
    with tf.GradientTape() as tape:
        tape.watch(x)
        logits = model(x, training=False)
        chosen = tf.gather(logits, np.asarray(targets), axis=1, batch_dims=1)
    return tape.gradient(chosen, x).numpy()


def images(n: int = 4, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).random((n, *SHAPE), dtype=np.float32)
