"""The family declaration: found through its entry point, read from params.toml, described,
counted (105,201 parameters), checked, and built as described."""

from __future__ import annotations

from importlib.metadata import entry_points

import numpy as np
import pytest
from conftest import FLAT, MODEL, TINY, TWO_LAYERS, build, build_params, digits, parse

from reportgen.sdk import ReportgenError, describe, load_model_params


def test_the_entry_point_names_the_family():
    from idpa_capsnet.family import FAMILY

    families = {e.name: e for e in entry_points(group="reportgen.families")}
    assert families["idpa"].load() is FAMILY
    assert FAMILY.classification_loss == "cross_entropy"


def test_mnist_has_105201_trainable_parameters():
    """By hand: conv1 5*5*1*64 + 64 = 1,664; primary_conv 3*3*64*128 = 73,728 (no bias); its
    LayerNorm 2*16 = 32; conv_caps1 3*3*8*4*4*8 = 9,216 + LayerNorm 32; class_caps 128*4*4*10 =
    20,480 + LayerNorm 32; readout 16 + 1 = 17."""
    from idpa_capsnet.family import count_params

    params = load_model_params(MODEL)
    assert 1_664 + 73_728 + 32 + 9_216 + 32 + 20_480 + 32 + 17 == 105_201
    assert count_params(params) == 105_201
    net = build_params(params)
    assert net.trainable_params() == 105_201
    assert not net.model.non_trainable_weights
    sizes = {w.path: int(np.prod(w.shape)) for w in net.model.trainable_weights}
    assert sizes["conv1/kernel"] == 1_600 and sizes["conv1/bias"] == 64
    assert sizes["primary_conv/kernel"] == 73_728 and "primary_conv/bias" not in sizes
    assert sizes["conv_caps1/W"] == 9_216 and sizes["class_caps/W"] == 20_480
    assert sizes["readout/kernel"] + sizes["readout/bias"] == 17


@pytest.mark.parametrize("raw", [TINY, TWO_LAYERS, FLAT],
                         ids=["tiny", "two-conv-caps", "no-conv-caps"])
def test_the_description_is_what_is_built(raw):
    from idpa_capsnet.family import count_params

    net = build(raw)
    description = describe(net.params)
    assert description == net.description
    assert net.trainable_params() == count_params(net.params)
    outputs = net.model(digits(2), training=False)
    shapes = {k: tuple(v.shape[1:]) for k, v in outputs.items()}
    for conv in description.conv_layers:
        assert shapes[conv.name] == (*conv.grid, conv.filters)
        config = net.model.get_layer(conv.name).get_config()
        assert tuple(config["kernel_size"]) == conv.kernel_size
        assert tuple(config["strides"]) == conv.strides
    primary, *convs, classes = description.capsule_layers
    assert shapes["primary_capsules"] == (primary.capsules, primary.pose_size)
    below = primary
    for layer in convs:
        built = net.model.get_layer(layer.name)
        assert built.grid == layer.grid and built.types == layer.types
        assert shapes[below.routing.output_of(below.name)] == (
            *layer.grid, *layer.kernel_size, below.types, layer.types)
        below = layer
    assert shapes[below.routing.output_of(below.name)] == (below.capsules, classes.types)
    assert shapes["class_capsules"] == (classes.types, classes.pose_size)
    assert shapes["logits"] == shapes["probabilities"] == (classes.types,)
    side = int(np.sqrt(primary.pose_size))
    assert {(c.pose, c.pose_shape, c.activation) for c in description.capsule_layers} == \
        {("matrix", (side, side), "none")}
    head = description.head
    assert (head.kind, head.layer, head.readout, head.scores) == ("capsules", "class_caps",
                                                                  "learnt", "logits")
    assert "inverted_attention_routing" in description.features


def test_mnist_description_grids_and_receptive_fields():
    """conv1 5x5 s2: 12x12, cell r sees pixels 2r .. 2r + 4; the primary 3x3 s1: 10x10, conv1
    cells r .. r + 2, so pixels 2r .. 2r + 8 (9); conv_caps1 3x3 s2: 4x4, primary cells 2r ..
    2r + 2, so pixels 4r .. 4r + 12 (13)."""
    description = describe(load_model_params(MODEL))
    primary, conv_caps, classes = description.capsule_layers
    assert [c.grid for c in description.conv_layers] == [(12, 12), (10, 10)]
    assert (primary.grid, primary.types, primary.pose_size) == ((10, 10), 8, 16)
    assert primary.capsules == 800
    assert primary.receptive_field.size == (9, 9) and primary.receptive_field.stride == (2, 2)
    assert conv_caps.receptive_field.start == (0, 0)
    assert (conv_caps.grid, conv_caps.kernel_size, conv_caps.strides) == ((4, 4), (3, 3),
                                                                          (2, 2))
    assert conv_caps.receptive_field.size == (13, 13)
    assert conv_caps.receptive_field.stride == (4, 4)
    assert (primary.routing.sums_over, conv_caps.routing.sums_over) == ("window", "parents")
    assert primary.routing.iterations == conv_caps.routing.iterations == 2
    assert classes.grid is None and classes.types == 10
    assert description.decoder is None
    assert description.layer("primary_conv").activation == "none"


@pytest.mark.parametrize("table, key, value", [
    ("class_caps", "routing_iterations", 3), ("class_caps", "routing", "none"),
    ("primary", "batch_norm", True), ("loss", "m_plus", 0.9),
    ("decoder", "enabled", True)])
def test_settings_that_mean_nothing_here_are_refused_in_one_line(table, key, value):
    raw = {**TINY, table: {**TINY.get(table, {}), key: value}}
    with pytest.raises(ReportgenError) as err:
        parse(raw)
    assert f"'{table}.{key}' in models/Tiny/params.toml" in err.value.message
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("change, key", [
    ({"primary": {**TINY["primary"], "dims": 8}}, "primary.dims"),
    ({"class_caps": {"dims": 4}}, "class_caps.dims"),
    ({"idpa": {**TINY["idpa"], "conv_caps_strides": [1, 1]}}, "idpa.conv_caps_kernel_sizes"),
    ({"idpa": {**TINY["idpa"], "conv_caps_kernel_sizes": [7]}}, "idpa.conv_caps_kernel_sizes"),
    ({"idpa": {**TINY["idpa"], "routing": "concurrent"}}, "idpa.routing")])
def test_geometry_that_cannot_be_built_is_refused(change, key):
    with pytest.raises(ReportgenError) as err:
        parse({**TINY, **change})
    assert f"'{key}'" in err.value.message


def test_no_decoder_and_a_linear_primary_convolution_unless_told():
    params = parse(TINY)
    assert not params.decoder.enabled
    assert params.primary.activation == "none"
    told = {**TINY, "primary": {**TINY["primary"], "activation": "relu"}}
    assert parse(told).primary.activation == "relu"


def test_own_table_defaults_stay_out_of_the_cache_key():
    from idpa_capsnet.family import IDPAParams

    without = {k: v for k, v in TINY.items() if k != "idpa"}
    assert parse(without).family_settings == IDPAParams()
    assert "idpa" not in parse(without).to_dict()
    assert list(parse(TINY).to_dict()["idpa"]["conv_caps_strides"]) == [1]


def test_the_loss_is_the_cross_entropy_of_the_logits():
    """training_losses: -log softmax(logits)[true class] per image, no reconstruction term,
    and the logits as the scores."""
    net = build(TINY)
    images = digits(4)
    one_hot = np.eye(10, dtype=np.float32)[[3, 1, 4, 1]]
    loss, reconstruction, scores = (np.asarray(t) for t in net.training_losses(images,
                                                                                one_hot))
    logits = np.asarray(net.encoder(images, training=False)[1], np.float64)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.testing.assert_allclose(loss, -(one_hot * log_p).sum(-1), rtol=1e-5)
    np.testing.assert_array_equal(reconstruction, 0.0)
    np.testing.assert_allclose(scores, logits, atol=1e-6)


def test_it_keeps_the_network_contract_and_cites_its_paper():
    """reportgen's contract check of the family (its example built, every output the
    description calls for, the declared normalisation of both routing weights on a batch)."""
    from reportgen.sdk.testing import check_family

    from idpa_capsnet.family import CITATION, FAMILY, NAME

    assert FAMILY.citations == (CITATION,)
    check_family(NAME)
    net = build(TINY)
    out = {k: np.asarray(v) for k, v in net.model(digits(3), training=False).items()}
    np.testing.assert_allclose(out["primary_caps_routing"].sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(out["conv_caps1_routing"].sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(out["probabilities"].sum(-1), 1.0, atol=1e-6)
    assert len(net.description.leaves_out) == 5
    assert "divided by 4 (the square root of the 16 pose values)" in \
        " ".join(net.description.leaves_out)
    flat = build(FLAT).description.leaves_out           # 2x2 poses
    assert "divided by 2 (the square root of the 4 pose values)" in " ".join(flat)
    assert len(build(TWO_LAYERS).description.leaves_out) == 4     # sequential routing
