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
from reportgen.capsnet.layers import Length
from reportgen.capsnet.network import Network, build_convs, primary_capsules, vector_network
from reportgen.families.capsnet.layers import ClassCaps


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
