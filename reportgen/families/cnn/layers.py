"""The small Keras 3 layers of the CNN baselines' heads (reportgen.families.cnn.network)."""

from __future__ import annotations

import keras
from keras import ops

from reportgen.capsnet.ops import safe_norm, squash

PACKAGE = "reportgen"


@keras.saving.register_keras_serializable(package=PACKAGE)
class Squash(keras.layers.Layer):
    """squash(s) = |s|^2 / (1 + |s|^2) s / |s| along the last axis (Sabour et al. 2017)."""

    def call(self, inputs):
        return squash(inputs)

    def compute_output_shape(self, input_shape):
        return input_shape


@keras.saving.register_keras_serializable(package=PACKAGE)
class VectorNorm(keras.layers.Layer):
    """|s| along the last axis: (batch, classes, dims) -> (batch, classes)."""

    def call(self, inputs):
        return safe_norm(inputs)

    def compute_output_shape(self, input_shape):
        return input_shape[:-1]


@keras.saving.register_keras_serializable(package=PACKAGE)
class ClassSum(keras.layers.Layer):
    """The sum of each class's feature units: (batch, classes, dims) -> (batch, classes)."""

    def call(self, inputs):
        return ops.sum(inputs, axis=-1)

    def compute_output_shape(self, input_shape):
        return input_shape[:-1]


@keras.saving.register_keras_serializable(package=PACKAGE)
class MaskTop(keras.layers.Layer):
    """[features (batch, classes, dims), scores (batch, classes)] -> the features of the top
    scoring class only, flattened (batch, classes * dims): the decoder's input at evaluation."""

    def call(self, inputs):
        features, scores = inputs
        one_hot = ops.one_hot(ops.argmax(scores, axis=-1), features.shape[1],
                              dtype=features.dtype)
        masked = features * ops.expand_dims(one_hot, -1)
        return ops.reshape(masked, (-1, features.shape[1] * features.shape[2]))

    def compute_output_shape(self, input_shape):
        shape = input_shape[0]
        return (shape[0], shape[1] * shape[2])
