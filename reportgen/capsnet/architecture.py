"""Build a CapsNet (SPEC §2) from ModelParams, and name its parts for the analyses.

The CapsNet object says which layer is which (conv layers, primary capsules, class capsules,
decoder): analyses never guess a layer's kind from its name or read private Keras attributes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import keras
from keras import layers

from reportgen.capsnet.layers import ClassCaps, Length, Mask, PrimaryCaps
from reportgen.settings.model_params import ModelParams


@dataclass
class CapsNet:
    """A built capsule network and handles on its parts.

    model:   image -> dict(conv feature maps by layer name, primary_capsules, coupling,
             class_capsules, lengths[, reconstruction]); the reconstruction is from the longest
             class capsule. Holds every weight: weights files are saved from and loaded into it.
    encoder: image -> [class_capsules, lengths] (training, evaluation).
    decoder: masked class capsules (batch, classes*dims) -> image, or None.
    """

    params: ModelParams
    model: keras.Model
    encoder: keras.Model
    decoder: keras.Model | None
    conv_layer_names: tuple[str, ...]       # every conv layer, input side first
    primary_conv: keras.layers.Conv2D
    primary_caps: PrimaryCaps
    class_caps: ClassCaps
    grid_shape: tuple[int, int]             # primary-capsule grid (H, W)

    @property
    def plain_conv_layer_names(self) -> tuple[str, ...]:
        """The conv layers before the capsules (every conv layer but the primary-capsule conv)."""
        return tuple(n for n in self.conv_layer_names if n != self.primary_conv.name)

    @property
    def num_primary_capsules(self) -> int:
        return self.grid_shape[0] * self.grid_shape[1] * self.params.primary.types

    def trainable_params(self) -> int:
        return int(sum(math.prod(w.shape) for w in self.model.trainable_weights))

    def receptive_fields(self) -> list[tuple[int, int, int]]:
        """(start, size, stride) of each conv layer's receptive field, input side first.

        Cell p of the primary grid sees input rows start + p*stride ... start + p*stride + size - 1.
        """
        size, stride, out = 1, 1, []
        for kernel, step in [(c.kernel_size, c.strides) for c in self.params.conv] + \
                            [(self.params.primary.kernel_size, self.params.primary.strides)]:
            size += (kernel - 1) * stride
            stride *= step
            out.append((0, size, stride))
        return out


def build_capsnet(params: ModelParams) -> CapsNet:
    """The Keras 3 model for `params`; its weights are freshly initialised."""
    image = keras.Input(params.input_shape, name="image")
    x = image
    outputs = {}
    conv_names = []
    for i, conv in enumerate(params.conv):
        name = f"conv{i + 1}"
        x = layers.Conv2D(conv.filters, conv.kernel_size, strides=conv.strides, padding="valid",
                          activation=None if conv.activation == "none" else conv.activation,
                          name=name)(x)
        outputs[name] = x
        conv_names.append(name)
    p = params.primary
    primary_conv = layers.Conv2D(p.types * p.dims, p.kernel_size, strides=p.strides,
                                 padding="valid",
                                 activation=None if p.activation == "none" else p.activation,
                                 name="primary_conv")
    x = primary_conv(x)
    outputs["primary_conv"] = x
    conv_names.append("primary_conv")
    grid_shape = (int(x.shape[1]), int(x.shape[2]))
    primary_caps = PrimaryCaps(p.types, p.dims, name="primary_caps")
    primary = primary_caps(x)
    c = params.class_caps
    class_caps = ClassCaps(params.num_classes, c.dims, routing_iterations=c.routing_iterations,
                           weight_sharing=c.weight_sharing, capsule_types=p.types,
                           kernel_init_stddev=c.kernel_init_stddev, name="class_caps")
    capsules, coupling = class_caps(primary)
    lengths = Length(name="lengths")(capsules)
    outputs.update(primary_capsules=primary, coupling=coupling, class_capsules=capsules,
                   lengths=lengths)

    decoder = None
    if params.decoder.enabled:
        flat = params.num_classes * c.dims
        decoder = keras.Sequential(
            [keras.Input((flat,), name="masked_capsules")]
            + [layers.Dense(u, activation="relu", name=f"decoder_dense{i + 1}")
               for i, u in enumerate(params.decoder.units)]
            + [layers.Dense(math.prod(params.input_shape), activation="sigmoid",
                            name="decoder_output"),
               layers.Reshape(params.input_shape, name="decoder_image")],
            name="decoder")
        outputs["reconstruction"] = decoder(Mask(name="mask_longest")(capsules))

    model = keras.Model(image, outputs, name="capsnet")
    encoder = keras.Model(image, [capsules, lengths], name="capsnet_encoder")
    return CapsNet(params=params, model=model, encoder=encoder, decoder=decoder,
                   conv_layer_names=tuple(conv_names), primary_conv=primary_conv,
                   primary_caps=primary_caps, class_caps=class_caps, grid_shape=grid_shape)
