"""The built network of every model family: one interface that the probe, the trainer and the
analyses meet whatever the family (reportgen.settings.families; each family's `build` returns
one, held to the network contract of reportgen.contract):
`model` (image -> dict of named outputs), `encoder` (image -> [class vectors, class
scores]; the scores are what the model predicts by: class-capsule lengths, a CNN's
probabilities, matrix capsules' activations), `decoder` (masked class vectors -> image, or
None), `description`, and the family's loss (`training_losses`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from reportgen.capsnet.description import ModelDescription


@dataclass
class Network:
    params: Any                        # reportgen.settings.model_params.ModelParams
    description: ModelDescription
    model: Any                         # keras.Model: image -> dict of outputs
    encoder: Any                       # keras.Model: image -> [class vectors, class scores]
    decoder: Any = None                # keras.Model or None
    primary_conv: Any = None           # the conv layer forming the primary capsules, if any
    primary_caps: Any = None
    class_caps: Any = None             # the layer computing the class capsules, if any
    # (images, one_hot) -> (classification loss (B,), reconstruction loss (B,), scores (B, K)):
    # the family's loss, which the trainer minimises (the sum's batch mean).
    training_losses: Callable | None = None
    # The name of training_losses' classification term when it is not the family's
    # (Family.classification_loss; e.g. a CNN head trained with the margin loss); None: the
    # family's. `classification_loss_name` says which.
    classification_loss: str | None = None
    # Families whose two-label loss is sigmoid + binary cross-entropy (the CNN baselines on
    # MultiMNIST, Gu 2022 Ch.5): image -> [class vectors, logits]. None: the margin loss on the
    # encoder's scores, both classes present (Sabour et al. 2017, section 6).
    pair_logits: Any = None
    # The capsule layers by name, for families whose analyses reach into them.
    capsule_layers: dict[str, Any] = field(default_factory=dict)
    # The "votes" capability (reportgen.contract): images (B, H, W, C) -> (B, children, classes,
    # dims) the votes u_hat[j|i] into the class capsules; None without it.
    votes: Callable | None = None
    # Which passes run XLA-compiled (reportgen.settings.families.XLA); None: the family's.
    xla: Any = None
    # The compiled passes, made on first use and reused (reportgen.capsnet.compiled).
    compiled_passes: dict = field(default_factory=dict, repr=False, compare=False)

    def uses_xla(self, gradients: bool) -> bool:
        """Whether passes with (the training step, the probe's gradients) or without gradients
        (the probe's forward, the evaluation) are XLA-compiled for this network."""
        from reportgen.settings.families import family_of

        xla = self.xla if self.xla is not None else family_of(self.params).xla
        return xla.gradients if gradients else xla.forward

    def classification_loss_name(self) -> str:
        """The history's name of the classification term of `training_losses`: this
        network's own, else its family's (Family.classification_loss)."""
        from reportgen.settings.families import family_of

        return self.classification_loss or family_of(self.params).classification_loss

    def set_training_progress(self, progress: float) -> None:
        """Share of training done (0 … 1), told before every batch: families whose loss changes
        over training follow it (EM's spread-loss margin); the others ignore it."""

    def learning_rate_factor(self, progress: float) -> float:
        """What the trainer multiplies the learning rate by after `progress` of training."""
        return 1.0

    @property
    def conv_layer_names(self) -> tuple[str, ...]:
        """Every conv layer, input side first (= description.conv_layer_names)."""
        return self.description.conv_layer_names

    @property
    def plain_conv_layer_names(self) -> tuple[str, ...]:
        """The conv layers before the capsules (every conv layer but the primary-capsule conv)."""
        return tuple(c.name for c in self.description.plain_conv_layers)

    @property
    def grid_shape(self) -> tuple[int, int] | None:
        """Primary-capsule grid (H, W), or None without one."""
        primary = self.description.primary_capsules
        return primary.grid if primary is not None else None

    @property
    def num_primary_capsules(self) -> int:
        primary = self.description.primary_capsules
        return primary.capsules if primary is not None else 0

    def trainable_params(self) -> int:
        return int(sum(math.prod(w.shape) for w in self.model.trainable_weights))

    def receptive_fields(self) -> list[tuple[int, int, int]]:
        """(start, size, stride) along the rows of each conv layer's receptive field, input side
        first (= [c.receptive_field.rows for c in description.conv_layers])."""
        return [c.receptive_field.rows for c in self.description.conv_layers]


def conv_param_count(description: ModelDescription) -> int:
    """Weights and biases of every conv layer (kernel_h * kernel_w * in * out + out)."""
    channels, total = description.input_shape[2], 0
    for conv in description.conv_layers:
        total += math.prod(conv.kernel_size) * channels * conv.filters + conv.filters
        channels = conv.filters
    return total


def dense_param_count(widths, bias: bool = True) -> int:
    """Weights (and biases) of a chain of dense layers of `widths` (input first)."""
    widths = list(widths)
    return sum(a * b + (b if bias else 0) for a, b in zip(widths, widths[1:]))


def decoder_param_count(description: ModelDescription) -> int:
    d = description.decoder
    if d is None:
        return 0
    return dense_param_count([d.input_size, *d.units, math.prod(d.output_shape)])


def build_decoder(d):
    """The CapsNet's decoder (Sabour et al. 2017) of a DecoderDescription `d`: FC ReLU
    layers, then a sigmoid image."""
    import keras
    from keras import layers

    return keras.Sequential(
        [keras.Input((d.input_size,), name="masked_capsules")]
        + [layers.Dense(u, activation="relu", name=f"decoder_dense{i + 1}")
           for i, u in enumerate(d.units)]
        + [layers.Dense(math.prod(d.output_shape), activation="sigmoid", name="decoder_output"),
           layers.Reshape(d.output_shape, name="decoder_image")],
        name="decoder")


def build_convs(description: ModelDescription, x):
    """The conv layers of `description` applied to `x`: (last output, {name: output},
    {name: layer})."""
    from keras import layers

    outputs, convs = {}, {}
    for conv in description.conv_layers:
        convs[conv.name] = layers.Conv2D(
            conv.filters, conv.kernel_size, strides=conv.strides, padding=conv.padding,
            activation=None if conv.activation == "none" else conv.activation, name=conv.name)
        x = convs[conv.name](x)
        outputs[conv.name] = x
    return x, outputs, convs


def primary_capsules(params, description: ModelDescription, x):
    """The primary capsules of the conv output `x`: (the PrimaryCaps layer, its output).

    With `primary.batch_norm`, the channels are batch-normalised before the squash, as in Gu's
    capsule code (JindongGu/VoteAttack, models/capsnet.py: BatchNorm2d on the primary
    channels, then the squash): centred components do not all add up in the same direction
    when many capsules are summed (one shared matrix per class, Aff-CapsNet). PyTorch's
    epsilon; momentum 0.5, not PyTorch's 0.1 (= 0.9 here): early in training the conv weights
    move fast and the moving statistics must follow, as every saved step is analysed with
    them (MNIST_AffCaps after 1 / 2 epochs on 1,500 digits: 0.9 gives 1-9% / 52-78% held-out,
    0.5 gives 61-63% / 77-83%, the same weights trained).
    """
    from keras import layers

    from reportgen.capsnet.layers import PrimaryCaps

    desc = description.primary_capsules
    if params.primary.batch_norm:
        x = layers.BatchNormalization(momentum=0.5, epsilon=1e-5, center=False, scale=False,
                                      name="primary_batch_norm")(x)
    layer = PrimaryCaps(desc.types, desc.pose_size, name=desc.name)
    return layer, layer(x)


def capsule_losses(params, encoder, decoder):
    """Sabour et al. 2017's loss as `training_losses`: the margin loss on the class scores
    (eq. 4) and the weighted reconstruction of the image from the true class's capsule, the
    others masked (section 4.1); no reconstruction term without a decoder."""
    from keras import ops

    from reportgen.capsnet.layers import Mask
    from reportgen.capsnet.losses import margin_loss, reconstruction_loss

    lp = params.loss
    mask = Mask()

    def losses(images, one_hot):
        capsules, lengths = encoder(images, training=True)
        margin = margin_loss(one_hot, lengths, lp.m_plus, lp.m_minus, lp.down_weight)
        if decoder is not None:
            recon = decoder(mask([capsules, one_hot]), training=True)
            rec = reconstruction_loss(images, recon, lp.reconstruction_weight)
        else:
            rec = ops.zeros_like(margin)
        return margin, rec, lengths

    return losses


def vector_network(params, description, image, outputs, convs, primary_caps, class_caps,
                   name: str) -> Network:
    """The Network of a model whose class capsules are vectors scored by their length (the
    `class_capsules` and `lengths` of `outputs`): the decoder reconstructing from the longest
    class capsule, the whole model, the encoder image -> [class capsules, lengths] and the
    margin (+ reconstruction) losses (Sabour et al. 2017's CapsNet, GraCapsNet)."""
    import keras

    from reportgen.capsnet.layers import Mask

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
