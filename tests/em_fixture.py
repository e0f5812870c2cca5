"""A tiny model of matrix capsules with EM routing (family "em") for the tests: built in about
a second, every layer kind present (primary, two convolutional capsule layers, class capsules)."""

from __future__ import annotations

TINY_EM = {
    "dataset": "mnist",
    "family": "em",
    "input_shape": [12, 12, 1],
    "num_classes": 3,
    # 12x12 -> conv 3x3 -> 10x10 -> primary 1x1 -> ConvCaps k3 s2 -> 4x4 -> ConvCaps k2 s1 -> 3x3
    "conv": [{"filters": 4, "kernel_size": 3}],
    "primary": {"types": 2, "kernel_size": 1, "strides": 1},
    "em": {"routing_iterations": 2, "inverse_temperature": 0.5,
           "conv_caps": [{"types": 3, "kernel_size": 3, "strides": 2},
                         {"types": 2, "kernel_size": 2, "strides": 1}]},
}

TINY_EM_TOML = """
dataset = "{data}"
family = "em"
input_shape = [12, 12, 1]
num_classes = 3
[[conv]]
filters = 4
kernel_size = 3
[primary]
types = 2
kernel_size = 1
strides = 1
[em]
routing_iterations = 2
inverse_temperature = 0.5
learning_rate_decay = 0.5
[[em.conv_caps]]
types = 3
kernel_size = 3
strides = 2
[[em.conv_caps]]
types = 2
kernel_size = 2
strides = 1
[training]
epochs = 1
batch_size = 10
save_every = 2
learning_rate = 0.01
"""


def em_params(**overrides):
    from reportgen.settings.model_params import parse_model_params

    return parse_model_params({**TINY_EM, **overrides})


def build_tiny_em(seed: int = 0, **overrides):
    import keras

    from reportgen.capsnet.architecture import build_capsnet

    keras.utils.set_random_seed(seed)
    return build_capsnet(em_params(**overrides))
