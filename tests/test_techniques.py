"""What the techniques declare and have in common, on a tiny CapsNet: declarations, variants,
options, refusals, the routing they read, batch == item by item. Each technique's own oracle
test is in its package (reportgen/techniques/<name>/tests/)."""

from __future__ import annotations

import dataclasses
import json
from importlib import import_module

import numpy as np
import pytest
from reference import capsules as oracle

from reportgen.errors import ReportgenError
from reportgen.probe.probe import run_probe
from reportgen.techniques import TECHNIQUE_MODULES, get_technique
from reportgen.techniques import compute as helpers


def _technique(name):
    return get_technique(name)


def _params(name, **options):
    return _technique(name).params_type(**options)


def _run(name, batch, **options):
    return _technique(name).compute(batch, _params(name, **options))


# --- declarations -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", TECHNIQUE_MODULES)
def test_declaration(name, tiny_net):
    from reportgen.techniques import OWN_MODULES

    module = import_module(OWN_MODULES.get(name, f"reportgen.techniques.{name}"))
    technique = module.TECHNIQUE
    assert technique.name == name
    assert isinstance(technique.version, int) and technique.version >= 1
    assert technique.params_type is module.Params
    assert dataclasses.is_dataclass(module.Params) and module.Params.__dataclass_params__.frozen
    assert callable(technique.render) and callable(technique.compute)
    hash(module.Params())
    for params in technique.variants(tiny_net):
        assert isinstance(params, module.Params)
        json.dumps(helpers.params_dict(params))
    assert technique.experimental == (name == "activation_maximization")


def test_variants(tiny_net, make_net):
    assert _technique("gradcam_pp").variants(tiny_net) == [
        _params("gradcam_pp", layer="conv1"), _params("gradcam_pp", layer="primary_conv")]
    assert _technique("conv_feature_maps").variants(tiny_net) == [
        _params("conv_feature_maps", layer="conv1")]
    assert [p.method for p in _technique("rpv").variants(tiny_net)] == ["modified", "original"]
    plain = make_net(decoder={"enabled": False})
    assert plain.decoder is None
    assert _technique("decoder_length").variants(plain) == []
    assert _technique("decoder_perturbation").variants(plain) == []
    deep = make_net(conv=[{"filters": 4, "kernel_size": 3}, {"filters": 6, "kernel_size": 3}],
                    primary={"types": 2, "dims": 4, "kernel_size": 3, "strides": 2})
    assert [p.layer for p in _technique("conv_kernels").variants(deep)] == ["conv1", "conv2"]
    assert [p.layer for p in _technique("gradcam_pp").variants(deep)] == \
        ["conv1", "conv2", "primary_conv"]
    from reportgen.techniques.gradcam_pp import default_layer
    assert default_layer(deep) == "conv2" and default_layer(tiny_net) == "conv1"


def test_labels_and_params_dicts():
    assert helpers.variant_label(None) == ""
    assert helpers.variant_label(_params("predictions")) == ""
    assert helpers.variant_label(_params("rpv")) == "modified"
    assert helpers.variant_label(_params("conv_feature_maps", layer="conv1")) == "conv1"
    assert helpers.variant_label(_params("gradcam_pp")) == ""
    assert helpers.variant_label(_params("decoder_length")) == ""
    assert helpers.variant_label(_params("decoder_length", target=3)) == "target3"
    label = helpers.variant_label(_params("decoder_perturbation", target=2, deltas=[-0.5, 0.5]))
    assert label.startswith("target2-deltas-") and all(c.isalnum() or c in "-_." for c in label)
    assert helpers.variant_label(_params("activation_maximization", learning_rate=0.1)) == \
        "learning_rate0.1"
    assert helpers.params_dict(_params("decoder_perturbation"))["deltas"][0] == -0.25
    assert len(_params("decoder_perturbation").deltas) == 11
    assert _params("decoder_length").lengths == tuple(round(0.1 * i, 1) for i in range(11))
    # Lists (as read from TOML) become tuples: Params stay hashable.
    hash(_params("decoder_length", lengths=[0.5, 1.0]))


@pytest.mark.parametrize("name, options", [
    ("rpv", {"method": "squared"}),
    ("primary_heatmaps", {"normalization": "per_image"}),
    ("decoder_length", {"target": -2}),
    ("decoder_length", {"lengths": [-0.1]}),
    ("decoder_perturbation", {"target": 1.5}),
    ("activation_maximization", {"steps": 0}),
    ("activation_maximization", {"learning_rate": -1.0}),
])
def test_invalid_options(name, options):
    with pytest.raises(ReportgenError) as info:
        _params(name, **options)
    assert next(iter(options)) in str(info.value)


@pytest.mark.parametrize("name", ["gradcam_pp", "conv_feature_maps", "conv_kernels"])
def test_unknown_layer(name, probe, tiny_net):
    with pytest.raises(ReportgenError) as info:
        _run(name, probe, layer="conv9")
    message = str(info.value)
    assert "conv9" in message
    assert all(layer in message for layer in tiny_net.conv_layer_names)


def test_decoder_target_out_of_range(probe):
    for name in ("decoder_length", "decoder_perturbation"):
        with pytest.raises(ReportgenError, match="target"):
            _run(name, probe, target=3)


# --- model tensors vs the routing oracle ---------------------------------------------------------

@pytest.fixture(scope="module")
def routed(tiny_net, probe):
    """The NumPy routing oracle run on the model's own votes: (votes, class capsules, coupling)."""
    votes = np.asarray(tiny_net.class_caps.votes(probe["primary_capsules"]))
    v, c = oracle.dynamic_routing(votes, tiny_net.params.class_caps.routing_iterations)
    return votes, v, c


def test_coupling_matches_routing_oracle(probe, routed):
    votes, v, c = routed
    np.testing.assert_allclose(probe["routing:primary_caps"], c, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(probe["class_capsules"], v, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(probe["routing:primary_caps"].sum(axis=-1), 1.0, atol=1e-5)
    # The model's lengths are the exact lengths of its class capsules (no epsilon floor).
    np.testing.assert_allclose(probe["lengths"], np.linalg.norm(v, axis=-1), rtol=1e-4, atol=1e-7)


# --- predictions and class capsules: the model's own tensors ------------------------------------

def test_predictions_and_class_capsules(probe):
    np.testing.assert_array_equal(_run("predictions", probe)["lengths"], probe["lengths"])
    result = _run("class_capsules", probe)
    np.testing.assert_array_equal(result["capsules"], probe["class_capsules"])
    np.testing.assert_array_equal(result["lengths"], probe["lengths"])


# --- a batch gives the same result as item by item -----------------------------------------------

@pytest.mark.parametrize("name, options", [
    ("predictions", {}),
    ("rpv", {"method": "modified"}),
    ("rpv", {"method": "original"}),
    ("gradcam_pp", {"layer": "conv1"}),
    ("gradcam_pp", {"layer": "primary_conv"}),
    ("primary_heatmaps", {}),
    ("conv_feature_maps", {}),
    ("class_capsules", {}),
    ("decoder_length", {}),
    ("decoder_perturbation", {}),
])
def test_batch_equals_item_by_item(name, options, tiny_net, images, probe):
    whole = _run(name, probe, **options)
    singles = [_run(name, run_probe(tiny_net, images[i:i + 1]), **options)
               for i in range(len(images))]
    for key, value in whole.items():
        assert value.shape[0] == len(images)
        stacked = np.concatenate([s[key] for s in singles])
        np.testing.assert_allclose(value, stacked, rtol=1e-4, atol=1e-5, err_msg=key)
