"""The cascade re-initialises exactly the intended layers on a copy (the trained network is left
as it was), and on a linear model, whose input gradient is its weight vector, randomising its
only layer gives the similarity of the two weight vectors."""

from __future__ import annotations

import numpy as np
from scipy import stats

from reportgen.techniques.explanation_randomisation.cascade import (Cascade, cascade_maps,
                                                                    randomised_copy, values_of,
                                                                    weighted_layers)
from reportgen.techniques.explanation_randomisation.similarity import (similarities, ssim,
                                                                      unit_abs)


def _same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def test_the_cascade_randomises_the_top_layers_of_a_copy_only(make_net):
    net = make_net(seed=3)
    before = [np.array(w.numpy(), copy=True) for w in net.model.weights]
    copy = randomised_copy(net, seed=0)
    cascade = copy.cascade
    assert cascade.names == ("class_caps", "primary_conv", "conv1")   # output side first
    trained = values_of(weighted_layers(net.encoder))
    for layer, random, kept in zip(cascade.layers, cascade.random, trained):
        assert not np.allclose(random[0], kept[0]), f"{layer.name}: random = trained"
    for depth in range(len(cascade.layers) + 1):
        cascade.at(depth)
        now = values_of(cascade.layers)
        for i, layer in enumerate(cascade.layers):
            assert _same(now[i], cascade.random[i] if i < depth else trained[i]), \
                (depth, layer.name)
        # the copy computes with what its variables hold: its encoder equals a network given
        # the same mixed weights by hand
    cascade.at(0)
    assert _same([w.numpy() for w in copy.net.model.weights], before)
    assert _same([w.numpy() for w in net.model.weights], before)   # the network untouched
    assert copy.net.model is not net.model


def test_the_copy_computes_with_the_randomised_weights(make_net):
    """At depth 1 the copy's class scores are those of the trained network with class_caps's
    kernel replaced by the random one (assigned on a third network)."""
    net = make_net(seed=3)
    copy = randomised_copy(net, seed=0)
    images = np.random.default_rng(0).random((4, 12, 12, 1), dtype=np.float32)
    copy.cascade.at(1)
    got = np.asarray(copy.net.encoder(images, training=False)[1])
    other = make_net(seed=5)
    other.model.set_weights(net.model.get_weights())
    other.class_caps.set_weights(copy.cascade.random[0])
    np.testing.assert_allclose(got, np.asarray(other.encoder(images, training=False)[1]),
                               rtol=1e-5, atol=1e-6)
    trained = np.asarray(net.encoder(images, training=False)[1])
    assert not np.allclose(got, trained)


def test_a_linear_models_gradient_is_its_weights_so_randomising_it_compares_the_weights():
    import keras
    import tensorflow as tf

    model = keras.Sequential([keras.Input((5, 6, 1)), keras.layers.Flatten(name="flat"),
                              keras.layers.Dense(1, use_bias=False, name="linear")])
    rng = np.random.default_rng(0)
    trained_w = rng.normal(size=(30, 1)).astype(np.float32)
    random_w = rng.normal(size=(30, 1)).astype(np.float32)
    model.get_layer("linear").set_weights([trained_w])
    layers = weighted_layers(model)
    assert [layer.name for layer in layers] == ["linear"]
    cascade = Cascade(layers, values_of(layers), [[random_w]])
    x = tf.constant(rng.random((3, 5, 6, 1), dtype=np.float32))

    def explain():
        with tf.GradientTape() as tape:
            tape.watch(x)
            out = tf.reduce_sum(model(x))
        return tape.gradient(out, x).numpy()[..., 0]

    trained_map, random_map = cascade_maps(cascade, explain)
    np.testing.assert_allclose(model.get_layer("linear").get_weights()[0], trained_w)  # restored
    np.testing.assert_allclose(trained_map[0], trained_w.reshape(5, 6), rtol=1e-6)
    got = similarities(trained_map, random_map)
    a, b = trained_w.reshape(5, 6), random_w.reshape(5, 6)
    signed = stats.spearmanr(a.ravel(), b.ravel()).statistic
    absolute = stats.spearmanr(np.abs(a).ravel(), np.abs(b).ravel()).statistic
    structural = ssim(unit_abs(a[None]), unit_abs(b[None]))[0]
    np.testing.assert_allclose(got["spearman_signed"], signed, rtol=1e-5)
    np.testing.assert_allclose(got["spearman_abs"], absolute, rtol=1e-5)
    np.testing.assert_allclose(got["ssim"], structural, rtol=1e-5)
    np.testing.assert_allclose(similarities(trained_map, trained_map)["ssim"], 1.0, rtol=1e-12)
