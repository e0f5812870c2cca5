"""The family declaration: found through its entry points, read from params.toml, described,
counted (the paper's 161,824 parameters), checked, and built as described."""

from __future__ import annotations

from dataclasses import replace
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest
from conftest import GRID, TINY, build, parse

from reportgen.sdk import (DecoderParams, ReceptiveField, ReportgenError, count_trainable_params,
                           describe, load_model_params)

MODEL = Path(__file__).resolve().parents[1] / "models" / "MNIST_EfficientCaps" / "params.toml"


def test_the_entry_points_name_the_family_and_the_technique():
    from efficient_capsnet.family import FAMILY
    from efficient_capsnet.technique import TECHNIQUE

    families = {e.name: e for e in entry_points(group="reportgen.families")}
    techniques = {e.name: e for e in entry_points(group="reportgen.techniques")}
    assert families["efficient_capsnet"].load() is FAMILY
    assert techniques[TECHNIQUE.name].load() is TECHNIQUE


def test_mnist_has_the_papers_161824_trainable_parameters():
    """Mazzia et al. 2021 count 161,824 trainable parameters for MNIST without the decoder:
    conv1 5*5*1*32 + 32 = 832, conv2 3*3*32*64 + 64 = 18,496, conv3 3*3*64*64 + 64 = 36,928,
    conv4 3*3*64*128 + 128 = 73,856; BatchNorm scales and offsets 2*(32+64+64+128) = 576;
    depthwise 9*9*128 + 128 = 10,496; W 10*16*8*16 = 20,480; b 10*16 = 160. The decoder
    160 -> 512 -> 1024 -> 784 adds 82,432 + 525,312 + 803,600 = 1,411,344."""
    params = load_model_params(MODEL)
    alone = replace(params, decoder=DecoderParams(enabled=False))
    assert 832 + 18_496 + 36_928 + 73_856 + 576 + 10_496 + 20_480 + 160 == 161_824
    assert count_trainable_params(alone) == 161_824
    assert count_trainable_params(params) == 161_824 + 1_411_344
    assert build_from(alone).trainable_params() == 161_824
    net = build_from(params)
    assert net.trainable_params() == 1_573_168
    # the BatchNorm statistics exist but are not trained
    assert sum(int(np.prod(w.shape)) for w in net.model.non_trainable_weights) == 576


def build_from(params):
    from reportgen.sdk.testing import build_network

    return build_network(params, 0)


def test_without_the_routing_bias_b_is_gone_from_the_count_and_the_model():
    raw = {**TINY, "efficient_capsnet": {"routing_bias": False}}
    with_bias, without = parse(TINY), parse(raw)
    assert count_trainable_params(with_bias) - count_trainable_params(without) == 10 * 4
    net = build(raw)
    assert net.class_caps.b is None
    assert net.trainable_params() == count_trainable_params(without)


# [[conv]] padding "same": 28 -> 14 -> 7, then the depthwise 5x5 (no padding) -> a 3x3 grid
SAME = {**TINY, "conv": [{**c, "padding": "same"} for c in TINY["conv"]]}


@pytest.mark.parametrize("raw", [TINY, GRID, SAME], ids=["1x1", "3x3", "same padding"])
def test_the_description_is_what_is_built(raw):
    net = build(raw)
    description = describe(net.params)
    assert description == net.description
    assert net.trainable_params() == count_trainable_params(net.params)
    outputs = net.model(np.zeros((2, 28, 28, 1), np.float32))
    shapes = {k: tuple(v.shape[1:]) for k, v in outputs.items()}
    for conv in description.conv_layers:
        assert shapes[conv.name] == (*conv.grid, conv.filters)
        config = net.model.get_layer(conv.name).get_config()
        assert tuple(config["kernel_size"]) == conv.kernel_size
        assert tuple(config["strides"]) == conv.strides
        assert config["padding"] == conv.padding
    primary, classes = description.primary_capsules, description.class_capsules
    assert net.model.get_layer(primary.name) is net.primary_caps
    assert net.model.get_layer(classes.name) is net.class_caps
    assert shapes["primary_capsules"] == (primary.capsules, primary.pose_size)
    assert shapes[primary.routing.output_of(primary.name)] == (primary.capsules, classes.types)
    assert shapes["primary_caps_routing_with_bias"] == (primary.capsules, classes.types)
    assert shapes["class_capsules"] == (classes.types, classes.pose_size)
    assert shapes["reconstruction"] == (28, 28, 1)
    assert description.features >= {"self_attention_routing", "routing_paths",
                                     "vector_capsules", "primary_capsules", "decoder"}
    assert "dynamic_routing" not in description.features
    if raw is SAME:
        assert [c.grid for c in description.conv_layers] == [(14, 14), (7, 7), (3, 3)]
        assert description.conv_layers[0].receptive_field.start == (-1, -1)


def test_mnist_description_and_receptive_field():
    """One primary cell on a 1x1 grid: through conv1 (5, s1), conv2-3 (3, s1), conv4 (3, s2)
    and the 9x9 depthwise convolution it sees 1 + 4 + 2 + 2 + 2 + 8*2 = 27 rows and columns
    from (0, 0): every pixel but the last row and column."""
    description = describe(load_model_params(MODEL))
    primary = description.primary_capsules
    assert (primary.grid, primary.types, primary.pose_size) == ((1, 1), 16, 8)
    assert primary.capsules == 16
    assert primary.receptive_field == ReceptiveField((0, 0), (27, 27), (2, 2))
    assert [c.name for c in description.plain_conv_layers] == ["conv1", "conv2", "conv3",
                                                               "conv4"]
    assert description.layer("primary_conv").activation == "none"
    assert description.class_capsules.pose_size == 16


@pytest.mark.parametrize("table, key, value", [
    ("class_caps", "routing_iterations", 3), ("class_caps", "weight_sharing", True),
    ("class_caps", "routing", "none"), ("primary", "batch_norm", True)])
def test_settings_that_mean_nothing_here_are_refused_in_one_line(table, key, value):
    raw = {**TINY, table: {**TINY.get(table, {}), key: value}}
    with pytest.raises(ReportgenError) as err:
        parse(raw)
    assert f"'{table}.{key}' in models/Tiny/params.toml" in err.value.message
    assert "\n" not in str(err.value)


def test_the_depthwise_convolution_keeps_its_channels():
    raw = {**TINY, "primary": {**TINY["primary"], "types": 8}}
    with pytest.raises(ReportgenError) as err:
        parse(raw)
    assert "primary.types" in err.value.message and "16" in str(err.value)


def test_the_primary_convolution_is_linear_unless_told():
    assert parse(TINY).primary.activation == "none"
    told = {**TINY, "primary": {**TINY["primary"], "activation": "relu"}}
    assert parse(told).primary.activation == "relu"


def test_own_table_defaults_stay_out_of_the_cache_key():
    from efficient_capsnet.family import EfficientCapsNetParams

    raw = {k: v for k, v in TINY.items() if k != "efficient_capsnet"}
    assert parse(raw).family_settings == EfficientCapsNetParams()
    assert "efficient_capsnet" not in parse(raw).to_dict()
    assert parse(TINY).to_dict()["efficient_capsnet"]["batch_norm_momentum"] == 0.9


def test_the_learning_rate_decays_per_epoch_as_the_authors_schedule():
    """lr x 0.97^epoch (epochs from 0), never below 5e-5: with lr 5e-4 over 10 epochs the
    factor of the first batch of epoch e (1-based) is 0.97^(e-1)."""
    net = build(TINY)
    net.epochs, net.decay, net.floor = 10, 0.97, 5e-5 / 5e-4
    batches = 250
    for epoch in (1, 2, 5, 10):
        first = ((epoch - 1) * batches) / (10 * batches - 1)
        last = ((epoch - 1) * batches + batches - 1) / (10 * batches - 1)
        assert net.learning_rate_factor(first) == pytest.approx(0.97 ** (epoch - 1))
        assert net.learning_rate_factor(last) == pytest.approx(0.97 ** (epoch - 1))
    net.decay = 0.5
    assert net.learning_rate_factor(1.0) == pytest.approx(0.1)    # the floor, 5e-5 / 5e-4


def test_it_keeps_the_network_contract_and_declares_its_citation_capability_and_outputs():
    """reportgen.contract: the built network gives every output its description calls for and
    the output the family declares; `votes` gives u_hat[j|i]; the description says what it
    leaves out; the family and its technique cite the paper."""
    from reportgen.sdk.testing import check_network, get_technique, required_outputs

    from efficient_capsnet.family import CITATION, FAMILY, NAME
    from efficient_capsnet.technique import TECHNIQUE

    assert FAMILY.citations == TECHNIQUE.citations == (CITATION,)
    assert get_technique(TECHNIQUE.name) is TECHNIQUE
    net = build(TINY)
    description = describe(net.params)
    check_network(net, NAME, description)
    assert description.capabilities == {"votes"} and "votes" in description.features
    assert description.outputs == ("primary_caps_routing_with_bias",)
    assert set(required_outputs(description)) == set(net.model.output)    # nothing more
    assert len(description.leaves_out) == 4
    images = np.random.default_rng(0).uniform(0, 1, (2, 28, 28, 1)).astype(np.float32)
    votes = np.asarray(net.votes(images))
    assert votes.shape == (2, 4, 10, 8)
    primary = np.asarray(net.model(images, training=False)["primary_capsules"])
    np.testing.assert_allclose(votes, np.einsum("bnd,knde->bnke", primary,
                                                net.class_caps.get_weights()[0]), atol=1e-5)
