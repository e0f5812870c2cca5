"""Matrix capsules with EM routing (Hinton, Sabour & Frosst 2018): the Keras model, built from
its description (reportgen.families.em).

Outputs of `model` (image -> dict): conv maps by layer name; for every capsule layer L on a
grid, "L_poses" (B, H, W, types, 16) and "L_activations" (B, H, W, types); for every routed
layer L, "L_routing": its EM assignments into the next layer (window form (B, Ph, Pw, K, K,
Tin, Tout) into a convolutional capsule layer, (B, children, classes) into the class
capsules); "class_capsules" (B, classes, 16) the class poses and "activations" (B, classes).
`encoder`: image -> [class poses, class activations] (the scores the model predicts by).
Training uses the spread loss with a margin that grows over training (`set_training_progress`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reportgen.capsnet.description import describe
from reportgen.families.em.description import coordinates
from reportgen.capsnet.network import Network, build_convs


@dataclass
class EMNetwork(Network):
    """A Network (reportgen.capsnet.network) whose spread-loss margin and learning rate follow
    the share of training done."""

    margin: Any = None                 # a non-trainable variable (never saved with the weights)

    def set_training_progress(self, progress: float) -> None:
        """Share of training done (0 … 1): the spread-loss margin follows it linearly."""
        self.margin.assign(self.params.family_settings.margin(progress))

    def learning_rate_factor(self, progress: float) -> float:
        return self.params.family_settings.learning_rate_factor(progress)


def build_em_capsnet(params) -> EMNetwork:
    import keras
    from keras import ops

    from reportgen.capsnet.losses import spread_loss
    from reportgen.families.em.layers import ConvCaps, MatrixClassCaps, MatrixPrimaryCaps

    description = describe(params)
    em = params.family_settings
    image = keras.Input(params.input_shape, name="image")
    x, outputs, convs = build_convs(description, image)
    primary_desc, *grid_layers, class_desc = description.capsule_layers
    primary_caps = MatrixPrimaryCaps(primary_desc.types, name=primary_desc.name)
    poses, activations = primary_caps(x)
    outputs[f"{primary_desc.name}_poses"] = poses
    outputs[f"{primary_desc.name}_activations"] = activations
    layers = {primary_desc.name: primary_caps}
    before = primary_desc
    for layer in grid_layers:
        conv_caps = ConvCaps(layer.types, layer.kernel_size[0], layer.strides[0],
                             routing_iterations=em.routing_iterations,
                             inverse_temperature=em.inverse_temperature,
                             kernel_init_stddev=em.kernel_init_stddev,
                             detach_assignments=em.detach_assignments, name=layer.name)
        poses, activations, routing = conv_caps([poses, activations])
        outputs[f"{before.name}_routing"] = routing
        outputs[f"{layer.name}_poses"] = poses
        outputs[f"{layer.name}_activations"] = activations
        layers[layer.name] = conv_caps
        before = layer
    class_caps = MatrixClassCaps(class_desc.types, routing_iterations=em.routing_iterations,
                                 inverse_temperature=em.inverse_temperature,
                                 coordinate_addition=class_desc.coordinate_addition,
                                 coordinates=coordinates(description, before),
                                 kernel_init_stddev=em.kernel_init_stddev,
                                 detach_assignments=em.detach_assignments,
                                 name=class_desc.name)
    class_poses, class_activations, routing = class_caps([poses, activations])
    outputs[f"{before.name}_routing"] = routing
    outputs["class_capsules"] = class_poses
    outputs["activations"] = class_activations
    layers[class_desc.name] = class_caps
    model = keras.Model(image, outputs, name="em_capsnet")
    encoder = keras.Model(image, [class_poses, class_activations], name="em_capsnet_encoder")
    margin = keras.Variable(em.margin_start, trainable=False, name="spread_margin")

    def training_losses(images, one_hot):
        _, scores = encoder(images, training=True)
        loss = spread_loss(one_hot, scores, margin)
        return loss, ops.zeros_like(loss), scores

    primary_conv = next(convs[c.name] for c in description.conv_layers
                        if c.capsules == primary_desc.name)
    return EMNetwork(params=params, description=description, model=model, encoder=encoder,
                     decoder=None, primary_conv=primary_conv, primary_caps=primary_caps,
                     class_caps=class_caps, training_losses=training_losses,
                     capsule_layers=layers, margin=margin)
