"""A model saved as `.keras` loads back (every layer registered, every constructor argument in
get_config, the routing iterations' shared layers kept shared) and gives the same outputs; each
layer's config rebuilds it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TINY, TWO_LAYERS, build, digits, randomise


@pytest.mark.parametrize("raw", [TINY, TWO_LAYERS], ids=["tiny", "two-conv-caps-sequential"])
def test_keras_save_load_round_trip(raw, tmp_path):
    import keras

    net = build(raw)
    randomise(net, scale=2.0)
    images = digits(3)
    before = {k: np.asarray(v) for k, v in net.model(images, training=False).items()}
    path = tmp_path / "idpa.keras"
    net.model.save(path)
    keras.backend.clear_session()
    loaded = keras.saving.load_model(path)
    after = {k: np.asarray(v) for k, v in loaded(images, training=False).items()}
    assert set(after) == set(before)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    # one layer per capsule layer, called once per iteration: the weights stay shared
    assert len(loaded.trainable_weights) == len(net.model.trainable_weights)


def test_get_config_round_trip():
    from idpa_capsnet.layers import ClassCaps, ConvCaps, PrimaryCaps, Readout

    for layer in (PrimaryCaps(4, 16, epsilon=1e-6, name="p"),
                  ConvCaps(8, 3, 2, epsilon=1e-4, name="c"),
                  ConvCaps(3, 2, 1, kernel_initializer="glorot_uniform", name="g"),
                  ClassCaps(10, epsilon=1e-3, name="f"), Readout(name="r")):
        config = layer.get_config()
        again = type(layer).from_config(config)
        assert again.get_config() == config
    assert ConvCaps.from_config(ConvCaps(3, 2).get_config()).kernel_initializer is None
