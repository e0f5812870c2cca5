"""Layer-wise relevance propagation (LRP) for Keras CNNs, batched.

The relevance of one output unit (the pre-softmax logit S_y of the target class) is passed down
layer by layer to the input pixels (Bach et al. 2015; Montavon et al. 2017, "deep Taylor
decomposition"), with the rules Gu, Yang & Tresp (ACCV 2018, section 3) use:
- the first weighted layer (its input is the image, in the domain [l, h]): the z^beta rule
      R_i = sum_j (x_i w_ij - l_i w_ij^+ - h_i w_ij^-) / sum_i' (...) R_j
  (Montavon et al. 2017, eq. for bounded input domains);
- every higher Conv2D / Dense layer: the z+ rule (= LRP-alpha1beta0, Bach et al. 2015)
      R_i = sum_j z_ij^+ / sum_i' z_i'j^+ R_j,   z_ij^+ = max(0, a_i w_ij),
  which for a_i >= 0 (ReLU outputs) is Montavon et al.'s a_i w_ij^+ / sum a_i' w_i'j^+;
  optionally LRP-epsilon R_i = sum_j a_i w_ij / (z_j + eps sign(z_j)) R_j, z_j = sum_i a_i w_ij;
- max pooling: each window's relevance goes to its argmax (winner takes all);
- average pooling (and global average pooling, and a sum over units): a linear layer of
  positive weights, under the same rule as the higher layers (relevance split in proportion
  to the inputs' contributions);
- biases and normalisation layers are bypassed (no relevance is given to a bias; a batch
  normalisation, dropout, activation, flatten or reshape passes the relevance through as is).
Conservation: sum_i R_i = S_y (up to relevance the z+ rule cannot place: a unit whose every
contribution is <= 0 but which receives relevance; LRP-epsilon's eps absorbs some too).

Every rule is one linear map and its transpose, taken with the gradient trick: for a linear
layer z = f(a), R_in = a * f^T(R / z), and f^T(s) is the gradient of f at a with output
gradient s (TensorFlow's tape): one backward pass per layer for the whole batch.

The network is a chain of layers from the image to the logits (a Sequential model, or a path
of a functional one, `layer_chain`). The layer after which everything is linear and
parameter-free (the logits Dense, or a CNN head's class-by-dimension units before their sum)
is its `top`: contrastive LRP (reportgen.techniques.lrp_clrp.contrastive) negates its weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FIRST_RULES = ("zbeta", "zplus", "epsilon")
HIGHER_RULES = ("zplus", "epsilon")
# Step kinds: a layer of weights, a pooling, or a layer passing relevance through.
WEIGHTED = ("conv", "dense")


class LRPUnsupported(ValueError):
    """A layer LRP has no rule for here (its class and name in the message)."""


@dataclass(frozen=True)
class Rules:
    """Which LRP rule on the first weighted layer and on the higher ones, the input domain
    [low, high] of z^beta, and LRP-epsilon's eps."""

    first: str = "zbeta"
    higher: str = "zplus"
    low: float = 0.0
    high: float = 1.0
    epsilon: float = 1e-2

    def __post_init__(self):
        if self.first not in FIRST_RULES:
            raise ValueError(f"first rule must be one of {FIRST_RULES}. Received: {self.first!r}")
        if self.higher not in HIGHER_RULES:
            raise ValueError(f"higher rule must be one of {HIGHER_RULES}. "
                             f"Received: {self.higher!r}")
        if not self.low < self.high:
            raise ValueError(f"the input domain needs low < high. Received: [{self.low}, "
                             f"{self.high}]")


@dataclass(frozen=True)
class Step:
    """One layer of the chain: `kind` (conv, dense, maxpool, avgpool, gap, sum, reshape,
    identity) and the Keras layer."""

    kind: str
    layer: object

    @property
    def name(self) -> str:
        return self.layer.name


def _activation_name(layer) -> str:
    activation = getattr(layer, "activation", None)
    return "linear" if activation is None else getattr(activation, "__name__", str(activation))


def _kind(layer) -> str:
    """The step kind of a Keras layer; LRPUnsupported for one without a rule here."""
    from keras import layers

    if isinstance(layer, layers.Conv2D) and not isinstance(layer, layers.Conv2DTranspose):
        if layer.data_format != "channels_last" or getattr(layer, "groups", 1) != 1:
            raise LRPUnsupported(f"LRP here takes channels-last, ungrouped Conv2D only; layer "
                                 f"'{layer.name}' is not")
        kind = "conv"
    elif isinstance(layer, layers.Dense):
        kind = "dense"
    elif isinstance(layer, layers.MaxPooling2D):
        kind = "maxpool"
    elif isinstance(layer, layers.AveragePooling2D):
        kind = "avgpool"
    elif isinstance(layer, layers.GlobalAveragePooling2D):
        kind = "gap"
    elif isinstance(layer, (layers.Flatten, layers.Reshape)):
        kind = "reshape"
    elif isinstance(layer, (layers.Dropout, layers.BatchNormalization, layers.ReLU,
                            layers.Rescaling)):
        kind = "identity"
    elif isinstance(layer, layers.Activation):
        kind = "identity"
    elif type(layer).__name__ == "ClassSum":
        # the CNN baselines' sum of each class's units (reportgen.families.cnn.layers), named
        # by its class so that the techniques import no family
        kind = "sum"
    else:
        raise LRPUnsupported(f"LRP has no rule for layer '{layer.name}' "
                             f"({type(layer).__name__})")
    if kind in ("conv", "dense", "identity") and \
            _activation_name(layer) not in ("linear", "relu", "softmax"):
        raise LRPUnsupported(f"LRP here takes ReLU or linear activations; layer '{layer.name}' "
                             f"has {_activation_name(layer)}")
    return kind


def layer_chain(model, output: str | None = None) -> tuple[Step, ...]:
    """The steps from the model's input to `output` (a layer name; None = the model's only
    output), in order; a trailing softmax is dropped (the logit before it is explained).
    LRPUnsupported when the path branches or holds a layer without a rule."""
    from keras import layers

    tensor = model.get_layer(output).output if output else model.outputs[0]
    found = []
    while True:
        operation, node_index, _ = tensor._keras_history
        if isinstance(operation, layers.InputLayer):
            break
        inputs = operation._inbound_nodes[node_index].input_tensors
        if len(inputs) != 1:
            raise LRPUnsupported(f"LRP here follows a chain of layers; layer "
                                 f"'{operation.name}' has {len(inputs)} inputs")
        found.append(operation)
        tensor = inputs[0]
    found.reverse()
    while found and (isinstance(found[-1], layers.Softmax) or (
            isinstance(found[-1], layers.Activation) and _activation_name(found[-1]) == "softmax")):
        found.pop()
    steps = tuple(Step(_kind(layer), layer) for layer in found)
    if not any(step.kind in WEIGHTED for step in steps):
        raise LRPUnsupported("LRP needs at least one Conv2D or Dense layer")
    for step in steps[:-1]:
        if step.kind == "identity" and _activation_name(step.layer) == "softmax":
            raise LRPUnsupported(f"a softmax inside the network (layer '{step.name}')")
    return steps


def top_index(steps) -> int:
    """The last weighted step: the layer whose class weights contrastive LRP changes."""
    return max(i for i, step in enumerate(steps) if step.kind in WEIGHTED)


def first_index(steps) -> int:
    return min(i for i, step in enumerate(steps) if step.kind in WEIGHTED)


# --- the forward pass ---------------------------------------------------------------------------

def _weights(step: Step, dtype, negate: bool = False):
    import tensorflow as tf

    kernel = tf.cast(step.layer.kernel, dtype)
    bias = tf.cast(step.layer.bias, dtype) if step.layer.use_bias else None
    if negate:
        kernel = -kernel
        bias = None if bias is None else -bias
    return kernel, bias


def _linear(step: Step, a, kernel):
    """The weighted layer's map without bias and activation: conv or matmul."""
    import tensorflow as tf

    if step.kind == "dense":
        return tf.tensordot(a, kernel, axes=[[a.shape.rank - 1], [0]])
    layer = step.layer
    return tf.nn.conv2d(a, kernel, strides=(1, *layer.strides, 1),
                        padding=layer.padding.upper(), dilations=(1, *layer.dilation_rate, 1))


def _pool(step: Step, a):
    """The pooling or summing step's (linear, for avgpool/gap/sum) map."""
    import tensorflow as tf

    layer = step.layer
    if step.kind == "gap":
        return tf.reduce_mean(a, axis=(1, 2))
    if step.kind == "sum":
        return tf.reduce_sum(a, axis=-1)
    pool = tf.nn.max_pool2d if step.kind == "maxpool" else tf.nn.avg_pool2d
    return pool(a, ksize=tuple(layer.pool_size), strides=tuple(layer.strides),
                padding=layer.padding.upper())


def _forward_step(step: Step, a, dtype, negate: bool = False):
    import tensorflow as tf

    layer = step.layer
    if step.kind in WEIGHTED:
        kernel, bias = _weights(step, dtype, negate)
        z = _linear(step, a, kernel)
        if bias is not None:
            z = z + bias
        return tf.nn.relu(z) if _activation_name(layer) == "relu" else z
    if step.kind in ("maxpool", "avgpool", "gap", "sum"):
        return _pool(step, a)
    if step.kind == "reshape":
        return tf.reshape(a, (-1, *layer.output.shape[1:]))
    from keras import layers

    if isinstance(layer, layers.BatchNormalization):
        mean = tf.cast(layer.moving_mean, dtype)
        scale = tf.math.rsqrt(tf.cast(layer.moving_variance, dtype) + layer.epsilon)
        if layer.scale:
            scale = scale * tf.cast(layer.gamma, dtype)
        out = (a - mean) * scale
        return out + tf.cast(layer.beta, dtype) if layer.center else out
    if isinstance(layer, layers.Rescaling):
        return a * tf.cast(layer.scale, dtype) + tf.cast(layer.offset, dtype)
    if isinstance(layer, layers.ReLU) or _activation_name(layer) == "relu":
        return tf.nn.relu(a)
    return a          # dropout at inference, a linear activation


def forward(steps, images, dtype="float32", negate_top: bool = False) -> list:
    """Every step's input, then the logits: [a_0 = images, a_1, ..., logits] (tf tensors).
    `negate_top`: the top layer's weights and bias negated (CLRP2's dual network)."""
    import tensorflow as tf

    top = top_index(steps)
    a = tf.cast(tf.convert_to_tensor(images), dtype)
    activations = [a]
    for i, step in enumerate(steps):
        a = _forward_step(step, a, dtype, negate=negate_top and i == top)
        activations.append(a)
    return activations


# --- the rules ----------------------------------------------------------------------------------

def _transpose(function, a, s):
    """f^T(s) for a linear f at a: the gradient of f with output gradient s."""
    import tensorflow as tf

    with tf.GradientTape() as tape:
        tape.watch(a)
        z = function(a)
    return tape.gradient(z, a, output_gradients=s)


def _stabilised(z, epsilon: float):
    """z + eps sign(z), sign(0) = +1 (LRP-epsilon's denominator)."""
    import tensorflow as tf

    return z + epsilon * tf.where(z >= 0, tf.ones_like(z), -tf.ones_like(z))


def _epsilon_relevance(function, a, relevance, epsilon: float):
    """R_in of a linear map `function` (no bias) of the input a by LRP-epsilon."""
    s = relevance / _stabilised(function(a), epsilon)
    return a * _transpose(function, a, s)


def _weighted_relevance(step: Step, a, relevance, rule: str, rules: Rules, dtype,
                        negate: bool = False):
    import tensorflow as tf

    kernel, _ = _weights(step, dtype, negate)
    linear = lambda w: (lambda v: _linear(step, v, w))              # noqa: E731
    positive, negative = tf.nn.relu(kernel), -tf.nn.relu(-kernel)
    if rule == "epsilon":
        return _epsilon_relevance(linear(kernel), a, relevance, rules.epsilon)
    if rule == "zbeta":
        low = tf.fill(tf.shape(a), tf.cast(rules.low, dtype))
        high = tf.fill(tf.shape(a), tf.cast(rules.high, dtype))
        z = linear(kernel)(a) - linear(positive)(low) - linear(negative)(high)
        s = tf.math.divide_no_nan(relevance, z)
        return (a * _transpose(linear(kernel), a, s) - low * _transpose(linear(positive), low, s)
                - high * _transpose(linear(negative), high, s))
    # z+: z_ij^+ = max(0, a_i w_ij) = a_i^+ w_ij^+ + a_i^- w_ij^-
    a_pos, a_neg = tf.nn.relu(a), -tf.nn.relu(-a)
    z = linear(positive)(a_pos) + linear(negative)(a_neg)
    s = tf.math.divide_no_nan(relevance, z)
    return (a_pos * _transpose(linear(positive), a_pos, s)
            + a_neg * _transpose(linear(negative), a_neg, s))


def _pooled_relevance(step: Step, a, relevance, rule: str, rules: Rules):
    import tensorflow as tf

    function = lambda v: _pool(step, v)                              # noqa: E731
    if step.kind == "maxpool":          # winner takes all: the gradient routes to the argmax
        return _transpose(function, a, relevance)
    if rule == "epsilon":
        return _epsilon_relevance(function, a, relevance, rules.epsilon)
    a_pos = tf.nn.relu(a)               # positive weights: only positive inputs contribute
    s = tf.math.divide_no_nan(relevance, function(a_pos))
    return a_pos * _transpose(function, a_pos, s)


def propagate(steps, activations, seed, rules: Rules = Rules(), negate_top: bool = False):
    """The input relevance (B, H, W, C) of `seed` (B, classes): relevance put on the logits,
    passed down through `steps` given the forward pass `activations` (`forward`)."""
    import tensorflow as tf

    dtype = activations[0].dtype
    relevance = tf.convert_to_tensor(np.asarray(seed), dtype)
    first, top = first_index(steps), top_index(steps)
    for i in range(len(steps) - 1, -1, -1):
        step, a = steps[i], activations[i]
        rule = rules.first if i == first else rules.higher
        if step.kind in WEIGHTED:
            relevance = _weighted_relevance(step, a, relevance, rule, rules, dtype,
                                            negate=negate_top and i == top)
        elif step.kind in ("maxpool", "avgpool", "gap", "sum"):
            relevance = _pooled_relevance(step, a, relevance,
                                          "zplus" if rule == "zbeta" else rule, rules)
        elif step.kind == "reshape":
            relevance = tf.reshape(relevance, tf.shape(a))
    return relevance


def logits(steps, images, dtype="float32") -> np.ndarray:
    """(B, classes) the pre-softmax scores of the chain."""
    return forward(steps, images, dtype)[-1].numpy()


def lrp(steps, images, targets, rules: Rules = Rules(), dtype="float32") -> np.ndarray:
    """(B, H, W, C) LRP of each image's target class (B,): seed S_y on the target's logit."""
    activations = forward(steps, images, dtype)
    scores = activations[-1].numpy()
    targets = np.asarray(targets, np.int64)
    seed = np.zeros_like(scores)
    seed[np.arange(len(targets)), targets] = scores[np.arange(len(targets)), targets]
    return propagate(steps, activations, seed, rules).numpy()


def input_gradient(steps, images, targets, dtype="float32") -> np.ndarray:
    """(B, H, W, C) the gradient of each image's target logit w.r.t. its pixels (the vanilla
    gradient of Simonyan, Vedaldi & Zisserman 2014)."""
    import tensorflow as tf

    x = tf.convert_to_tensor(np.asarray(images), dtype)
    targets = np.asarray(targets, np.int64)
    with tf.GradientTape() as tape:
        tape.watch(x)
        scores = forward(steps, x, dtype)[-1]
        chosen = tf.gather(scores, targets, axis=1, batch_dims=1)
    return tape.gradient(chosen, x).numpy()
