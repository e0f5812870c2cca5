"""Draw panel: the reader draws a digit (or drops an image) on the model page and the whole
network answers in the browser, offline — class scores, the prediction beside chance, the
routing weights into the class capsules and the reconstruction, redrawn as the reader draws.

One runtime for every family, plug-ins included: the Keras model is exported to ONNX
(reportgen/techniques/draw_panel/export.py, tf2onnx) and run by onnxruntime-web's WebAssembly
backend (reportgen/techniques/draw_panel/runtime.py), so a new family needs no JavaScript of its
own. onnxruntime-web was chosen over TensorFlow.js because it runs the exported graph of any
family as it is (TensorFlow.js's converter has no kernels for several of the ops custom routing
layers use and would need a TF.js twin per layer), in float32, equal to Keras within 1e-4 on
every family's example (the export's tests); its WebAssembly binary is 3.8 MB gzipped.

Checkpoint scope: compute exports the network at the step with batch size 1 and runs a few
seeded check images through Keras, so the page can show how far its own outputs are from
Keras's on the same inputs. Only at the last step built: the whole network travels with the step
(Sabour et al. 2017's CapsNet is 33 MB of float32 weights, MNIST_Demo's 8.5 MB), loaded only
when the reader opens the panel, and one export per model keeps the build's time (tf2onnx
takes up to 20 s for unrolled EM routing on 2 cores).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy

CHECK_IMAGES = 3        # seeded images run by Keras and by the page (the last one blank)


@dataclass(frozen=True)
class Params:
    """No options: the network is exported as it is, in float32."""


def variants(description) -> list[Params]:
    return [Params()]


def check_images(shape, count: int = CHECK_IMAGES, seed: int = 0) -> np.ndarray:
    """(count, *shape) float32: uniform noise in [0, 1], and a blank image last."""
    images = np.random.default_rng(seed).random((count, *shape), dtype=np.float32)
    images[-1] = 0.0
    return images


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"onnx": (bytes,) uint8 the ONNX model, "check_inputs": (N, H, W, C), "check_<name>":
    Keras's value of each exported output on them (export.exported_outputs)}."""
    from reportgen.techniques.draw_panel.export import exported_outputs, keras_value, onnx_bytes

    net = batch.net
    images = check_images(tuple(net.model.input_shape[1:]))
    outputs = net.model(images, training=False)
    result = {"onnx": np.frombuffer(onnx_bytes(net, batch=1), np.uint8).copy(),
              "check_inputs": images}
    for name, source in exported_outputs(net.description).items():
        result[f"check_{name}"] = keras_value(outputs, name, source)
    return result


TECHNIQUE = Technique(
    name="draw_panel",
    citations=cite("sabour2017dynamic", "lecun1998gradient"),
    title="Draw a digit",
    layer="model",
    scope="checkpoint",
    needs=frozenset(),
    applies_to=frozenset(),
    params_type=Params,
    version=2,
    compute=compute,
    render=lazy("reportgen.techniques.draw_panel.figures", "render_draw_panel"),
    numbers=lazy("reportgen.techniques.draw_panel.figures", "draw_manifest"),
    variants=variants,
    last_step_only=True,
    description="Draw a digit with the mouse, a finger or the keyboard, or drop an image file: "
                "the whole network runs in your browser (onnxruntime-web, WebAssembly, no "
                "server and no network request) and shows the class scores with the "
                "prediction beside chance, the routing weights into the predicted class's "
                "capsule per primary capsule type, and the reconstruction where the model has a "
                "decoder; the drawing also appears in the model's pose-space chart. The "
                "drawing is centred as MNIST's digits were (LeCun et al. 1998: bounding box "
                "scaled to 20x20, centre of mass at the centre of 28x28), and the network's "
                "input is shown.",
)
