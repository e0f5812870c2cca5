"""GraCapsNet (Gu, Wu & Tresp, AAAI 2021; Gu 2022, Ch.4): the Keras model. Its description,
settings and parameter count are its family's (reportgen.families.gracapsnet); the graph
pooling layer is reportgen.families.gracapsnet.layers.
"""

from __future__ import annotations

from reportgen.capsnet.description import describe
from reportgen.capsnet.network import Network


def build_gracapsnet(params) -> Network:
    """The Keras 3 model: conv layers, primary capsules, graph pooling into class capsules,
    lengths, optional decoder (from the longest class capsule at evaluation). Outputs: conv
    maps by layer name, primary_capsules, attention (B, heads, nodes, classes),
    explanation (B, classes, gh, gw): E, the attention averaged over heads on the grid,
    class_capsules, lengths[, reconstruction]."""
    import keras

    from reportgen.capsnet.layers import Length
    from reportgen.capsnet.network import build_convs, primary_capsules, vector_network
    from reportgen.families.gracapsnet.layers import GraphPooling, HeadMean

    description = describe(params)
    primary_desc, class_desc = description.primary_capsules, description.class_capsules
    image = keras.Input(params.input_shape, name="image")
    x, outputs, convs = build_convs(description, image)
    primary_caps, primary = primary_capsules(params, description, x)
    pooling = GraphPooling(class_desc.types, class_desc.pose_size, heads=primary_desc.types,
                           grid=primary_desc.grid, sigma=params.family_settings.sigma,
                           kernel_init_stddev=params.class_caps.kernel_init_stddev,
                           name=class_desc.name)
    capsules, attention = pooling(primary)
    lengths = Length(name="lengths")(capsules)
    outputs.update(primary_capsules=primary, attention=attention, class_capsules=capsules,
                   lengths=lengths,
                   explanation=HeadMean(primary_desc.grid, name="explanation")(attention))
    return vector_network(params, description, image, outputs, convs, primary_caps, pooling,
                          name="gracapsnet")
