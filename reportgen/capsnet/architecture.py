"""Build a CapsNet (Sabour et al. 2017) from ModelParams, and name its parts for the analyses.

The network is built from its description (reportgen.capsnet.description.describe): layer names,
kernel sizes, strides and grids come from there, so `net.description` — what techniques and
renderers read — is what was built. Analyses never guess a layer's kind from its name or read
private Keras attributes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import keras
from keras import layers

from reportgen.capsnet.description import ModelDescription, describe
from reportgen.capsnet.layers import ClassCaps, Length, Mask, PrimaryCaps
from reportgen.capsnet.network import primary_capsules
from reportgen.settings.model_params import ModelParams


@dataclass
class CapsNet:
    """A built capsule network and handles on its parts.

    model:   image -> dict(conv feature maps by layer name, primary_capsules, coupling,
             class_capsules, lengths[, reconstruction]); the reconstruction is from the longest
             class capsule. Holds every weight: weights files are saved from and loaded into it.
    encoder: image -> [class_capsules, lengths] (training, evaluation).
    decoder: masked class capsules (batch, classes*dims) -> image, or None.
    description: layers, grids, receptive fields and features, without TensorFlow.
    """

    params: ModelParams
    description: ModelDescription
    model: keras.Model
    encoder: keras.Model
    decoder: keras.Model | None
    primary_conv: keras.layers.Conv2D
    primary_caps: PrimaryCaps
    class_caps: ClassCaps

    # Aliases of the description, kept while callers move over to `description`.
    @property
    def conv_layer_names(self) -> tuple[str, ...]:
        """Every conv layer, input side first (= description.conv_layer_names)."""
        return self.description.conv_layer_names

    @property
    def plain_conv_layer_names(self) -> tuple[str, ...]:
        """The conv layers before the capsules (every conv layer but the primary-capsule conv)."""
        return tuple(c.name for c in self.description.plain_conv_layers)

    @property
    def grid_shape(self) -> tuple[int, int]:
        """Primary-capsule grid (H, W) (= description.primary_capsules.grid)."""
        return self.description.primary_capsules.grid

    @property
    def num_primary_capsules(self) -> int:
        return self.description.primary_capsules.capsules

    def trainable_params(self) -> int:
        return int(sum(math.prod(w.shape) for w in self.model.trainable_weights))

    def receptive_fields(self) -> list[tuple[int, int, int]]:
        """(start, size, stride) along the rows of each conv layer's receptive field, input side
        first (= [c.receptive_field.rows for c in description.conv_layers])."""
        return [c.receptive_field.rows for c in self.description.conv_layers]


def build_capsnet(params: ModelParams) -> CapsNet:
    """The Keras 3 model for `params`, built from `describe(params)`; weights freshly
    initialised. Other families (params.family) build their own network with the same handles
    (reportgen.capsnet.network.Network)."""
    if params.family != "capsnet":
        from reportgen.capsnet import cnn, em_capsnet, gracapsnet

        return {"gracapsnet": gracapsnet.build_gracapsnet, "cnn": cnn.build_cnn,
                "em": em_capsnet.build_em_capsnet}[params.family](params)
    description = describe(params)
    image = keras.Input(params.input_shape, name="image")
    x = image
    outputs = {}
    convs = {}
    for conv in description.conv_layers:
        convs[conv.name] = layers.Conv2D(
            conv.filters, conv.kernel_size, strides=conv.strides, padding=conv.padding,
            activation=None if conv.activation == "none" else conv.activation, name=conv.name)
        x = convs[conv.name](x)
        outputs[conv.name] = x
    primary_desc, class_desc = description.primary_capsules, description.class_capsules
    primary_caps, primary = primary_capsules(params, description, x)
    c = params.class_caps
    class_caps = ClassCaps(class_desc.types, class_desc.pose_size,
                           routing_iterations=primary_desc.routing_iterations,
                           weight_sharing=bool(c.weight_sharing),
                           # "all" (Aff-CapsNet): one matrix per class for every capsule
                           capsule_types=1 if c.weight_sharing == "all" else primary_desc.types,
                           kernel_init_stddev=c.kernel_init_stddev,
                           routing_softmax=c.routing_softmax,
                           detach_routing_votes=c.detach_routing_votes, name=class_desc.name)
    capsules, coupling = class_caps(primary)
    lengths = Length(c.length_epsilon, name="lengths")(capsules)
    outputs.update(primary_capsules=primary, coupling=coupling, class_capsules=capsules,
                   lengths=lengths)

    decoder = None
    if description.decoder is not None:
        d = description.decoder
        decoder = keras.Sequential(
            [keras.Input((d.input_size,), name="masked_capsules")]
            + [layers.Dense(u, activation="relu", name=f"decoder_dense{i + 1}")
               for i, u in enumerate(d.units)]
            + [layers.Dense(math.prod(d.output_shape), activation="sigmoid",
                            name="decoder_output"),
               layers.Reshape(d.output_shape, name="decoder_image")],
            name="decoder")
        outputs["reconstruction"] = decoder(Mask(name="mask_longest")(capsules))

    model = keras.Model(image, outputs, name="capsnet")
    encoder = keras.Model(image, [capsules, lengths], name="capsnet_encoder")
    primary_conv = next(convs[c.name] for c in description.conv_layers
                        if c.capsules == primary_desc.name)
    return CapsNet(params=params, description=description, model=model, encoder=encoder,
                   decoder=decoder, primary_conv=primary_conv, primary_caps=primary_caps,
                   class_caps=class_caps)
