"""Live decoder (decoder_length and decoder_perturbation made interactive): the decoder's weights at one training
step, exported for the Decoder page, where a plain JavaScript dense forward pass redraws the
reconstruction while the user moves the 16 pose sliders and the length slider.

Checkpoint scope: the weights depend on the step only. compute reads every Dense layer of the
model's decoder (kernel, bias, activation) and also decodes a few seeded capsule vectors with the
real (Keras) decoder, so the figure step can say how far the quantised export is from it.
render writes the JSON manifest and the script that carries the quantised weights to the page
(reportgen/techniques/live_decoder/figures.py documents the format).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.errors import ReportgenError
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import decode, masked_inputs

CHECK_VECTORS = 16      # capsule vectors decoded by Keras to measure the quantised export


@dataclass(frozen=True)
class Params:
    """No options: the export's precision is chosen by its measured error
    (see reportgen/techniques/live_decoder/figures.py)."""


def variants(description) -> list[Params]:
    return [Params()]


def dense_layers(net) -> list:
    """The decoder's Dense layers in order (the Reshape at its end has no weights)."""
    import keras

    if net.decoder is None:
        raise ReportgenError("This model has no decoder.",
                             fix="The live decoder applies only to models with a decoder.")
    return [layer for layer in net.decoder.layers if isinstance(layer, keras.layers.Dense)]


def check_vectors(classes: int, dims: int, count: int = CHECK_VECTORS, seed: int = 0):
    """Seeded capsule vectors (count, dims) of lengths 0.2 ... 1.0 and their classes (count,)."""
    rng = np.random.default_rng(seed)
    directions = rng.normal(size=(count, dims))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    lengths = np.linspace(0.2, 1.0, count)
    return (directions * lengths[:, None]).astype(np.float32), np.arange(count) % classes


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"kernel<i>": (inputs, units), "bias<i>": (units,), "activations": (L,) codes of
    reportgen.techniques.live_decoder.figures.ACTIVATIONS, "output_shape": (3,), "capsule_shape":
    (classes, dims), "check_inputs": (N, classes*dims), "check_outputs": (N, H, W, C)}."""
    from reportgen.techniques.live_decoder.figures import ACTIVATIONS

    net = batch.net
    layers = dense_layers(net)
    result: dict[str, np.ndarray] = {}
    codes = []
    for index, layer in enumerate(layers):
        name = getattr(layer.activation, "__name__", str(layer.activation))
        if name not in ACTIVATIONS:
            raise ReportgenError(f"The decoder layer '{layer.name}' uses activation '{name}'.",
                                 expected=f"one of {', '.join(ACTIVATIONS)}",
                                 fix="The live decoder's JavaScript implements only these.")
        codes.append(ACTIVATIONS.index(name))
        result[f"kernel{index}"] = np.array(layer.kernel.numpy(), np.float32)
        result[f"bias{index}"] = (np.array(layer.bias.numpy(), np.float32) if layer.use_bias
                                  else np.zeros(layer.units, np.float32))
    classes, dims = net.description.classes, net.description.class_capsules.pose_size
    vectors, targets = check_vectors(classes, dims)
    inputs = masked_inputs(vectors, targets, classes)
    result.update(activations=np.array(codes, np.int64),
                  output_shape=np.array(net.decoder.output_shape[1:], np.int64),
                  capsule_shape=np.array([classes, dims], np.int64),
                  check_inputs=inputs, check_outputs=decode(net, inputs))
    return result


TECHNIQUE = Technique(
    name="live_decoder",
    citations=cite('sabour2017dynamic'),
    title="Live decoder",
    layer="decoder",
    scope="checkpoint",
    needs=frozenset(),
    applies_to=frozenset({"decoder", "class_capsules", "vector_capsules"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.techniques.live_decoder.figures", "render_live_decoder"),
    numbers=lazy("reportgen.techniques.live_decoder.figures", "live_manifest"),
    data=lazy("reportgen.techniques.live_decoder.figures", "live_weights"),
    variants=variants,
    # 1.4 MB of weights per step for MNIST-sized decoders: shipped where the dataset analyses
    # ran (their capsule semantics also give the sliders' σ ranges), not at every step
    analysed_steps_only=True,
    description="The decoder running in your browser: 16 sliders start at the pose values of "
                "the chosen class capsule (the predicted one unless you pick another) and a "
                "length slider rescales it; a plain JavaScript forward pass through the "
                "decoder's weights (quantised, one scale per row) redraws the reconstruction as they "
                "move, beside the image Python computed from the real capsule.",
)
