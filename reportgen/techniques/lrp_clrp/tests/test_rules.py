"""The batched LRP rules against a plain-NumPy re-implementation of the papers' equations
(numpy_lrp.py, unit by unit), and conservation sum_i R_i = S_y, on tiny random CNNs."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.techniques.lrp_clrp import rules

from . import numpy_lrp


def tiny_cnn(pool: str = "max", seed: int = 0, bias: float = 0.1, hidden: int = 5,
             filters: int = 3):
    """6x6x1 -> conv 3x3 x `filters` (ReLU) -> 2x2 pool -> flatten -> dense `hidden` (ReLU) -> dense 3
    (softmax), random weights and biases."""
    import keras

    keras.utils.set_random_seed(seed)
    pooling = keras.layers.MaxPooling2D(2) if pool == "max" else keras.layers.AveragePooling2D(2)
    init = keras.initializers.RandomUniform(-bias, bias)
    model = keras.Sequential([
        keras.Input((6, 6, 1)),
        keras.layers.Conv2D(filters, 3, activation="relu", bias_initializer=init),
        pooling,
        keras.layers.Flatten(),
        keras.layers.Dense(hidden, activation="relu", bias_initializer=init),
        keras.layers.Dense(3, activation="softmax", bias_initializer=init),
    ])
    return model


def as_numpy_layers(model):
    import keras

    out = []
    for layer in model.layers:
        if isinstance(layer, keras.layers.Conv2D):
            out.append({"kind": "conv", "kernel": np.asarray(layer.kernel, np.float64),
                        "bias": np.asarray(layer.bias, np.float64), "stride": layer.strides[0],
                        "relu": layer.activation.__name__ == "relu"})
        elif isinstance(layer, keras.layers.Dense):
            out.append({"kind": "dense", "kernel": np.asarray(layer.kernel, np.float64),
                        "bias": np.asarray(layer.bias, np.float64),
                        "relu": layer.activation.__name__ == "relu"})
        elif isinstance(layer, keras.layers.Flatten):
            out.append({"kind": "flatten"})
        else:
            out.append({"kind": "maxpool" if isinstance(layer, keras.layers.MaxPooling2D)
                        else "avgpool", "size": layer.pool_size[0]})
    return out


def images(n=4, seed=1):
    return np.random.default_rng(seed).uniform(0.05, 1.0, (n, 6, 6, 1))


def test_chain_drops_softmax_and_logits_match_the_model():
    model = tiny_cnn()
    steps = rules.layer_chain(model)
    assert [s.kind for s in steps] == ["conv", "maxpool", "reshape", "dense", "dense"]
    x = images()
    probabilities = np.asarray(model(x.astype(np.float32)))
    scores = rules.logits(steps, x, "float64")
    softmax = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(softmax, probabilities, atol=1e-6)


@pytest.mark.parametrize("pool", ["max", "avg"])
def test_conservation_on_positive_inputs(pool):
    """sum_i R_i = S_y whenever every unit given relevance has a positive contribution (what
    the z+ rule splits). Biases are bypassed, so a unit made by its bias alone (every input
    dead) holds relevance LRP cannot place: the net here has none, and the check below makes
    sure no target logit is made of negative contributions only."""
    steps = rules.layer_chain(tiny_cnn(pool, hidden=32, bias=0.0, filters=8))
    x = images(8)
    activations = rules.forward(steps, x, "float64")
    scores = activations[-1].numpy()
    targets = np.argmax(scores, axis=1)
    kernel = np.asarray(steps[-1].layer.kernel, np.float64)
    contributions = activations[-2].numpy() * kernel[:, targets].T
    assert (contributions.max(axis=1) > 0).all()
    relevance = rules.lrp(steps, x, targets, dtype="float64")
    total = relevance.reshape(8, -1).sum(axis=1)
    chosen = scores[np.arange(8), targets]
    np.testing.assert_allclose(total, chosen, rtol=1e-9, atol=1e-12)
    # float32, as the technique runs it: conserved to float32 rounding
    relevance32 = rules.lrp(steps, x, targets)
    np.testing.assert_allclose(relevance32.reshape(8, -1).sum(axis=1), chosen, rtol=1e-4,
                               atol=1e-6)


@pytest.mark.parametrize("pool", ["max", "avg"])
@pytest.mark.parametrize("first,higher", [("zbeta", "zplus"), ("zplus", "zplus"),
                                          ("epsilon", "epsilon"), ("zbeta", "epsilon")])
def test_rules_match_the_numpy_equations(pool, first, higher):
    model = tiny_cnn(pool, seed=3)
    steps = rules.layer_chain(model)
    layers = as_numpy_layers(model)
    x = images(3, seed=5)
    # a domain wider than the data, so that z^beta's l and h terms both matter
    chosen = rules.Rules(first=first, higher=higher, low=-0.5, high=1.5, epsilon=0.05)
    targets = np.array([0, 1, 2])
    got = rules.lrp(steps, x, targets, chosen, dtype="float64")
    want = np.stack([numpy_lrp.lrp_one(layers, xi, t, first, higher, -0.5, 1.5, 0.05)[0]
                     for xi, t in zip(x, targets)])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_batch_equals_image_by_image():
    steps = rules.layer_chain(tiny_cnn())
    x = images(5)
    targets = np.array([2, 0, 1, 1, 0])
    batch = rules.lrp(steps, x, targets, dtype="float64")
    one = np.concatenate([rules.lrp(steps, x[i:i + 1], targets[i:i + 1], dtype="float64")
                          for i in range(5)])
    np.testing.assert_allclose(batch, one, rtol=1e-12, atol=1e-14)


def test_unsupported_layer_is_named():
    import keras

    model = keras.Sequential([keras.Input((4, 4, 1)), keras.layers.Conv2D(2, 3),
                              keras.layers.LayerNormalization(name="norm"),
                              keras.layers.Flatten(), keras.layers.Dense(2)])
    with pytest.raises(rules.LRPUnsupported, match="'norm'"):
        rules.layer_chain(model)
    sigmoid = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="tanh",
                                                                      name="squashing")])
    with pytest.raises(rules.LRPUnsupported, match="tanh"):
        rules.layer_chain(sigmoid)


def test_input_gradient_is_the_logit_gradient():
    """The vanilla gradient of a dense layer's logit is its weight column."""
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2, 2, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(3)])
    steps = rules.layer_chain(model)
    x = images(2)[:, :2, :2]
    grad = rules.input_gradient(steps, x, np.array([1, 2]), "float64")
    kernel = np.asarray(model.layers[-1].kernel, np.float64)
    np.testing.assert_allclose(grad.reshape(2, 4), kernel[:, [1, 2]].T, rtol=1e-6)
