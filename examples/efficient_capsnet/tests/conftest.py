"""Fixtures: the family registered with reportgen for the session (until reportgen loads the
`reportgen.families` entry points itself, when it is found already), and tiny models."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# A tiny Efficient-CapsNet on 28x28 digits: 28 -> conv 5x5 s2 -> 12 -> conv 3x3 s2 -> 5 ->
# depthwise 5x5 -> a 1x1 grid of 4 capsules x 4 dims (16 channels) -> 10 classes x 8.
TINY = {"dataset": "mnist", "input_shape": [28, 28, 1], "num_classes": 10,
        "family": "efficient_capsnet",
        "conv": [{"filters": 8, "kernel_size": 5, "strides": 2},
                 {"filters": 16, "kernel_size": 3, "strides": 2}],
        "primary": {"types": 4, "dims": 4, "kernel_size": 5, "strides": 1},
        "class_caps": {"dims": 8}, "decoder": {"units": [32]},
        "efficient_capsnet": {"batch_norm_momentum": 0.9}}
# The same with a 3x3 primary grid (depthwise 3x3 over the 5x5 map): 36 primary capsules.
GRID = {**TINY, "primary": {"types": 4, "dims": 4, "kernel_size": 3, "strides": 1}}


@pytest.fixture(scope="session", autouse=True)
def efficient_family():
    """The family as reportgen sees it: registered here unless reportgen found it already."""
    from reportgen.settings import families

    from efficient_capsnet.family import FAMILY, NAME

    found = NAME in families.registered()
    if not found:
        families.register(FAMILY)
    yield families.family(NAME)
    if not found:
        families.unregister(NAME)


def parse(raw: dict):
    from reportgen.settings.model_params import parse_model_params

    return parse_model_params(raw, source="models/Tiny/params.toml")


def build(raw: dict, seed: int = 0):
    import keras

    from reportgen.capsnet.architecture import build_capsnet

    keras.utils.set_random_seed(seed)
    return build_capsnet(parse(raw))


def randomise(net, seed: int = 1) -> None:
    """Give every weight a random value (BatchNorm statistics and the routing bias included)
    so that a comparison cannot pass on zeros and ones."""
    import numpy as np

    rng = np.random.default_rng(seed)
    for layer in net.model.layers:
        values = []
        for w in layer.get_weights():
            if "batch_norm" in layer.name and w.ndim == 1:
                values.append(rng.uniform(0.5, 1.5, w.shape).astype(w.dtype))
            else:
                values.append((rng.normal(0, 0.3, w.shape)).astype(w.dtype))
        layer.set_weights(values)
