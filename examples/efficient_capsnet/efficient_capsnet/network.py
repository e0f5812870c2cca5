"""The Keras model of an Efficient-CapsNet description (efficient_capsnet.family), as the
authors build their MNIST graph (github.com/EscVM/Efficient-CapsNet,
models/efficient_capsnet_graph_mnist.py): Conv2D (he_normal, ReLU) + BatchNormalization per
`[[conv]]`, a depthwise convolution, the primary capsules, FCCaps, and the decoder.

`model`'s outputs (what reportgen's probe reads): the plain convolutions' ReLU outputs by layer
name (before their BatchNorm), "primary_conv" the depthwise convolution's output,
"primary_capsules" (B, children, dims), "primary_caps_routing" (B, children, classes) the
coupling coefficients c_ij, "primary_caps_routing_with_bias" (B, children, classes) c_ij + b_ij,
"class_capsules" (B, classes, dims), "lengths" (B, classes) and, with a decoder,
"reconstruction" from the longest class capsule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from reportgen.sdk import Network
from efficient_capsnet.family import BIASED_ROUTING


@dataclass
class EfficientCapsNetwork(Network):
    """reportgen's Network with the authors' learning-rate schedule: lr x decay^epoch, never
    below `min_learning_rate` (their learn_scheduler, utils/tools.py; epochs counted from 0)."""

    epochs: int = 1
    decay: float = 1.0
    floor: float = 0.0             # min_learning_rate / the params' learning rate

    def learning_rate_factor(self, progress: float) -> float:
        # reportgen tells the share of the run done; the epoch is that share of the params'
        # epochs (the run's own epochs, when --epochs overrides them, are not told).
        epoch = min(math.floor(progress * self.epochs + 1e-9), self.epochs - 1)
        return max(self.decay ** max(epoch, 0), self.floor)


def build_decoder(d):
    """The authors' generator (generator_graph): FC 512 and FC 1024 ReLU (he_normal), then a
    sigmoid image (glorot_normal); layer names as reportgen's decoder."""
    import keras
    from keras import layers

    return keras.Sequential(
        [keras.Input((d.input_size,), name="masked_capsules")]
        + [layers.Dense(u, activation="relu", kernel_initializer="he_normal",
                        name=f"decoder_dense{i + 1}") for i, u in enumerate(d.units)]
        + [layers.Dense(math.prod(d.output_shape), activation="sigmoid",
                        kernel_initializer="glorot_normal", name="decoder_output"),
           layers.Reshape(d.output_shape, name="decoder_image")],
        name="decoder")


def build_efficient_capsnet(params) -> EfficientCapsNetwork:
    """The Keras model for `params`, built from its description (same layer names and sizes);
    weights freshly initialised. Loss: reportgen's capsule_losses, the margin loss and the
    weighted mean squared reconstruction error, which is the authors' marginLoss + lmd_gen x
    'mse' (models/model.py)."""
    import keras
    from keras import layers

    from reportgen.sdk import Length, Mask, capsule_losses, describe

    from efficient_capsnet.layers import FCCaps, PrimaryCaps

    description = describe(params)
    own = params.family_settings

    def activation(name):
        return None if name == "none" else name

    image = keras.Input(params.input_shape, name="image")
    outputs, x = {}, image
    for conv in description.plain_conv_layers:
        x = layers.Conv2D(conv.filters, conv.kernel_size, strides=conv.strides,
                          padding=conv.padding, activation=activation(conv.activation),
                          kernel_initializer="he_normal", name=conv.name)(x)
        outputs[conv.name] = x
        # Keras's BatchNormalization as the authors use it (epsilon 1e-3)
        x = layers.BatchNormalization(momentum=own.batch_norm_momentum,
                                      name=f"{conv.name}_batch_norm")(x)
    conv = description.layer("primary_conv")
    # Their Conv2D(F, K, groups=F) over F channels is a depthwise convolution of multiplier 1
    primary_conv = layers.DepthwiseConv2D(conv.kernel_size, strides=conv.strides,
                                          padding=conv.padding,
                                          activation=activation(conv.activation),
                                          name=conv.name)
    maps = outputs[conv.name] = primary_conv(x)
    primary_desc, class_desc = description.primary_capsules, description.class_capsules
    primary_caps = PrimaryCaps(primary_desc.types, primary_desc.pose_size, own.squash_epsilon,
                               name=primary_desc.name)
    primary = primary_caps(maps)
    class_caps = FCCaps(class_desc.types, class_desc.pose_size, routing_bias=own.routing_bias,
                        squash_epsilon=own.squash_epsilon, name=class_desc.name)
    capsules, coupling, weights = class_caps(primary)
    lengths = Length(params.class_caps.length_epsilon, name="lengths")(capsules)
    outputs.update({"primary_capsules": primary,
                    primary_desc.routing.output_of(primary_desc.name): coupling,
                    BIASED_ROUTING: weights, "class_capsules": capsules, "lengths": lengths})
    decoder = None
    if description.decoder is not None:
        decoder = build_decoder(description.decoder)
        outputs["reconstruction"] = decoder(Mask(name="mask_longest")(capsules))
    model = keras.Model(image, outputs, name="efficient_capsnet")
    encoder = keras.Model(image, [capsules, lengths], name="efficient_capsnet_encoder")
    primary_model = keras.Model(image, primary, name="efficient_capsnet_primary_capsules")

    def votes(images):
        """images -> u_hat[j|i] (B, children, classes, dims), the model's own layers."""
        return class_caps.votes(primary_model(images, training=False))

    training = params.training
    return EfficientCapsNetwork(params=params, description=description, model=model,
                                encoder=encoder, decoder=decoder, primary_conv=primary_conv,
                                primary_caps=primary_caps, class_caps=class_caps,
                                training_losses=capsule_losses(params, encoder, decoder),
                                capsule_layers={class_desc.name: class_caps}, votes=votes,
                                epochs=training.epochs, decay=own.learning_rate_decay,
                                floor=own.min_learning_rate / training.learning_rate)
