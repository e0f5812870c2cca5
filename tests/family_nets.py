"""Tiny networks of the other model families (GraCapsNet, Self-Routing, the CNN baselines of Gu
2022), on the 12x12x1 inputs and 3 classes of conftest's TINY_PARAMS."""

from __future__ import annotations

from conftest import TINY_PARAMS

BASE = {"dataset": TINY_PARAMS["dataset"], "input_shape": TINY_PARAMS["input_shape"],
        "num_classes": TINY_PARAMS["num_classes"]}
# 12x12 -> conv 10x10 -> primary (kernel 3, stride 2) 4x4 grid x 4 heads = 64 capsules.
TINY_GRACAPS = {**BASE, "family": "gracapsnet", "conv": [{"filters": 8, "kernel_size": 3}],
                "primary": {"types": 4, "dims": 4, "kernel_size": 3, "strides": 2},
                "class_caps": {"dims": 4}, "graph": {"sigma": 1.5}, "decoder": {"units": [16]}}
# Self-Routing, every convolution padded by 1: 12x12 -> conv 12x12x8 -> primary (kernel 3,
# stride 2) 6x6 x 2 types of 4 -> ConvCaps (kernel 3, stride 2) 3x3 x 3 types of 4 -> 3 classes.
TINY_SELF_ROUTING = {**BASE, "family": "self_routing",
                     "conv": [{"filters": 8, "kernel_size": 3}],
                     "primary": {"types": 2, "dims": 4, "kernel_size": 3, "strides": 2},
                     "self_routing": {"conv_caps_types": 3, "conv_caps_dims": 4},
                     "decoder": {"enabled": False}}
CNN_HEADS = ("avg", "fc", "r", "cr", "cr_sf")
# Two overlapping digits (MultiMNIST, 36x36, 10 classes): 36 -> conv 5 s3 11x11 -> primary
# (kernel 3, stride 2) 5x5 grid x 4 types = 100 capsules -> 10 x 4D; decoder 40 -> 16 -> 1296.
TINY_PAIR = {"dataset": "multimnist", "input_shape": [36, 36, 1], "num_classes": 10,
             "conv": [{"filters": 8, "kernel_size": 5, "strides": 3}],
             "primary": {"types": 4, "dims": 4, "kernel_size": 3, "strides": 2},
             "class_caps": {"dims": 4}, "decoder": {"units": [16]}}


def tiny_cnn(head: str) -> dict:
    """12x12 -> conv 10x10x8 -> conv (stride 2) 4x4x8; class units 3 x 4 (r, cr, cr_sf)."""
    return {**BASE, "family": "cnn",
            "conv": [{"filters": 8, "kernel_size": 3},
                     {"filters": 8, "kernel_size": 3, "strides": 2}],
            "cnn": {"head": head, "dense": [12], "vector_dims": 4}, "class_caps": {"dims": 4},
            "decoder": {"enabled": head in ("r", "cr", "cr_sf"), "units": [16]}}


def toml_text(raw: dict) -> str:
    """A params.toml for a dict of these (tables as TOML inline tables, arrays of tables as
    arrays of them)."""
    import json

    def value(v) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + "}"
        raise TypeError(f"no TOML form for {type(v).__name__}")

    return "".join(f"{key} = {value(v)}\n" for key, v in raw.items())


def write_model(models_dir, name: str, raw: dict, data) -> None:
    """models_dir/NAME/params.toml of `raw` trained on the data file `data`, one batch of 10
    images per step."""
    folder = models_dir / name
    folder.mkdir(parents=True, exist_ok=True)
    training = {"epochs": 1, "batch_size": 10, "save_every": 1, "learning_rate": 0.01}
    (folder / "params.toml").write_text(toml_text({**raw, "dataset": str(data),
                                                   "training": training}))


def build(raw: dict, seed: int = 0):
    import keras

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.settings.model_params import parse_model_params

    keras.utils.set_random_seed(seed)
    return build_capsnet(parse_model_params(raw))


# The affine benchmark's input: 40x40 expanded digits (reportgen.data.affine_benchmark).
TINY_CNN40 = {"dataset": "mnist40", "input_shape": [40, 40, 1], "num_classes": 10,
              "family": "cnn", "conv": [{"filters": 4, "kernel_size": 5, "strides": 2}],
              "cnn": {"head": "avg"}, "decoder": {"enabled": False}}
