"""Sabour et al. 2017's CapsNet as a Keras 3 model, built from its description
(reportgen.families.capsnet), so that `net.description` — what techniques and renderers read —
is what was built.

`model`: image -> dict(conv feature maps by layer name, primary_capsules, coupling,
class_capsules, lengths[, reconstruction]); the reconstruction is from the longest class
capsule. It holds every weight: weights files are saved from and loaded into it. `encoder`:
image -> [class_capsules, lengths] (training, evaluation). `decoder`: masked class capsules
(batch, classes*dims) -> image, or None.
"""

from __future__ import annotations

import keras

from reportgen.capsnet.description import describe
from reportgen.capsnet.layers import ClassCaps, Length, Mask
from reportgen.capsnet.network import (Network, build_convs, build_decoder, capsule_losses,
                                       primary_capsules)


def build_vector_capsnet(params) -> Network:
    """The Keras 3 model for `params`, built from `describe(params)`; weights freshly
    initialised."""
    description = describe(params)
    image = keras.Input(params.input_shape, name="image")
    x, outputs, convs = build_convs(description, image)
    primary_desc, class_desc = description.primary_capsules, description.class_capsules
    primary_caps, primary = primary_capsules(params, description, x)
    c = params.class_caps
    class_caps = ClassCaps(class_desc.types, class_desc.pose_size,
                           routing_iterations=primary_desc.routing.iterations,
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

    net = vector_network(params, description, image, outputs, convs, primary_caps, class_caps,
                         name="capsnet")
    # the "votes" capability: the sub-graph up to the primary capsules (shared layers, no copy)
    primary_model = keras.Model(image, primary, name="capsnet_primary_capsules")
    net.votes = lambda images: class_caps.votes(primary_model(images, training=False))
    return net


def vector_network(params, description, image, outputs, convs, primary_caps, class_caps,
                   name: str) -> Network:
    """The Network of a model whose class capsules are vectors scored by their length (the
    `class_capsules` and `lengths` of `outputs`): the decoder reconstructing from the longest
    class capsule, the whole model, the encoder image -> [class capsules, lengths] and the
    margin (+ reconstruction) losses."""
    capsules = outputs["class_capsules"]
    decoder = None
    if description.decoder is not None:
        decoder = build_decoder(description.decoder)
        outputs["reconstruction"] = decoder(Mask(name="mask_longest")(capsules))
    model = keras.Model(image, outputs, name=name)
    encoder = keras.Model(image, [capsules, outputs["lengths"]], name=f"{name}_encoder")
    primary_desc = description.primary_capsules
    primary_conv = next(convs[c.name] for c in description.conv_layers
                        if c.capsules == primary_desc.name)
    return Network(params=params, description=description, model=model, encoder=encoder,
                   decoder=decoder, primary_conv=primary_conv, primary_caps=primary_caps,
                   class_caps=class_caps,
                   training_losses=capsule_losses(params, encoder, decoder))
