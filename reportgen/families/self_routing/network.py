"""The Keras model of Self-Routing capsules (Hahn, Pyeon & Kim, NeurIPS 2019; the authors'
SmallNet in SR mode), built from its description (reportgen.families.self_routing).

The Keras model's outputs: conv maps by layer name ("conv1" after BatchNorm + ReLU, the two
primary convolutions after their BatchNorm and, for the activations, the sigmoid); for each
capsule layer L on a grid "L_poses" (B, H, W, types, D) and "L_activations" (B, H, W, types);
"L_routing" (B, children, parents) the routing weights out of L, dense and each child's
summing to 1 over every parent it reaches: its coupling in each window divided by the
number of windows that see it (so a child shares itself out like an EM assignment; in the
class layer one window, the coupling itself); "activations" (B, classes) the class activations
(they sum to 1, since every child's couplings do) and "class_capsules" (B, classes, 1) the
same as 1-value poses (the class layer has none of its own). Loss: the negative log-likelihood
of the true class's activation (the authors' `out.log()` and NLLLoss).
"""

from __future__ import annotations

import keras
from keras import ops

from reportgen.families.self_routing.layers import SelfRoutingClassCaps, SelfRoutingConvCaps
from reportgen.families.self_routing.routing import TINY


def build_self_routing(params):
    """The Keras model of a Self-Routing description (the authors' SmallNet in SR mode): a
    reportgen.capsnet.network.Network whose loss is the negative log-likelihood."""
    from keras import layers

    from reportgen.capsnet.description import describe
    from reportgen.capsnet.network import Network

    description = describe(params)
    sr = params.family_settings
    pad = sr.padding

    def batch_norm(name):
        # PyTorch's BatchNorm2d: epsilon 1e-5; `batch_norm_momentum` is Keras's (PyTorch 0.1 =
        # Keras 0.9)
        return layers.BatchNormalization(momentum=sr.batch_norm_momentum, epsilon=1e-5,
                                         name=name)

    def conv(conv_desc, x):
        """zero padding, the convolution (no bias), BatchNorm, its activation."""
        x = layers.ZeroPadding2D(pad, name=f"{conv_desc.name}_padding")(x)
        x = layers.Conv2D(conv_desc.filters, conv_desc.kernel_size, strides=conv_desc.strides,
                          padding="valid", use_bias=False, kernel_initializer="he_uniform",
                          name=conv_desc.name)(x)
        x = batch_norm(f"{conv_desc.name}_batch_norm")(x)
        if conv_desc.activation != "none":
            x = layers.Activation(conv_desc.activation, name=f"{conv_desc.name}_"
                                  f"{conv_desc.activation}")(x)
        return x

    image = keras.Input(params.input_shape, name="image")
    outputs = {}
    *plain, pose_conv, activation_conv = description.conv_layers
    x = image
    for conv_desc in plain:
        x = outputs[conv_desc.name] = conv(conv_desc, x)
    pose_maps = outputs[pose_conv.name] = conv(pose_conv, x)
    activations = outputs[activation_conv.name] = conv(activation_conv, x)
    primary, conv_caps_desc, class_desc = description.capsule_layers
    gh, gw = primary.grid
    poses = layers.Reshape((gh, gw, primary.types, primary.pose_size), name=primary.name)(
        pose_maps)
    outputs[f"{primary.name}_poses"] = poses
    outputs[f"{primary.name}_activations"] = activations
    conv_caps = SelfRoutingConvCaps(conv_caps_desc.types, conv_caps_desc.pose_size,
                                    conv_caps_desc.kernel_size[0], conv_caps_desc.strides[0],
                                    pad, name=conv_caps_desc.name)
    poses, activations, routing = conv_caps([poses, activations])
    outputs[f"{primary.name}_routing"] = routing
    ch, cw = conv_caps_desc.grid
    channels = conv_caps_desc.types * conv_caps_desc.pose_size
    poses = layers.Reshape((ch, cw, channels))(poses)
    poses = batch_norm(f"{conv_caps_desc.name}_batch_norm")(poses)
    poses = layers.Reshape((ch, cw, conv_caps_desc.types, conv_caps_desc.pose_size))(poses)
    outputs[f"{conv_caps_desc.name}_poses"] = poses
    outputs[f"{conv_caps_desc.name}_activations"] = activations
    class_caps = SelfRoutingClassCaps(class_desc.types, name=class_desc.name)
    scores, routing = class_caps([poses, activations])
    outputs[f"{conv_caps_desc.name}_routing"] = routing
    class_vectors = layers.Reshape((class_desc.types, 1), name="class_activation_poses")(scores)
    outputs["class_capsules"] = class_vectors
    outputs["activations"] = scores
    model = keras.Model(image, outputs, name="self_routing_capsnet")
    encoder = keras.Model(image, [class_vectors, scores], name="self_routing_encoder")

    def training_losses(images, one_hot):
        _, probabilities = encoder(images, training=True)
        nll = -ops.sum(one_hot * ops.log(ops.maximum(probabilities, TINY)), axis=-1)
        return nll, ops.zeros_like(nll), probabilities

    return Network(params=params, description=description, model=model, encoder=encoder,
                   decoder=None, primary_conv=model.get_layer(pose_conv.name),
                   class_caps=class_caps, training_losses=training_losses,
                   capsule_layers={conv_caps_desc.name: conv_caps, class_desc.name: class_caps})
