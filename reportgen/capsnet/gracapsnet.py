"""GraCapsNet (Gu, Wu & Tresp, AAAI 2021; Gu 2022, Ch.4): the Keras model. Its description,
settings and parameter count are its family's (reportgen.families.gracapsnet); the graph
pooling layer is reportgen.capsnet.graph_pooling.
"""

from __future__ import annotations

from reportgen.capsnet.description import describe
from reportgen.capsnet.network import Network, capsule_losses


def build_gracapsnet(params) -> Network:
    """The Keras 3 model: conv layers, primary capsules, graph pooling into class capsules,
    lengths, optional decoder (from the longest class capsule at evaluation). Outputs: conv
    maps by layer name, primary_capsules, attention (B, heads, nodes, classes),
    class_capsules, lengths[, reconstruction]."""
    import keras

    from reportgen.capsnet.graph_pooling import GraphPooling
    from reportgen.capsnet.layers import Length, Mask
    from reportgen.capsnet.network import build_convs, build_decoder, primary_capsules

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
                   lengths=lengths)
    decoder = None
    if description.decoder is not None:
        decoder = build_decoder(description.decoder)
        outputs["reconstruction"] = decoder(Mask(name="mask_longest")(capsules))
    model = keras.Model(image, outputs, name="gracapsnet")
    encoder = keras.Model(image, [capsules, lengths], name="gracapsnet_encoder")
    primary_conv = next(convs[c.name] for c in description.conv_layers
                        if c.capsules == primary_desc.name)
    return Network(params=params, description=description, model=model, encoder=encoder,
                   decoder=decoder, primary_conv=primary_conv, primary_caps=primary_caps,
                   class_caps=pooling, training_losses=capsule_losses(params, encoder, decoder))
