"""The whole inference network as one ONNX file (ONNX opset 15+, tf2onnx) for the draw panel,
which runs it in the page with onnxruntime-web. No TensorFlow at import.

The file maps "image" (B, H, W, C) float32 in [0, 1] to the network contract's tensors
(reportgen/contract.py), under names the page reads whatever the family:
- "scores" (B, classes): what the model predicts by, the probe's "lengths" (class-capsule
  lengths or activations; the class probabilities of a learnt readout or a CNN);
- "routing" (B, children, classes): the routing weights into the class capsules, where the
  layer before them routes (coupling coefficients c_ij of Sabour et al. 2017 eq. 3, EM
  assignments R_ij, ...), children in that layer's capsule order (row-major, types fastest);
- "reconstruction" (B, H, W, C): the decoder's image of the predicted class's capsule (the
  model's own masking by the longest capsule), where the model has a decoder;
- "poses" (B, classes * pose values): the class capsules' poses laid end to end per image
  (pose vectors, or EM's 4x4 pose matrices flattened row-major, Hinton et al. 2018), exactly
  the point reportgen.techniques.pose_space analyses (numbers.flat_poses), where the class
  capsules have a pose. It is the last step of the network already computed, so it adds one
  Reshape node and no weights; the page projects it on the pose-space chart's axes. A class
  layer without a pose (Self-Routing's, Hahn et al. 2019) is analysed there on its scores,
  which "scores" already is.

Keras's TensorFlow argmax guards against flush-to-zero with a sign-bit test (Bitcast,
BitwiseAnd), which ONNX cannot express; while tracing for export, argmax is plain tf.argmax
(ONNX ArgMax). The two differ only on a tie between 0.0 and -0.0.

tf2onnx's Einsum optimiser (rewriting each Einsum as MatMuls by timing candidate decompositions
in onnxruntime) is left out: on unrolled EM or IDPA routing it was 95% of a 12-minute
conversion, and onnxruntime, onnxruntime-web included, runs Einsum as it is.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import warnings

from reportgen.contract import score_output
from reportgen.techniques.draw_panel.canonical import canonical_onnx

OPSET = 17            # onnxruntime-web 1.31 runs opsets 7 ... 21; tf2onnx 1.17 writes up to 18
NAMES = ("scores", "routing", "reconstruction", "poses")
FLAT = frozenset({"poses"})   # outputs flattened per image (B, -1), as pose_space flattens them


def prediction_output(description) -> str:
    """The model output the probe's "lengths" (what the site calls the class scores) is."""
    return "probabilities" if description.head.readout == "learnt" else \
        score_output(description)


def routed_into_classes(description):
    """The capsule layer whose routing weights lead into the class capsules, or None (a CNN, or
    class capsules reached without routing weights, e.g. GraCapsNet's attention)."""
    classes = description.class_capsules
    if classes is None:
        return None
    layers = description.capsule_layers
    for child, parent in zip(layers, layers[1:]):
        if parent is classes and child in description.routed_layers:
            return child
    return None


def exported_outputs(description) -> dict[str, str]:
    """{ONNX output name: the model output it is} for a network of `description`."""
    out = {"scores": prediction_output(description)}
    routed = routed_into_classes(description)
    if routed is not None:
        out["routing"] = routed.routing.output_of(routed.name)
    if description.decoder is not None:
        out["reconstruction"] = "reconstruction"
    if has_class_poses(description):
        out["poses"] = "class_capsules"
    return out


def has_class_poses(description) -> bool:
    """Whether the class capsules have a pose (the model output "class_capsules")."""
    return description.class_vectors == "class_capsules"


def keras_value(outputs, name: str, source: str):
    """Keras's value of the exported output `name` (model output `source`), shaped as the
    export gives it: `FLAT` outputs flattened per image, row-major."""
    import numpy as np

    value = np.asarray(outputs[source], np.float32)
    return value.reshape(len(value), -1) if name in FLAT else value


@contextlib.contextmanager
def _plain_argmax():
    """Keras's TF argmax as tf.argmax while tracing (see the module's docstring)."""
    import tensorflow as tf
    from keras.src.backend.tensorflow import numpy as tf_numpy

    keras_argmax = tf_numpy.argmax

    def argmax(x, axis=None, keepdims=False):
        if keepdims or axis is None:
            return keras_argmax(x, axis=axis, keepdims=keepdims)
        return tf.argmax(x, axis=axis, output_type="int32")

    tf_numpy.argmax = argmax
    try:
        yield
    finally:
        tf_numpy.argmax = keras_argmax


@contextlib.contextmanager
def _without_einsum_rewrite():
    """tf2onnx's optimiser sequence without the Einsum optimiser (see the module's docstring),
    and its counter of generated names started afresh, so the same network gives the same bytes
    (the artifact store and the site compare files by content)."""
    from tf2onnx import optimizer, utils

    utils.INTERNAL_NAME = 1

    every = optimizer._optimizers
    optimizer._optimizers = type(every)((name, factory) for name, factory in every.items()
                                        if name != "einsum_optimizer")
    try:
        yield
    finally:
        optimizer._optimizers = every


def onnx_bytes(net, batch: int | None = 1) -> bytes:
    """The serialised ONNX model of `net` (a reportgen Network) with `exported_outputs`;
    `batch` fixes the batch size (None: any)."""
    import numpy as np
    import tensorflow as tf
    from keras.src.export.tf2onnx_lib import patch_tf2onnx
    from keras.src.utils.module_utils import tf2onnx

    wanted = exported_outputs(net.description)
    shape = (batch, *net.model.input_shape[1:])

    @tf.function(input_signature=[tf.TensorSpec(shape, tf.float32, name="image")])
    def forward(image):
        outputs = net.model(image, training=False)
        out = {}
        for name, source in wanted.items():
            value = outputs[source]
            if name in FLAT:     # row-major per image, as numpy's reshape (flat_poses)
                value = tf.reshape(value, [-1, int(np.prod(value.shape[1:]))])
            out[name] = tf.identity(value, name=name)
        return out

    with warnings.catch_warnings():
        # Keras's fix of tf2onnx 1.17 for NumPy 2 probes np.object, which NumPy warns about
        warnings.simplefilter("ignore", FutureWarning)
        patch_tf2onnx()
    with _plain_argmax(), _without_einsum_rewrite(), tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        tf2onnx.convert.from_function(forward, forward.input_signature, opset=OPSET,
                                      output_path=path)
        with open(path, "rb") as f:
            return canonical_onnx(f.read())
