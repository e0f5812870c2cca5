"""The Keras model of an inverted dot-product attention routing description
(idpa_capsnet.family), as the authors' CapsModel computes it
(github.com/apple/ml-capsules-inverted-attention-routing, src/capsule_model.py): the simple
backbone's convolutions + ReLU, the primary convolution (no bias) and LayerNorm, the capsule
layers routed for `[idpa] iterations`, concurrently (the authors' default) or sequentially, the
shared linear readout and the cross-entropy loss.

The routing iterations are unrolled in the graph: each capsule layer is one Keras layer called
once per iteration (its weights shared), with the poses of the iteration before:

    concurrent   iteration 1: p^1_1 = f_1(p_0), p^1_2 = f_2(p^1_1), ...      (uniform r)
                 iteration t: p^t_l = f_l(p^{t-1}_{l-1}, parents p^{t-1}_l)  for every layer l
    sequential   per layer l: p_l = f_l(p_{l-1}), then t - 1 times p_l = f_l(p_{l-1}, p_l)

(the authors' forward: capsule_values, _capsule_values). Under concurrent routing the last
iteration's class capsules are thus routed from the layer below's poses of the iteration before.

`model`'s outputs (what reportgen's probe reads): the plain convolutions' ReLU outputs and
"primary_conv" by layer name, "primary_capsules" (B, gh * gw * types, 16) the LayerNorm'd
primary poses, "<layer>_routing" for every capsule layer routed into the next (window form
(B, Ph, Pw, K, K, Tin, Tout) into a convolutional capsule layer, (B, children, classes) into
the class capsules: the last iteration's r), "class_capsules" (B, classes, 16), "logits" and
"probabilities" (their softmax). `encoder`: image -> [class capsules, logits]. `votes` (the
"votes" capability): images -> the votes into the class capsules (B, children, classes, 16).
"""

from __future__ import annotations

import math

from reportgen.sdk import Network


def torch_initializers(fan_in: int):
    """(kernel, bias) initialisers of torch.nn.Conv2d's default (kaiming_uniform with a =
    sqrt(5): uniform in +-1/sqrt(fan_in), and the bias likewise), as the authors' convolutions
    start."""
    import keras

    bound = 1.0 / math.sqrt(fan_in)
    return (keras.initializers.VarianceScaling(1.0 / 3.0, "fan_in", "uniform"),
            keras.initializers.RandomUniform(-bound, bound))


def route(layers, primary, iterations: int, sequential: bool):
    """Unroll the routing of capsule layers `layers` (each called as layer(children) or
    layer(children, parents) -> [poses, r]) over the primary poses: (the class poses, the
    last iteration's r of every layer, the poses each layer's last call was routed from)."""
    if sequential:
        children, weights, routed_from = primary, [], []
        for layer in layers:
            poses, r = layer(children)
            for _ in range(iterations - 1):
                poses, r = layer(children, poses)
            weights.append(r)
            routed_from.append(children)
            children = poses
        return children, weights, routed_from
    poses, weights = [primary], []
    for layer in layers:
        p, r = layer(poses[-1])
        poses.append(p)
        weights.append(r)
    before = poses
    for _ in range(iterations - 1):
        before = poses
        stepped = [layer(before[i], before[i + 1]) for i, layer in enumerate(layers)]
        poses = [primary] + [p for p, _ in stepped]
        weights = [r for _, r in stepped]
    return poses[-1], weights, before[:-1]


def build_idpa(params) -> Network:
    """The Keras model for `params`, built from its description (same layer names and sizes);
    weights freshly initialised as the authors' are (torch's defaults for the convolutions and
    the readout, their Normal(0, weight_init_const) for W, LayerNorm scale 1 and offset 0)."""
    import keras
    from keras import layers, ops

    from reportgen.sdk import describe

    from idpa_capsnet.layers import ClassCaps, ConvCaps, PrimaryCaps, Readout

    description = describe(params)
    own = params.family_settings
    epsilon = own.layer_norm_epsilon

    image = keras.Input(params.input_shape, name="image")
    outputs, x, channels = {}, image, params.input_shape[2]
    for conv in description.conv_layers:
        kernel, bias = torch_initializers(channels * math.prod(conv.kernel_size))
        layer = layers.Conv2D(conv.filters, conv.kernel_size, strides=conv.strides,
                              padding=conv.padding, use_bias=not conv.capsules,
                              activation=None if conv.activation == "none" else conv.activation,
                              kernel_initializer=kernel, bias_initializer=bias, name=conv.name)
        x = outputs[conv.name] = layer(x)
        channels = conv.filters
    primary_conv = layer
    *grid_layers, class_desc = description.capsule_layers
    primary_desc = grid_layers[0]
    primary_caps = PrimaryCaps(primary_desc.types, primary_desc.pose_size, epsilon,
                               name=primary_desc.name)
    primary = primary_caps(x)
    outputs["primary_capsules"] = layers.Reshape((primary_desc.capsules,
                                                  primary_desc.pose_size),
                                                 name="primary_capsules")(primary)
    routed = [ConvCaps(d.types, d.kernel_size[0], d.strides[0], epsilon, name=d.name)
              for d in grid_layers[1:]]
    class_caps = ClassCaps(class_desc.types, epsilon, name=class_desc.name)
    capsules, weights, routed_from = route([*routed, class_caps], primary, own.iterations,
                                           own.sequential_routing)
    for child, r in zip(grid_layers, weights):
        outputs[child.routing.output_of(child.name)] = r
    logits = Readout(name="readout")(capsules)
    probabilities = layers.Softmax(name="probabilities")(logits)
    outputs.update({"class_capsules": capsules, "logits": logits,
                    "probabilities": probabilities})
    model = keras.Model(image, outputs, name="idpa_capsnet")
    encoder = keras.Model(image, [capsules, logits], name="idpa_capsnet_encoder")
    # the poses the last iteration's class capsules were routed from
    children_model = keras.Model(image, routed_from[-1], name="idpa_capsnet_class_children")

    def votes(images):
        """images -> v_ij = P_i W_ij (B, children, classes, 16): the votes of the capsules the
        class capsules were routed from in the last iteration, by the model's own layers."""
        return class_caps.votes(children_model(images, training=False))

    def training_losses(images, one_hot):
        """The authors' nn.CrossEntropyLoss of the logits (per image), no reconstruction."""
        _, scores = encoder(images, training=True)
        cross_entropy = -ops.sum(one_hot * ops.log_softmax(scores, axis=-1), axis=-1)
        return cross_entropy, ops.zeros_like(cross_entropy), scores

    return Network(params=params, description=description, model=model, encoder=encoder,
                   decoder=None, primary_conv=primary_conv, primary_caps=primary_caps,
                   class_caps=class_caps, training_losses=training_losses, votes=votes,
                   capsule_layers={layer.name: layer for layer in [*routed, class_caps]})
