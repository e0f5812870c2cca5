"""Training on two labels per image (MultiMNIST: Sabour et al. 2017, section 6; Gu 2022, Ch.5):
the losses and the metric, as Keras ops usable inside a compiled train step.

`labels` are always (batch, 2) class indices of two different classes.
- CapsNets: the margin loss with both classes present (T_k = 1 for both labels; Sabour et al.
  2017, eq. 4), plus the decoder run twice, masked to each true class's capsule, each run
  against its own single source digit; the two reconstruction losses are summed.
- CNN baselines: sigmoid + binary cross-entropy per class, summed over the classes (as the
  single-label "cr" head of reportgen.families.cnn.network).
- Correct = both labels among the two largest scores (top-2); chance is 1 / C(K, 2).
"""

from __future__ import annotations

from keras import ops

from reportgen.capsnet.layers import Mask
from reportgen.capsnet.losses import margin_loss, reconstruction_loss


def two_hot(labels, num_classes: int):
    """(batch, num_classes) float32 with a 1 at both labels of each example."""
    one_hots = ops.one_hot(ops.cast(labels, "int32"), num_classes, dtype="float32")
    return ops.max(one_hots, axis=1)


def pair_margin_loss(labels, lengths, m_plus: float = 0.9, m_minus: float = 0.1,
                     down_weight: float = 0.5):
    """Margin loss with both labels present, per example (batch,); `lengths` (batch, K) are the
    class-capsule lengths."""
    return margin_loss(two_hot(labels, lengths.shape[-1]), lengths, m_plus, m_minus, down_weight)


def pair_binary_crossentropy(labels, logits):
    """Binary cross-entropy of sigmoid(logits) against the two-hot target, summed over the K
    classes, per example (batch,)."""
    target = two_hot(labels, logits.shape[-1])
    return ops.sum(ops.binary_crossentropy(target, logits, from_logits=True), axis=-1)


def pair_reconstructions(decode, capsules, labels, mask=None):
    """[reconstruction of the first label's digit, of the second's]: `decode` (a callable, e.g.
    `lambda z: net.decoder(z, training=True)`) fed the class capsules (batch, K, D) masked to
    one label at a time."""
    mask = mask or Mask()
    num_classes = capsules.shape[1]
    labels = ops.cast(labels, "int32")
    return [decode(mask([capsules, ops.one_hot(labels[:, j], num_classes, dtype=capsules.dtype)]))
            for j in range(2)]


def pair_reconstruction_loss(decode, capsules, labels, sources, weight: float, mask=None):
    """Sum over the two labels of weight x mean squared pixel error between the reconstruction
    masked to that label and its source digit; `sources` (batch, 2, H, W, C) as
    reportgen.data.multimnist renders them. Per example (batch,)."""
    first, second = pair_reconstructions(decode, capsules, labels, mask)
    return (reconstruction_loss(sources[:, 0], first, weight)
            + reconstruction_loss(sources[:, 1], second, weight))


def top2_correct(labels, scores):
    """(batch,) float32: 1 where the two largest scores are the two labels (in either order).
    Ties are broken towards the lower class index, as ops.top_k does."""
    _, top = ops.top_k(scores, k=2)
    labels = ops.cast(labels, top.dtype)
    same = ops.logical_and(top[:, 0] == labels[:, 0], top[:, 1] == labels[:, 1])
    swapped = ops.logical_and(top[:, 0] == labels[:, 1], top[:, 1] == labels[:, 0])
    return ops.cast(ops.logical_or(same, swapped), "float32")


def pair_classification_loss(net) -> str:
    """The history's name of the classification term `pair_training_losses` trains `net`
    with: "cross_entropy" (the binary cross-entropy of networks with `pair_logits`) or
    "margin_loss"."""
    return "cross_entropy" if net.pair_logits is not None else "margin_loss"


def pair_training_losses(net):
    """A network's loss on two labels per image: (images, labels (B, 2), sources
    (B, 2, H, W, C)) -> (classification loss (B,), reconstruction loss (B,), scores (B, K)).

    Networks with `pair_logits` (the CNN baselines) pay sigmoid + binary cross-entropy on their
    logits; the others the margin loss with both classes present on their class-capsule
    lengths. The decoder, when there is one, runs once per label against that label's digit
    (Sabour et al. 2017, section 6). None for a network whose scores are neither (matrix
    capsules' activations, trained with the spread loss on one label)."""
    lp = net.params.loss
    head = net.description.head
    capsule_lengths = head.kind == "capsules" and all(
        layer.activation == "length" for layer in net.description.capsule_layers)
    if net.pair_logits is None and not capsule_lengths:
        return None
    mask = Mask()
    decoder = net.decoder

    def losses(images, labels, sources):
        if net.pair_logits is not None:
            vectors, logits = net.pair_logits(images, training=True)
            scores = logits
            classification = pair_binary_crossentropy(labels, logits)
        else:
            vectors, scores = net.encoder(images, training=True)
            classification = pair_margin_loss(labels, scores, lp.m_plus, lp.m_minus,
                                              lp.down_weight)
        if decoder is not None:
            rec = pair_reconstruction_loss(lambda z: decoder(z, training=True), vectors, labels,
                                           sources, lp.reconstruction_weight, mask)
        else:
            rec = ops.zeros_like(classification)
        return classification, rec, scores

    return losses
