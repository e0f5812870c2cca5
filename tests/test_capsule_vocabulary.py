"""The capsule vocabulary reaches networks reportgen does not ship: matrix poses of any shape,
pose-only capsules (no activation), class scores read out of the class poses by a learnt
layer (a capsule head all the same), routing weights normalised per convolutional window; and
what a network declares is checked on its own tensors (Tsai, Srivastava, Goh &
Salakhutdinov 2020's inverted dot-product attention routing is the case these describe)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from reportgen.capsnet.description import (CapsuleLayer, Head, ModelDescription,
                                           RoutingWeights, conv_stack, routing_spread)
from reportgen.capsnet.conv_windows import windows_between
from reportgen.capsnet.declarations import check_outputs, routing_normalisation_problem
from reportgen.contract import required_outputs, score_output
from reportgen.engine.model import not_applicable_reason
from reportgen.errors import ReportgenError
from reportgen.probe.probe import all_tensors, routing_entropy
from reportgen.techniques import get_technique

WINDOW = RoutingWeights(kind="toy_window_attention", words="attention routing weights",
                        lacks="toy window attention", sums_over="window", paths=True,
                        iterations=2, symbol="r")
PARENTS = RoutingWeights(kind="toy_class_attention", words="attention routing weights",
                         lacks="toy class attention", sums_over="parents", paths=True,
                         iterations=2, symbol="r")


def pose_only(readout="learnt", scores=""):
    """28x28 -> conv 5x5 s2 12x12x64 -> primary conv 3x3 10x10 x 8 types of 4x4 poses ->
    ConvCaps 3x3 s2 4x4 x 8 -> 10 class capsules of 4x4, every pose LayerNorm-ed."""
    convs = conv_stack((28, 28, 1), [("conv1", 64, 5, 2, "valid", "relu", ""),
                                     ("primary_conv", 128, 3, 1, "valid", "none",
                                      "primary_caps")])
    field = convs[-1].receptive_field
    primary = CapsuleLayer(name="primary_caps", pose="matrix", pose_shape=(4, 4), grid=(10, 10),
                           types=8, pose_size=16, activation="none", routing=WINDOW,
                           receptive_field=field)
    conv_caps = CapsuleLayer(name="conv_caps", pose="matrix", pose_shape=(4, 4), grid=(4, 4),
                             types=8, pose_size=16, activation="none", routing=PARENTS,
                             receptive_field=field.through((3, 3), (2, 2), (0, 0)),
                             kernel_size=(3, 3), strides=(2, 2))
    classes = CapsuleLayer(name="class_caps", pose="matrix", pose_shape=(4, 4), grid=None,
                           types=10, pose_size=16, activation="none")
    return ModelDescription(input_shape=(28, 28, 1), conv_layers=convs,
                            capsule_layers=(primary, conv_caps, classes),
                            head=Head(kind="capsules", classes=10, layer="class_caps",
                                      readout=readout, scores=scores))


def test_a_learnt_readout_stays_a_capsule_head():
    d = pose_only()
    assert (d.head.readout, d.head.scores) == ("learnt", "logits")
    assert {"class_capsules", "class_vectors", "routing_paths", "primary_capsules",
            "capsule_maps"} <= d.features
    assert not {"capsule_activations", "grid_activations", "vector_capsules", "logits",
                "matrix_capsules", "own_explanation"} & d.features
    assert d.class_vectors == "class_capsules"
    assert score_output(d) == "logits"
    assert d.class_scores == "logits read out of the class-capsule poses by a learnt layer"
    need = required_outputs(d)
    assert {"logits", "probabilities", "class_capsules", "primary_capsules",
            "primary_caps_routing", "conv_caps_routing"} <= set(need)
    assert not [n for n in need if n.endswith("_activations")]      # pose-only: none to give
    tensors = all_tensors(d)
    assert {"logits", "probabilities", "primary_capsules", "class_capsules"} <= tensors
    assert not {"primary_lengths", "activations:primary_caps"} & tensors


def test_what_a_pose_only_network_lacks_is_said_truly():
    d = pose_only()
    for name in ("class_capsules", "capsule_semantics", "routing_entropy", "predictions",
                 "gradcam_pp", "adversarial_robustness"):
        assert get_technique(name).applicable(d), name
    for name, clause in (("primary_heatmaps", "it has no activations on its capsule grids "
                                              "(its grid capsules are poses only)"),
                         ("rpv", "it has no capsule activations (its capsules are poses only)")):
        technique = get_technique(name)
        assert not technique.applicable(d)
        assert not_applicable_reason(technique.missing_features(d)) == clause


@pytest.mark.parametrize("change, message", [
    (dict(pose="matrix", pose_shape=None), "pose_shape"),
    (dict(pose="matrix", pose_shape=(3, 4)), "pose_shape"),
    (dict(pose="vector", pose_shape=(4, 4)), "pose_shape is for matrix poses"),
    (dict(pose="none", pose_size=0, pose_shape=None, activation="none"), "without a pose"),
])
def test_a_pose_that_does_not_add_up_is_refused(change, message):
    from dataclasses import replace

    d = pose_only()
    layers = (replace(d.capsule_layers[0], **change), *d.capsule_layers[1:])
    with pytest.raises(ValueError, match=message):
        ModelDescription(input_shape=d.input_shape, conv_layers=d.conv_layers,
                         capsule_layers=layers, head=d.head)


def test_pose_only_class_capsules_need_a_learnt_readout():
    with pytest.raises(ValueError, match="readout='learnt'"):
        pose_only(readout="")
    with pytest.raises(ValueError, match="cannot be read out by 'length'"):
        pose_only(readout="length")
    assert CapsuleLayer(name="m", pose="matrix4x4", grid=None, types=2, pose_size=16,
                        activation="logistic").pose_shape == (4, 4)


def softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def window_weights(rng, batch=2):
    """Inverted dot-product attention's weights into the 4x4 ConvCaps: a softmax over the 8
    parent types at each position, per child of each 3x3 window."""
    return softmax(rng.normal(size=(batch, 4, 4, 3, 3, 8, 8)), axis=-1)


def test_window_normalisation_is_checked_and_entropy_stays_below_its_maximum():
    d = pose_only()
    primary = d.capsule_layers[0]
    rng = np.random.default_rng(0)
    weights = window_weights(rng)
    assert routing_normalisation_problem(d, primary, weights) == ""
    # the same weights declared over each child's parents (as EM's are) do not sum to 1
    as_parents = RoutingWeights(**{**WINDOW.__dict__, "kind": "toy_other",
                                   "sums_over": "parents"})
    from dataclasses import replace

    problem = routing_normalisation_problem(d, replace(primary, routing=as_parents), weights)
    assert problem.startswith("their sums range over")
    windows = windows_between(primary, d.capsule_layers[1])
    entropy = routing_entropy(weights, windows, per_window=True)
    spread = routing_spread(d, "primary_caps")
    covered = spread > 0
    assert set(spread[covered]) == {8}
    assert np.all(entropy[:, covered] <= math.log(8) + 1e-6)
    assert np.all(entropy[:, ~covered] == 0)
    # uniform weights give exactly the maximum for every covered child
    uniform = routing_entropy(np.full_like(weights, 1 / 8), windows, per_window=True)
    np.testing.assert_allclose(uniform[:, covered], math.log(8), rtol=1e-6)
    # summed over windows (a child's weights over all windows as one distribution) it would
    # exceed log 8 for a child seen by several windows: the mistake normalising by the
    # declaration prevents
    summed = routing_entropy(np.full_like(weights, 1 / 8), windows, per_window=False)
    assert summed.max() > math.log(8) * 1.5


def fake_net(description, outputs, scores):
    """A network stand-in: `model` and `encoder` return the given arrays."""
    return SimpleNamespace(description=description,
                           model=lambda x, training=False: outputs,
                           encoder=lambda x, training=False: [outputs["class_capsules"],
                                                              scores])


def test_declared_scores_are_checked_on_a_batch():
    rng = np.random.default_rng(1)
    d = pose_only()
    dense = softmax(rng.normal(size=(4, 128, 10)), axis=-1)
    from reportgen.capsnet.description import parents_per_child

    reach = parents_per_child(d, "conv_caps")
    assert np.all(reach == 10)
    logits = rng.normal(0, 3, (4, 10)).astype(np.float32)
    outputs = {"class_capsules": rng.normal(size=(4, 10, 16)), "logits": logits,
               "probabilities": softmax(logits, 1), "primary_caps_routing": window_weights(rng, 4),
               "conv_caps_routing": dense}
    check_outputs(fake_net(d, outputs, logits), "toy")          # as declared: fine
    # logits returned where lengths are declared: refused in one line naming the fix
    as_lengths = pose_only(scores="lengths")
    with pytest.raises(ReportgenError) as err:
        check_outputs(fake_net(as_lengths, {**outputs, "lengths": logits}, logits), "toy")
    assert "declared lengths" in str(err.value) and "Head(scores='logits')" in str(err.value)
    assert "\n" not in str(err.value)
    # an encoder returning other scores than the model output it declares
    with pytest.raises(ReportgenError, match="encoder's class scores are not its model output"):
        check_outputs(fake_net(d, outputs, softmax(logits, 1)), "toy")
    # routing weights that do not sum as declared
    broken = {**outputs, "conv_caps_routing": dense * 1.5}
    with pytest.raises(ReportgenError, match="conv_caps_routing.*each child's parents"):
        check_outputs(fake_net(d, broken, logits), "toy")


def test_every_built_in_family_passes_its_own_declarations():
    from reportgen.sdk.testing import check_family, registered_families

    for name in registered_families():
        net = check_family(name)
        assert net.description.head.scores in ("lengths", "activations", "probabilities",
                                               "logits")


def test_declared_logits_are_attacked_as_logits():
    """A learnt readout's logits are the cross-entropy's own logits; lengths and probabilities
    are attacked through their log."""
    from reportgen.techniques.adversarial_robustness import capsule_logits

    logits = np.array([[2.0, -1.0, 0.5]], np.float32)
    lengths = np.array([[0.9, 0.1, 0.5]], np.float32)
    for scores, value, want in (("logits", logits, logits), ("lengths", lengths,
                                                              np.log(lengths))):
        net = SimpleNamespace(description=SimpleNamespace(head=SimpleNamespace(scores=scores)),
                              encoder=lambda x, training=False, v=value: [None, v])
        np.testing.assert_allclose(np.asarray(capsule_logits(net)(None)), want, rtol=1e-6)


def test_the_vote_attack_squashes_with_the_familys_own_squash():
    """Efficient-CapsNet (examples/efficient_capsnet) declares its squash (1 - e^-|s|) s/|s|
    (Mazzia et al. 2021, eq. 2): the vote attack scores classes by log |squash(mean_i
    u_hat[j|i])| with it, not with Sabour et al.'s."""
    from reportgen.sdk.testing import example_network, registered_families
    from reportgen.techniques.adversarial_robustness import vote_logits

    if "efficient_capsnet" not in registered_families():
        pytest.skip("examples/efficient_capsnet is not installed")
    net = example_network("efficient_capsnet")
    images = np.random.default_rng(3).uniform(0, 1, (2, 28, 28, 1)).astype(np.float32)
    got = np.asarray(vote_logits(net)(images))
    mean = np.asarray(net.votes(images), np.float64).mean(axis=1)
    n = np.linalg.norm(mean, axis=-1)
    np.testing.assert_allclose(got, np.log(1 - np.exp(-n)), rtol=1e-4, atol=1e-5)
    assert not np.allclose(got, np.log(n ** 2 / (1 + n ** 2)), atol=1e-3)


def test_matrix_poses_scored_by_their_length_give_primary_lengths():
    """A pose matrix whose Frobenius length is its activation (declared activation "length")
    has primary-capsule lengths to map like vector capsules: the probe serves them, so primary
    heatmaps and dead units read them rather than fail."""
    from dataclasses import replace

    from reportgen.probe.probe import available, expand_needs

    d = pose_only()
    layers = tuple(replace(c, activation="length", routing=None) for c in d.capsule_layers)
    layers = (replace(layers[0], routing=PARENTS), *layers[1:2], layers[2])
    layers = (layers[0], replace(layers[1], grid=None, kernel_size=None, strides=None,
                                 types=10, name="class_caps"))
    d = ModelDescription(input_shape=d.input_shape, conv_layers=d.conv_layers,
                         capsule_layers=layers, head=Head(kind="capsules", classes=10,
                                                          layer="class_caps"))
    assert d.head.readout == "length"
    assert expand_needs({"activations:<capsules>"}, d) == {"primary_lengths"}
    assert available("primary_lengths", d) and available("primary_capsules", d)
    for name in ("primary_heatmaps", "dead_units", "rpv"):
        assert get_technique(name).applicable(d), name
