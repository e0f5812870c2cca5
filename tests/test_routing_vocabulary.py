"""An open routing vocabulary: a family describes its own kind of routing weights from its own
module (here: this test module), and the probe and the family-neutral routing analyses serve it
without naming it.

The kind declared is Self-Routing's (Hahn, Pyeon & Kim, NeurIPS 2019): each child capsule
predicts its coupling to the parents from its own pose, c_ij = softmax_j(W_route u_i), with no
iterations; a parent's activation is a_j = sum_i c_ij a_i / sum_i a_i and its pose the
c_ij a_i-weighted mean of the votes. The toy network and its NumPy reference are written here
from those equations.
"""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.capsnet.description import (CapsuleLayer, Head, ModelDescription, RoutingWeights,
                                           conv_stack, feature_words)
from reportgen.engine.model import not_applicable_reason
from reportgen.probe.probe import expand_needs, run_probe
from reportgen.settings.families import Family, register, registered, unregister
from reportgen.techniques import get_technique
from reportgen.techniques.base import Technique

# a kind of its own (the real Self-Routing family, reportgen.families.self_routing, declares
# "self_routing"): what a new family brings, declared here
SELF_ROUTING = RoutingWeights(kind="toy_routing", words="toy coupling coefficients",
                              lacks="toy routing", sums_over="parents", paths=True,
                              iterations=0, symbol="c")
CLASSES, TYPES, DIMS, CLASS_DIMS = 3, 2, 4, 5
FAMILY = "toy_self_routing"


def _describe(_params=None) -> ModelDescription:
    convs = conv_stack((12, 12, 1), [("conv1", 4, 3, 1, "valid", "relu", ""),
                                     ("primary_conv", TYPES * (DIMS + 1), 3, 2, "valid", "none",
                                      "primary_caps")])
    primary = CapsuleLayer(name="primary_caps", pose="vector", grid=convs[-1].grid, types=TYPES,
                           pose_size=DIMS, activation="logistic", routing=SELF_ROUTING,
                           receptive_field=convs[-1].receptive_field)
    classes = CapsuleLayer(name="class_caps", pose="vector", grid=None, types=CLASSES,
                           pose_size=CLASS_DIMS, activation="logistic")
    return ModelDescription(input_shape=(12, 12, 1), conv_layers=convs,
                            capsule_layers=(primary, classes),
                            head=Head("capsules", CLASSES, "class_caps"))


def _build(_params=None):
    import keras
    from keras import layers, ops

    from reportgen.capsnet.network import Network, build_convs

    keras.utils.set_random_seed(3)
    description = _describe()
    primary = description.primary_capsules
    gh, gw = primary.grid
    image = keras.Input((12, 12, 1), name="image")
    x, outputs, _ = build_convs(description, image)
    caps = layers.Reshape((gh * gw * TYPES, DIMS + 1))(x)
    poses = caps[..., :DIMS]
    active = ops.sigmoid(caps[..., DIMS])                                     # (B, N)
    route = layers.Dense(CLASSES, use_bias=False, name="route")
    vote = layers.Dense(CLASSES * CLASS_DIMS, use_bias=False, name="vote")
    coupling = ops.softmax(route(poses), axis=-1)                             # (B, N, K)
    votes = ops.reshape(vote(poses), (-1, gh * gw * TYPES, CLASSES, CLASS_DIMS))
    weight = coupling * active[..., None]
    class_act = ops.sum(weight, axis=1) / ops.sum(active, axis=1, keepdims=True)
    class_poses = ops.sum(weight[..., None] * votes, axis=1) / \
        ops.sum(weight, axis=1)[..., None]
    outputs.update({"primary_caps_activations": ops.reshape(active, (-1, gh, gw, TYPES)),
                    "primary_caps_routing": coupling, "class_capsules": class_poses,
                    "activations": class_act})
    model = keras.Model(image, outputs, name="toy_self_routing")
    return Network(params=None, description=description, model=model,
                   encoder=keras.Model(image, [class_poses, class_act]))


@pytest.fixture
def declared():
    """The toy family registered with its routing kind, for one test."""
    register(Family(name=FAMILY, describe=_describe, build=_build, count_params=lambda p: 0,
                    display_name=lambda p: "Toy-SR", routing=(SELF_ROUTING,)))
    yield
    unregister(FAMILY)


@pytest.fixture(scope="module")
def net_and_images():
    images = np.random.default_rng(0).random((4, 12, 12, 1), dtype=np.float32)
    return _build(), images


def _reference(net, images):
    """Coupling, primary activations and class activations from the weights, in NumPy."""
    outputs = net.model(images, training=False)
    caps = outputs["primary_conv"].numpy().reshape(len(images), -1, DIMS + 1).astype(np.float64)
    logits = caps[..., :DIMS] @ net.model.get_layer("route").get_weights()[0]
    logits -= logits.max(-1, keepdims=True)
    coupling = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    active = 1.0 / (1.0 + np.exp(-caps[..., DIMS]))
    class_act = (coupling * active[..., None]).sum(1) / active.sum(1, keepdims=True)
    return coupling, active, class_act


def test_a_routing_kind_declared_by_its_family_is_a_feature(declared):
    description = _describe()
    assert {"routing_weights", "routing_paths", "toy_routing"} <= description.features
    assert not {"dynamic_routing", "em_routing", "attention"} & description.features
    assert feature_words()["toy_routing"] == \
        "the routing weights are toy coupling coefficients"
    # a technique may require it once its family is registered ...
    Technique(name="sr_only", title="t", layer="class", scope="input", needs=frozenset(),
              applies_to=frozenset({"toy_routing"}), params_type=object, version=1,
              compute=lambda b, p: {}, render=lambda a, p, c: [])
    # ... and a model without it is told so in one plain clause
    assert not_applicable_reason(frozenset({"toy_routing"})) == "it has no toy routing"
    assert not_applicable_reason(frozenset({"toy_routing", "capsules"})) == \
        "it has no capsule layers"


def test_an_undeclared_routing_kind_is_refused():
    assert FAMILY not in registered()
    with pytest.raises(ValueError, match="applies_to must name features.*'toy_routing'"):
        Technique(name="sr_only", title="t", layer="class", scope="input", needs=frozenset(),
                  applies_to=frozenset({"toy_routing"}), params_type=object, version=1,
                  compute=lambda b, p: {}, render=lambda a, p, c: [])
    with pytest.raises(ValueError, match="sums_over"):
        RoutingWeights(kind="x", words="x", lacks="x", sums_over="classes", paths=True)


def test_the_probe_gives_its_routing_and_entropy(net_and_images):
    net, images = net_and_images
    needs = expand_needs({"routing:<routed>", "routing_entropy:<routed>",
                          "activations:<capsules>", "activations"}, net.description)
    assert needs == {"routing:primary_caps", "routing_entropy:primary_caps",
                     "activations:primary_caps", "lengths"}
    batch = run_probe(net, images, needs)
    coupling, active, _ = _reference(net, images)
    got = batch["routing:primary_caps"]
    np.testing.assert_allclose(got, coupling, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-5)     # sums_over = "parents"
    entropy = -(coupling * np.log(coupling)).sum(-1)
    np.testing.assert_allclose(batch["routing_entropy:primary_caps"], entropy, rtol=1e-4)
    np.testing.assert_allclose(batch["activations:primary_caps"].reshape(len(images), -1),
                               active, rtol=1e-5)


def test_routing_path_visualization_applies(net_and_images):
    net, images = net_and_images
    rpv = get_technique("rpv")
    assert rpv.applicable(net)
    batch = run_probe(net, images, rpv.needs_for(rpv.params_type(), net))
    coupling, active, class_act = _reference(net, images)
    gh, gw = net.description.primary_capsules.grid
    for method, power in (("modified", 1), ("original", 2)):
        maps = rpv.compute(batch.restricted(rpv.needs_for(None, net)),
                           rpv.params_type(method=method))["maps"]
        # m_ij = a_i (c_ij a_j)^p, mean over the types at each grid location
        paths = active[..., None] * (coupling * class_act[:, None, :]) ** power
        want = paths.reshape(len(images), gh, gw, TYPES, CLASSES).mean(3).transpose(0, 3, 1, 2)
        np.testing.assert_allclose(maps, want, rtol=1e-4, atol=1e-7)


def test_dynamic_routing_analyses_do_not_apply(net_and_images, declared):
    net, _ = net_and_images
    from reportgen.techniques import all_techniques

    gracaps = get_technique("gracaps_attention")
    assert not gracaps.applicable(net)
    assert not_applicable_reason(gracaps.missing_features(net)) == \
        "it has no graph-pooling attention of GraCapsNet (Gu, Wu & Tresp 2021)"
    for technique in all_techniques():
        if not technique.applicable(net):
            missing = technique.missing_features(net) or technique.unsuited_reason(net)
            reason = not_applicable_reason(missing)
            assert reason.startswith(("it has no ", "its ")) and "." not in reason, \
                technique.name


def test_routing_entropy_and_dead_units_apply(net_and_images, declared):
    from reportgen.probe.evaluation import EvalBatch

    net, images = net_and_images
    evaluation = EvalBatch(net, images, np.array([0, 1, 2, 0]), ("a", "b", "c"))
    entropy, dead, votes = (get_technique(n) for n in ("routing_entropy", "dead_units",
                                                       "vote_agreement"))
    assert entropy.applicable(net) and dead.applicable(net)
    assert not_applicable_reason(votes.missing_features(net)) == \
        "it has no votes of its capsules that a technique can read"
    arrays = entropy.compute(evaluation.restricted(entropy.needs_for(None, net)),
                             entropy.params_type())
    coupling, active, _ = _reference(net, images)
    h = -(coupling * np.log(coupling)).sum(-1)
    np.testing.assert_allclose(arrays["entropy_image_mean"], h.mean(1), rtol=1e-4)
    np.testing.assert_allclose(arrays["layer_entropy_weighted_mean"][0],
                               (h * active).sum() / active.sum() / np.log(CLASSES), rtol=1e-4)
    assert arrays["entropy_hist"].sum() == h.size
    units = dead.compute(evaluation.restricted(dead.needs_for(None, net)), dead.params_type())
    gh, gw = net.description.primary_capsules.grid
    np.testing.assert_allclose(units["type_max_activation_primary_caps"],
                               active.reshape(-1, gh * gw, TYPES).max((0, 1)), rtol=1e-5)
