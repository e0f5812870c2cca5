"""Grad-CAM++ (Chattopadhay et al. 2018) of the predicted class's score, the probe's: the
class capsule's length or activation, the logit a learnt readout gives, or a CNN's predicted
logit (the score Grad-CAM++ was defined on).

The closed form is tf-keras-vis 0.8.7's GradcamPlusPlus: with score S (the predicted class
capsule's length), A the layer's feature maps and g = dS/dA,
    first = exp(S) g,  second = exp(S) g^2,  third = exp(S) g^3
    alpha = second / (2 second + third * sum_xy A)       (1 where second == 0 in the denominator)
    alpha /= sum_xy alpha                                 (per channel; left alone if the sum is 0)
    weight_k = sum_xy relu(first) * alpha
    cam = relu(sum_k weight_k A_k)
Deliberate deviation: the normalisation is ours (relu, then min-max per image to [0, 1]; an
all-zero or constant map becomes all zero), because tf-keras-vis's normalisation breaks on the
tiny raw values capsule lengths give.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.errors import ReportgenError
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy, model_description
from reportgen.techniques.compute import check_conv_layer


@dataclass(frozen=True)
class Params:
    # "" = the last plain conv layer before the capsule layers (see default_layer).
    layer: str = ""


def default_layer(model) -> str:
    """The last plain conv layer before the capsules (the only conv layer if there is just one);
    `model`: a CapsNet or its ModelDescription."""
    description = model_description(model)
    plain = description.plain_conv_layers
    return plain[-1].name if plain else description.conv_layer_names[-1]


def variants(description) -> list[Params]:
    """One map per conv layer (the one forming the capsules too), named explicitly."""
    return [Params(layer=name) for name in description.conv_layer_names]


def gradcam_plus_plus(features: np.ndarray, grads: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Raw Grad-CAM++ maps (B, h, w) from feature maps and gradients (B, h, w, F), scores (B,).

    tf-keras-vis's alpha = second / (2 second + third sum_xy A) is computed in its reduced form
    1 / (2 + g sum_xy A) where g != 0 (0 where g == 0): the exp(S) factors and powers of g
    cancel, so nothing underflows in float32 (g^3 of capsule-length gradients would).
    """
    features = np.asarray(features, np.float32)
    grads = np.asarray(grads, np.float32)
    global_sum = features.sum(axis=(1, 2), keepdims=True)               # (B, 1, 1, F)
    denominator = 2.0 + grads * global_sum
    usable = (grads != 0.0) & (denominator != 0.0)
    alphas = np.divide(1.0, denominator, out=np.zeros_like(grads), where=usable)
    norm = alphas.sum(axis=(1, 2), keepdims=True)
    alphas /= norm + (norm == 0.0)
    first = np.exp(np.asarray(scores, np.float32))[:, None, None, None] * np.maximum(grads, 0.0)
    weights = (first * alphas).sum(axis=(1, 2))                          # (B, F)
    return np.maximum(np.einsum("bhwf,bf->bhw", features, weights), 0.0)


def normalize_maps(maps: np.ndarray) -> np.ndarray:
    """relu, then min-max per image to [0, 1]; a constant (e.g. all-zero) map becomes zero."""
    maps = np.maximum(maps, 0.0)
    low = maps.min(axis=(1, 2), keepdims=True)
    span = maps.max(axis=(1, 2), keepdims=True) - low
    safe = np.where(span > 0, span, 1.0)
    return np.where(span > 0, (maps - low) / safe, 0.0)


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"map": (B, h, w)} Grad-CAM++ of the predicted class at the layer's resolution, in [0, 1]."""
    params = params or Params()
    net = batch.net
    layer = params.layer or default_layer(net)
    check_conv_layer(net, "gradcam_pp", layer)
    if f"grad:{layer}" not in batch.tensors:
        raise ReportgenError(
            f"Grad-CAM++ needs the gradients of layer '{layer}', which this probe did not take.",
            fix="Run the probe with gradients=True.")
    predicted = np.asarray(batch["predicted"], np.int64)
    # The score differentiated (the probe's): the class capsule's length or activation, or a
    # CNN's logit.
    scores = np.take_along_axis(np.asarray(batch["scores"]), predicted[:, None], axis=1)[:, 0]
    raw = gradcam_plus_plus(batch[f"conv:{layer}"], batch[f"grad:{layer}"], scores)
    return {"map": normalize_maps(raw).astype(np.float32)}


TECHNIQUE = Technique(
    name="gradcam_pp",
    citations=cite('chattopadhay2018gradcampp'),
    title="Grad-CAM++",
    layer="model",
    scope="input",
    needs=frozenset({"conv:<layer>", "grad:<layer>", "scores", "predicted"}),
    applies_to=frozenset({"conv"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.techniques.gradcam_pp.figures", "render_gradcam_pp"),
    variants=variants,
    description="Where the network looks for the predicted class: Grad-CAM++ (Chattopadhay et "
                "al. 2018) weights a convolutional layer's feature maps by the positive "
                "gradients of the predicted class's score, the model's own (its class capsule's "
                "length or activation, the logit a learnt readout gives, or a CNN's logit: the "
                "caption names it), with the closed form of tf-keras-vis 0.8.7; normalised to "
                "[0, 1] per image. The panel names the layer.",
)
