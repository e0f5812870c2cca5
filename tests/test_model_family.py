"""The shipped model definitions against SPEC §2, and parameter-file validation."""

import pytest

from reportgen.capsnet.param_count import count_trainable_params, primary_grid
from reportgen.catalog import Catalog
from reportgen.errors import ReportgenError
from reportgen.settings.model_params import load_model_params, parse_model_params

# SPEC §2: exact trainable-parameter counts (independent oracle).
SPEC_COUNTS = {
    "MNIST": 8_215_568,
    "MNIST_LPcaps": 15_293_456,
    "MNIST_WSharing": 6_781_968,
    "MNIST_AccDecoder": 8_215_568,
    "MNIST_NoDecoder": 6_804_224,
    "CIFAR10": 11_749_120,
}
SPEC_GRIDS = {"MNIST": (6, 6), "MNIST_LPcaps": (18, 18), "CIFAR10": (8, 8)}


@pytest.mark.parametrize("name", sorted(SPEC_COUNTS))
def test_keras_model_reproduces_spec_parameter_count(name):
    from reportgen.capsnet.architecture import build_capsnet

    net = build_capsnet(load_model_params(f"models/{name}/params.toml"))
    assert net.trainable_params() == SPEC_COUNTS[name]
    # the arithmetic count used by `reportgen models` agrees with Keras
    assert count_trainable_params(net.params) == SPEC_COUNTS[name]
    if name in SPEC_GRIDS:
        assert net.grid_shape == SPEC_GRIDS[name] == primary_grid(net.params)


def test_lpcaps_has_10368_primary_capsules():
    params = load_model_params("models/MNIST_LPcaps/params.toml")
    h, w = primary_grid(params)
    assert h * w * params.primary.types == 10_368


def test_acc_decoder_differs_only_in_lambda():
    base = load_model_params("models/MNIST/params.toml")
    acc = load_model_params("models/MNIST_AccDecoder/params.toml")
    assert acc.loss.reconstruction_weight == 1.0 and base.loss.reconstruction_weight == 0.392
    assert acc.conv == base.conv and acc.primary == base.primary and acc.decoder == base.decoder


def test_every_shipped_model_parses():
    names = Catalog("models").names()
    assert {"MNIST_Demo", "FASHION_MNIST", *SPEC_COUNTS} <= set(names)
    for name in names:
        load_model_params(f"models/{name}/params.toml")


def test_demo_model_is_compact():
    params = load_model_params("models/MNIST_Demo/params.toml")
    assert 1_500_000 < count_trainable_params(params) < 2_500_000


MINIMAL = {"dataset": "mnist", "input_shape": [28, 28, 1]}


@pytest.mark.parametrize("patch, field", [
    ({"primary": {"types": 0}}, "primary.types"),
    ({"primary": {"activation": "tanh"}}, "primary.activation"),
    ({"class_caps": {"weight_sharing": "yes"}}, "class_caps.weight_sharing"),
    ({"class_caps": {"routing": 3}}, "class_caps.routing"),
    ({"input_shape": [28, 28]}, "input_shape"),
    ({"input_shape": [28, 28, 2]}, "input_shape"),
    ({"decoder": {"units": [512, -1]}}, "decoder.units"),
    ({"conv": [{"kernel_size": 40}]}, "conv[0].kernel_size"),
    ({"colour": 1}, "colour"),
])
def test_invalid_field_is_named(patch, field):
    with pytest.raises(ReportgenError) as err:
        parse_model_params({**MINIMAL, **patch}, source="models/X/params.toml")
    assert f"'{field}'" in err.value.message
    assert "models/X/params.toml" in err.value.message


def test_missing_dataset_is_named():
    with pytest.raises(ReportgenError, match="'dataset'"):
        parse_model_params({"input_shape": [28, 28, 1]})


def test_invalid_toml_names_file(tmp_path):
    bad = tmp_path / "params.toml"
    bad.write_text("dataset = \n")
    with pytest.raises(ReportgenError, match="not valid TOML") as err:
        load_model_params(bad)
    assert str(bad) in err.value.message


def test_unknown_model_lists_known_ones():
    with pytest.raises(ReportgenError) as err:
        Catalog("models").get("MNIST_Nope")
    assert "MNIST_WSharing" in err.value.message and "MNIST_Demo" in err.value.message


@pytest.mark.parametrize("name", ["../etc", "a/b", "MNIST\\x", "", ".hidden", "x" * 65, "a b"])
def test_unsafe_model_names_are_refused(name):
    with pytest.raises(ReportgenError, match="Unsafe model name"):
        Catalog("models").get(name)
