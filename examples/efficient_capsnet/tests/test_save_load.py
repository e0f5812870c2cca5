"""A model saved as `.keras` loads back (every layer registered, every constructor argument in
get_config) and gives the same outputs; each layer's config rebuilds it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import GRID, TINY, build, randomise


@pytest.mark.parametrize("raw", [TINY, GRID], ids=["1x1", "3x3"])
def test_keras_save_load_round_trip(raw, tmp_path):
    import keras

    net = build(raw)
    randomise(net)
    images = np.random.default_rng(0).uniform(0, 1, (3, 28, 28, 1)).astype(np.float32)
    before = {k: np.asarray(v) for k, v in net.model(images, training=False).items()}
    path = tmp_path / "efficient_capsnet.keras"
    net.model.save(path)
    keras.backend.clear_session()
    loaded = keras.saving.load_model(path)
    after = {k: np.asarray(v) for k, v in loaded(images, training=False).items()}
    assert set(after) == set(before)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)


def test_get_config_round_trip():
    from efficient_capsnet.layers import FCCaps, PrimaryCaps

    for layer in (PrimaryCaps(4, 8, squash_epsilon=1e-12, name="p"),
                  FCCaps(10, 16, routing_bias=False, squash_epsilon=1e-12,
                         kernel_initializer="glorot_uniform", name="f")):
        config = layer.get_config()
        again = type(layer).from_config(config)
        assert again.get_config() == config
    assert FCCaps.from_config(FCCaps(3, 2).get_config()).routing_bias is True
