"""Fixtures: the family as reportgen finds it (through this package's entry point), and tiny
models: the family's own example and the same with a 3x3 primary grid."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _tiny() -> dict:
    """The family's own tiny example model (Family.example) as a params.toml document: 28x28
    -> conv 5x5 s2 -> 12 -> conv 3x3 s2 -> 5 -> depthwise 5x5 -> a 1x1 grid of 4 capsules x 4
    dims (16 channels) -> 10 classes x 8."""
    from efficient_capsnet.family import EXAMPLE, NAME

    return {"dataset": "mnist", "family": NAME, **EXAMPLE}


TINY = _tiny()
# The same with a 3x3 primary grid (depthwise 3x3 over the 5x5 map): 36 primary capsules.
GRID = {**TINY, "primary": {"types": 4, "dims": 4, "kernel_size": 3, "strides": 1}}


from reportgen.sdk.testing import params_toml  # noqa: E402,F401  (the tests' import)


@pytest.fixture(scope="session", autouse=True)
def efficient_family():
    """The family, as reportgen finds it through the `reportgen.families` entry point: every
    test runs the package as a researcher's install does, never registered by hand."""
    from reportgen.sdk.testing import get_family, registered_families

    from efficient_capsnet.family import FAMILY, NAME

    if NAME not in registered_families():
        pytest.fail(f"reportgen does not find the family '{NAME}': install this package "
                    f"(pip install -e examples/efficient_capsnet) into reportgen's environment")
    assert get_family(NAME) is FAMILY
    return FAMILY


def parse(raw: dict):
    from reportgen.sdk import parse_model_params

    return parse_model_params(raw, source="models/Tiny/params.toml")


def build(raw: dict, seed: int = 0):
    from reportgen.sdk.testing import build_network

    return build_network(parse(raw), seed)


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
