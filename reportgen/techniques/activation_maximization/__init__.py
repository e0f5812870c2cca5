"""Activation maximization (experimental; Erhan et al. 2009): inputs maximising a class capsule.

From an all-black input, gradient ascent on one class capsule's length, no regulariser, the input
clipped to [0, 1] after every step; all classes are optimised together as one batch (an image
never influences another: routing is per example). The update is Adam (Kingma & Ba) with the
given learning rate: plain gradient steps barely move on the tiny gradients of capsule lengths,
and tf-keras-vis's ActivationMaximization likewise uses an adaptive optimiser. The result shows
capsules are fooled by high-frequency images; the model's lengths for each image are reported.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import check_positive

_BETA1, _BETA2, _EPSILON = 0.9, 0.999, 1e-7


@dataclass(frozen=True)
class Params:
    steps: int = 200
    learning_rate: float = 0.05

    def __post_init__(self):
        check_positive("activation_maximization", "steps", self.steps, int)
        check_positive("activation_maximization", "learning_rate", self.learning_rate, float)


def variants(description) -> list[Params]:
    return [Params()]


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"images": (K, H, W, C) one synthesized input per class, "lengths": (K, K) its lengths}.

    Scope checkpoint: `batch` only supplies the network; no batch axis in the result.
    """
    import tensorflow as tf

    from reportgen.capsnet.ops import safe_norm

    params = params or Params()
    net = batch.net
    classes = net.description.classes
    shape = (classes,) + tuple(net.description.input_shape)
    selector = tf.constant(np.eye(classes, dtype=np.float32))
    learning_rate = float(params.learning_rate)

    def class_lengths(x):
        # the class capsules' lengths: the model's own output where its scores are lengths,
        # else (a learnt readout of vector capsules) the norm of the class poses it returns
        outputs = net.model(x, training=False)
        if "lengths" in outputs:
            return outputs["lengths"]
        return safe_norm(outputs["class_capsules"], axis=-1)     # gradient 0, not NaN, at 0

    def target_lengths(x):
        return tf.reduce_sum(class_lengths(x) * selector, axis=1)

    @tf.function(reduce_retracing=True)
    def ascend(x, m, v, t):
        with tf.GradientTape() as tape:
            tape.watch(x)
            objective = tf.reduce_sum(target_lengths(x))
        grad = tape.gradient(objective, x)
        m = _BETA1 * m + (1.0 - _BETA1) * grad
        v = _BETA2 * v + (1.0 - _BETA2) * tf.square(grad)
        m_hat = m / (1.0 - tf.pow(_BETA1, t))
        v_hat = v / (1.0 - tf.pow(_BETA2, t))
        x = tf.clip_by_value(x + learning_rate * m_hat / (tf.sqrt(v_hat) + _EPSILON), 0.0, 1.0)
        return x, m, v

    x = tf.zeros(shape, tf.float32)
    m = tf.zeros(shape, tf.float32)
    v = tf.zeros(shape, tf.float32)
    for step in range(1, int(params.steps) + 1):
        x, m, v = ascend(x, m, v, tf.constant(float(step)))
    lengths = class_lengths(x)
    return {"images": np.asarray(x, np.float32), "lengths": np.asarray(lengths, np.float32)}


TECHNIQUE = Technique(
    name="activation_maximization",
    citations=cite('erhan2009visualizing'),
    title="Activation maximization",
    layer="model",
    scope="checkpoint",
    needs=frozenset(),
    applies_to=frozenset({"class_capsules", "vector_capsules"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.techniques.activation_maximization.figures",
                "render_activation_maximization"),
    variants=variants,
    experimental=True,
    description="For each class, the input synthesized by gradient ascent on that class "
                "capsule's length from an all-black image, with no regulariser, and the model's "
                "capsule lengths for it. Capsule networks are fooled by such high-frequency "
                "images: a long capsule need not mean a recognisable digit.",
)
