"""The capsule layers several families share (primary capsules, lengths, the mask before a
decoder), in Keras 3: weights in build(), keras.ops in call(), get_config() complete.

Capsule index order everywhere: primary capsule i = (row * grid_width + column) * types + type,
i.e. the (H, W, types) grid flattened in row-major order. Analyses rely on it to map a capsule
back to its grid cell and type.
"""

from __future__ import annotations

import keras
from keras import ops

from reportgen.capsnet.ops import capsule_length, squash

PACKAGE = "reportgen"


@keras.saving.register_keras_serializable(package=PACKAGE)
class PrimaryCaps(keras.layers.Layer):
    """Groups a conv output's channels into `types` capsules of `dims` per grid cell, squashed.

    Input (batch, H, W, types*dims) from the primary conv; output (batch, H*W*types, dims).
    """

    def __init__(self, types: int, dims: int, **kwargs):
        super().__init__(**kwargs)
        self.types = int(types)
        self.dims = int(dims)

    def compute_output_shape(self, input_shape):
        _, h, w, channels = input_shape
        if channels != self.types * self.dims:
            raise ValueError(f"PrimaryCaps expects {self.types * self.dims} channels "
                             f"({self.types} types x {self.dims} dims). Received: {channels}")
        return (input_shape[0], h * w * self.types, self.dims)

    def call(self, inputs):
        h, w = inputs.shape[1], inputs.shape[2]
        poses = ops.reshape(inputs, (-1, h * w * self.types, self.dims))
        return squash(poses)

    def get_config(self):
        return {**super().get_config(), "types": self.types, "dims": self.dims}


@keras.saving.register_keras_serializable(package=PACKAGE)
class Length(keras.layers.Layer):
    """Capsule lengths: (batch, classes, dims) -> (batch, classes); exact, or with `epsilon` > 0
    sqrt(|v|^2 + epsilon) as an imported model's source computes them
    (reportgen.capsnet.ops.capsule_length)."""

    def __init__(self, epsilon: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = float(epsilon)

    def call(self, capsules):
        return capsule_length(capsules, epsilon=self.epsilon)

    def compute_output_shape(self, input_shape):
        return input_shape[:-1]

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon}


@keras.saving.register_keras_serializable(package=PACKAGE)
class Mask(keras.layers.Layer):
    """Zero every class capsule but one and flatten, for the decoder.

    Called with [capsules, one_hot] it keeps the given class (the true label in training, or any
    class on request); called with capsules alone it keeps the longest (evaluation).
    Output (batch, classes * dims).
    """

    def call(self, inputs):
        if isinstance(inputs, (list, tuple)):
            capsules, one_hot = inputs
        else:
            capsules = inputs
            one_hot = ops.one_hot(ops.argmax(capsule_length(capsules), axis=-1),
                                  capsules.shape[1], dtype=capsules.dtype)
        masked = capsules * ops.expand_dims(ops.cast(one_hot, capsules.dtype), -1)
        return ops.reshape(masked, (-1, capsules.shape[1] * capsules.shape[2]))

    def compute_output_shape(self, input_shape):
        shape = input_shape[0] if isinstance(input_shape, (list, tuple)) and \
            isinstance(input_shape[0], (list, tuple)) else input_shape
        return (shape[0], shape[1] * shape[2])
