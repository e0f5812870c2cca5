"""LRP (reportgen.techniques.lrp_clrp.rules) through this family's own head: the class sum of
ConvNet-CR's classes x dims units after global average pooling conserves relevance."""

from __future__ import annotations

import numpy as np

from reportgen.techniques.lrp_clrp import rules


def test_functional_path_with_global_average_and_class_sum_conserves():
    """A CNN head of classes x dims units summed per class (ConvNet-CR's logits), after global
    average pooling: conservation through the average and the sum."""
    import keras

    from reportgen.families.cnn.layers import ClassSum

    keras.utils.set_random_seed(4)
    image = keras.Input((7, 7, 1))
    h = keras.layers.Conv2D(4, 3, strides=2, activation="relu", name="conv1")(image)
    h = keras.layers.GlobalAveragePooling2D()(h)
    units = keras.layers.Dense(3 * 2, name="units")(h)
    scores = ClassSum(name="logits")(keras.layers.Reshape((3, 2))(units))
    model = keras.Model(image, {"logits": scores, "other": units})
    steps = rules.layer_chain(model, "logits")
    assert [s.kind for s in steps] == ["conv", "gap", "dense", "reshape", "sum"]
    assert rules.top_index(steps) == 2
    x = np.random.default_rng(0).uniform(0, 1, (6, 7, 7, 1))
    logit = rules.logits(steps, x, "float64")
    np.testing.assert_allclose(logit, np.asarray(model(x.astype(np.float32))["logits"]),
                               atol=1e-5)
    targets = np.argmax(logit, axis=1)
    relevance = rules.lrp(steps, x, targets, dtype="float64")
    np.testing.assert_allclose(relevance.reshape(6, -1).sum(axis=1),
                               logit[np.arange(6), targets], rtol=1e-9)
