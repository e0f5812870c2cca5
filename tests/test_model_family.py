"""The shipped model definitions against their published parameter counts, and parameter-file validation."""

import pytest

from reportgen.capsnet.param_count import count_trainable_params, primary_grid
from reportgen.catalog import Catalog
from reportgen.errors import ReportgenError
from reportgen.settings.model_params import load_model_params, parse_model_params

# Exact trainable-parameter counts of the published architectures (independent oracle).
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


def test_name_ending_in_a_newline_is_refused():
    # "$" in a regular expression also matches before a final newline
    with pytest.raises(ReportgenError, match="Unsafe model name"):
        Catalog("models").get("MNIST\n")


VALID_TOML = 'dataset = "mnist"\ninput_shape = [28, 28, 1]\n'
HOSTILE = ["a<b", "has space", "-dash", "Modèle", "x\ny"]


@pytest.fixture
def hostile(tmp_path):
    """Two valid models beside invalid folders: unsafe names, garbage / missing / directory
    params.toml, and a folder without params.toml (not a model at all)."""
    root = tmp_path / "models"
    for name in ["Good", "Good2", *HOSTILE]:
        (root / name).mkdir(parents=True)
        (root / name / "params.toml").write_text(VALID_TOML)
    (root / "Garbage").mkdir()
    (root / "Garbage" / "params.toml").write_bytes(b"\xff\x00 = = [[")
    (root / "BadField").mkdir()
    (root / "BadField" / "params.toml").write_text(VALID_TOML + "[primary]\ntypes = 0\n")
    (root / "DirParams" / "params.toml").mkdir(parents=True)
    (root / "archive").mkdir()
    return root


def test_invalid_folders_are_skipped_one_by_one(hostile):
    catalog = Catalog(hostile)
    assert [e.name for e in catalog.match("*")] == ["Good", "Good2"]
    assert catalog.names() == ["Good", "Good2"]
    invalid = dict(catalog.invalid_models())
    assert set(invalid) == {"a<b", "has space", "-dash", "Modèle", "x\\ny", "Garbage",
                            "BadField", "DirParams"}
    for name, reason in invalid.items():
        assert "\n" not in reason and reason.endswith(".")
    assert "Unsafe model name" in invalid["a<b"] and "such as a_b" in invalid["a<b"]
    assert "such as dash" in invalid["-dash"] and "'x\\ny'" in invalid["x\\ny"]
    assert "not valid TOML" in invalid["Garbage"] and str(hostile / "Garbage") in invalid["Garbage"]
    assert "'primary.types'" in invalid["BadField"]
    assert "is not a file" in invalid["DirParams"]
    assert catalog.invalid_models("Good*") == []
    assert [n for n, _ in catalog.invalid_models("G*")] == ["Garbage"]
    assert [n for n, _ in catalog.invalid_models("*<*")] == ["a<b"]


def test_match_raises_only_when_no_folder_at_all_matches(hostile):
    catalog = Catalog(hostile)
    assert catalog.match("Garb*") == []                  # an invalid folder matched: skipped
    assert catalog.match("a<b") == []
    with pytest.raises(ReportgenError, match="No model matches 'Nothing'") as err:
        catalog.match("Nothing")
    assert "Good" in err.value.message


def test_explicitly_named_invalid_model_raises_its_one_line_error(hostile):
    catalog = Catalog(hostile)
    for name, text in [("Garbage", "not valid TOML"), ("BadField", "'primary.types'"),
                       ("a<b", "Unsafe model name"), ("DirParams", "is not a file")]:
        with pytest.raises(ReportgenError, match=text) as err:
            catalog.get(name)
        assert "\n" not in err.value.message
    assert catalog.get("Good").params.dataset == "mnist"


def test_missing_models_folder_is_named(tmp_path):
    catalog = Catalog(tmp_path / "nowhere")
    for call in (catalog.names, lambda: catalog.match("*"), lambda: catalog.get("MNIST"),
                 catalog.invalid_models):
        with pytest.raises(ReportgenError, match="Models folder .*nowhere does not exist"):
            call()
    (tmp_path / "file").write_text("")
    with pytest.raises(ReportgenError, match="is not a folder"):
        Catalog(tmp_path / "file").names()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportgenError, match="holds no model"):
        Catalog(tmp_path / "empty").match("*")


@pytest.mark.parametrize("text, received", [
    ("{bad", "invalid JSON"), ("[]", "an array instead of an object"),
    ('{"x": 1}', "no 'records' list"), ('{"records": [{"step": "1-2"}, 3]}', "record 1"),
    # numbers out of any sane range: a 360-digit loss (float() overflows), a negative loss,
    # a count no float holds exactly, a NaN learning rate
    ('{"records": [{"step": "1-2", "loss": 1' + "0" * 360 + '}]}',
     "record 0 (step 1-2): 'loss' is a number 1000000000"),
    ('{"records": [{"step": "1-2", "margin_loss": -1e300}]}',
     "record 0 (step 1-2): 'margin_loss' is a number -1e+300, expected a finite number >= 0"),
    ('{"records": [{"step": "1-2", "images_seen": 9007199254740993}]}',
     "record 0 (step 1-2): 'images_seen' is a number 9007199254740993, expected a whole number "
     "from 0 to 9,007,199,254,740,992"),
    ('{"training": {"learning_rate": NaN}, "records": []}', "training: 'learning_rate'"),
])
def test_corrupt_history_is_one_readable_line(hostile, text, received):
    (hostile / "Good" / "history.json").write_text(text)
    with pytest.raises(ReportgenError) as err:
        Catalog(hostile).get("Good").history()
    message = err.value.message
    assert "\n" not in message and f"Received {received}" in message
    assert message.startswith(f"Training history {hostile / 'Good' / 'history.json'} is corrupt")
