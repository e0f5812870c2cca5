"""Techniques against NumPy oracles on a tiny CapsNet; batch == item by item."""

from __future__ import annotations

import dataclasses
import json
from importlib import import_module

import numpy as np
import pytest
from reference import analyses, capsules as oracle

from reportgen.errors import ReportgenError
from reportgen.probe.probe import ProbeBatch, run_probe
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
    module = import_module(f"reportgen.techniques.{name}")
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


@pytest.mark.parametrize("method", ["modified", "original"])
def test_rpv_matches_oracle(method, tiny_net, probe, routed):
    _, v, c = routed
    expected = analyses.rpv(probe["primary_capsules"], c, v, tiny_net.grid_shape,
                            tiny_net.params.primary.types, method)
    maps = _run("rpv", probe, method=method)["maps"]
    assert maps.dtype == np.float32 and maps.shape == (len(probe), 3, 4, 4)
    assert np.abs(expected).max() > 0
    np.testing.assert_allclose(maps, expected, rtol=2e-4, atol=1e-6 * np.abs(expected).max())


# --- primary capsules ----------------------------------------------------------------------------

def test_primary_heatmaps_are_squashed_primary_conv_lengths(tiny_net, probe):
    gh, gw = tiny_net.grid_shape
    types, dims = tiny_net.params.primary.types, tiny_net.params.primary.dims
    poses = probe["conv:primary_conv"].reshape(len(probe), gh, gw, types, dims)
    expected = np.linalg.norm(oracle.squash(poses), axis=-1)
    result = _run("primary_heatmaps", probe)
    assert result["lengths"].dtype == np.float32
    np.testing.assert_allclose(result["lengths"], expected, rtol=1e-5, atol=1e-6)


def test_primary_capsule_order_with_hand_set_weights(make_net):
    """One bright pixel lights exactly one known (row, col, type) capsule of length 0.8."""
    net = make_net(seed=3)
    conv1 = net.model.get_layer("conv1")
    kernel = np.zeros(conv1.kernel.shape, np.float32)
    kernel[1, 1, 0, 0] = 1.0                     # filter 0 copies the pixel under its centre
    conv1.set_weights([kernel, np.zeros(conv1.bias.shape, np.float32)])
    types, dims = 4, 4
    kernel = np.zeros(net.primary_conv.kernel.shape, np.float32)
    kernel[1, 1, 0, 2 * dims:3 * dims] = 1.0     # type 2 reads filter 0 under its centre tap
    net.primary_conv.set_weights([kernel, np.zeros(net.primary_conv.bias.shape, np.float32)])
    row, col = 1, 2
    image = np.zeros((1, 12, 12, 1), np.float32)
    image[0, 2 * row + 2, 2 * col + 2, 0] = 1.0  # conv1 (r, c) = image (r+1, c+1); stride 2
    batch = run_probe(net, image)
    lengths = _run("primary_heatmaps", batch)["lengths"]
    expected = np.zeros((1, 4, 4, types), np.float32)
    expected[0, row, col, 2] = 0.8               # |s| = 2 -> squash length 4 / 5
    np.testing.assert_allclose(lengths, expected, atol=1e-6)
    gw = net.grid_shape[1]
    capsule_lengths = np.linalg.norm(batch["primary_capsules"][0], axis=-1)
    assert np.argmax(capsule_lengths) == (row * gw + col) * types + 2


# --- conv layers ---------------------------------------------------------------------------------

def test_conv_feature_maps_and_dead_filters(make_net, images):
    net = make_net(seed=4)
    conv1 = net.model.get_layer("conv1")
    kernel, bias = (w.numpy() for w in (conv1.kernel, conv1.bias))
    bias[3] = -100.0                             # filter 3 can never fire on [0, 1] inputs
    conv1.set_weights([kernel, bias])
    batch = run_probe(net, images, gradients=False)
    result = _run("conv_feature_maps", batch, layer="conv1")
    np.testing.assert_array_equal(result["maps"], batch["conv:conv1"])
    assert result["maps"].shape == (5, 10, 10, 8) and result["dead"].shape == (5, 8)
    expected = (batch["conv:conv1"].reshape(5, -1, 8).max(axis=1) == 0).astype(np.float32)
    np.testing.assert_array_equal(result["dead"], expected)
    assert result["dead"][:, 3].all()


def test_conv_kernels(tiny_net, probe):
    result = _run("conv_kernels", probe, layer="conv1")
    assert _technique("conv_kernels").scope == "checkpoint"
    assert result["kernels"].shape == (3, 3, 1, 8) and result["kernels"].dtype == np.float32
    np.testing.assert_array_equal(result["kernels"],
                                  tiny_net.model.get_layer("conv1").get_weights()[0])


def test_predictions_and_class_capsules(probe):
    np.testing.assert_array_equal(_run("predictions", probe)["lengths"], probe["lengths"])
    result = _run("class_capsules", probe)
    np.testing.assert_array_equal(result["capsules"], probe["class_capsules"])
    np.testing.assert_array_equal(result["lengths"], probe["lengths"])


# --- Grad-CAM++ ----------------------------------------------------------------------------------

@pytest.mark.parametrize("layer", ["conv1", "primary_conv"])
def test_gradcam_pp_matches_numpy_oracle(layer, probe):
    maps = _run("gradcam_pp", probe, layer=layer)["map"]
    features = probe[f"conv:{layer}"]
    assert maps.shape == features.shape[:3] and maps.dtype == np.float32
    scores = probe["lengths"][np.arange(len(probe)), probe["predicted"]]
    raw = np.stack([analyses.gradcam_plus_plus(a, g, s)
                    for a, g, s in zip(features, probe[f"grad:{layer}"], scores)])
    np.testing.assert_allclose(maps, analyses.minmax(raw), atol=1e-5)
    assert maps.min() >= 0 and maps.max() <= 1


def test_gradcam_pp_default_layer_is_conv1(probe):
    np.testing.assert_array_equal(_run("gradcam_pp", probe)["map"],
                                  _run("gradcam_pp", probe, layer="conv1")["map"])


@pytest.mark.parametrize("layer", ["conv1", "primary_conv"])
def test_gradcam_pp_matches_tf_keras_vis(layer, tiny_net, images, probe):
    import keras
    from tf_keras_vis.gradcam_plus_plus import GradcamPlusPlus
    from tf_keras_vis.utils.scores import CategoricalScore

    lengths_model = keras.Model(tiny_net.model.inputs,
                                tiny_net.model.get_layer("lengths").output)
    gradcam = GradcamPlusPlus(lengths_model, clone=False)
    predicted = [int(p) for p in probe["predicted"]]
    reference = gradcam(CategoricalScore(predicted), images, penultimate_layer=layer,
                        seek_penultimate_conv_layer=False, normalize_cam=False, expand_cam=False)
    reference = analyses.minmax(np.asarray(reference))
    ours = _run("gradcam_pp", probe, layer=layer)["map"]
    np.testing.assert_allclose(ours, reference, atol=5e-5)    # tf-keras-vis and ours agree to 5e-5
    for mine, theirs in zip(ours, reference):
        assert theirs.std() > 0
        assert np.corrcoef(mine.ravel(), theirs.ravel())[0, 1] >= 0.99


def test_gradcam_pp_needs_gradients(tiny_net, images):
    with pytest.raises(ReportgenError, match="gradients"):
        _run("gradcam_pp", run_probe(tiny_net, images, gradients=False))


# --- decoder -------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", [-1, 1])
def test_decoder_length(target, tiny_net, probe):
    result = _run("decoder_length", probe, target=target)
    batch, classes, dims = probe["class_capsules"].shape
    wanted = np.asarray(_params("decoder_length").lengths, np.float32)
    expected_target = probe["predicted"] if target == -1 else np.full(batch, target)
    np.testing.assert_array_equal(result["target"], expected_target.astype(np.float32))
    inputs = result["inputs"].reshape(batch, len(wanted), classes, dims)
    norms = np.linalg.norm(inputs, axis=-1)                              # (B, P, K)
    for b, t in enumerate(expected_target):
        np.testing.assert_allclose(norms[b, :, t], wanted, atol=1e-5)
        assert not np.delete(inputs[b], t, axis=1).any()                 # others masked
        direction = probe["class_capsules"][b, t] / np.linalg.norm(probe["class_capsules"][b, t])
        np.testing.assert_allclose(inputs[b, -1, t], direction, atol=1e-5)
    np.testing.assert_allclose(result["lengths"], np.tile(wanted, (batch, 1)), atol=1e-5)
    assert result["images"].shape == (batch, len(wanted), 12, 12, 1)
    decoded = np.asarray(tiny_net.decoder(result["inputs"].reshape(-1, classes * dims)))
    np.testing.assert_allclose(result["images"].reshape(decoded.shape), decoded, atol=1e-6)
    assert all(v.dtype == np.float32 for v in result.values())


def test_decoder_length_zero_capsule_stays_zero(tiny_net, probe):
    tensors = dict(probe.tensors, class_capsules=np.zeros_like(probe["class_capsules"]))
    result = _run("decoder_length", ProbeBatch(net=tiny_net, images=probe.images, tensors=tensors))
    assert np.isfinite(result["images"]).all()
    assert not result["inputs"].any() and not result["lengths"].any()


def test_decoder_perturbation(tiny_net, probe):
    result = _run("decoder_perturbation", probe)
    batch, classes, dims = probe["class_capsules"].shape
    deltas = np.asarray(_params("decoder_perturbation").deltas, np.float32)
    steps = len(deltas)
    assert result["images"].shape == (batch, dims, steps, 12, 12, 1)
    np.testing.assert_array_equal(result["deltas"], np.tile(deltas, (batch, 1)))
    inputs = result["inputs"].reshape(batch, dims, steps, classes, dims)
    for b, t in enumerate(probe["predicted"]):
        assert result["target"][b] == t
        assert not np.delete(inputs[b], t, axis=2).any()                 # others masked
        change = inputs[b, :, :, t] - probe["class_capsules"][b, t]      # (D, S, D)
        expected = np.eye(dims)[:, None, :] * deltas[None, :, None]
        np.testing.assert_allclose(change, expected, atol=1e-6)
    decoded = np.asarray(tiny_net.decoder(result["inputs"].reshape(-1, classes * dims)))
    np.testing.assert_allclose(result["images"].reshape(decoded.shape), decoded, atol=1e-6)


def test_decoder_chunks_give_the_same_images(monkeypatch, probe):
    whole = _run("decoder_perturbation", probe)["images"]
    monkeypatch.setattr(helpers, "DECODER_CHUNK", 7)
    np.testing.assert_allclose(_run("decoder_perturbation", probe)["images"], whole, atol=1e-6)


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


# --- activation maximization ---------------------------------------------------------------------

def test_activation_maximization(make_net, images):
    technique = _technique("activation_maximization")
    assert technique.scope == "checkpoint" and technique.experimental
    assert _params("activation_maximization") == technique.params_type(200, 0.05)
    tiny_net = make_net(seed=5)
    # A fresh net's zero biases put every ReLU of an all-black input exactly at 0, where its
    # gradient is 0 and the ascent cannot start; trained nets have non-zero biases.
    conv1 = tiny_net.model.get_layer("conv1")
    conv1.set_weights([conv1.kernel.numpy(), np.full(conv1.bias.shape, 0.1, np.float32)])
    probe = run_probe(tiny_net, images[:1], gradients=False)
    result = technique.compute(probe, _params("activation_maximization", steps=5))
    assert result["images"].shape == (3, 12, 12, 1) and result["lengths"].shape == (3, 3)
    assert result["images"].min() >= 0 and result["images"].max() <= 1
    assert result["images"].any()
    lengths = np.asarray(tiny_net.model(result["images"])["lengths"])
    np.testing.assert_allclose(result["lengths"], lengths, atol=1e-6)
    black = np.asarray(tiny_net.model(np.zeros((3, 12, 12, 1), np.float32))["lengths"])
    assert (np.diag(result["lengths"]) > np.diag(black)).all()
