"""The two routing choices imported models need (class_caps.routing_softmax and
class_caps.detach_routing_votes): NumPy oracles, gradients, schema and defaults."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import TINY_PARAMS
from reference.capsules import softmax, squash
from reportgen.errors import ReportgenError
from reportgen.settings.model_params import parse_model_params


def routing_over_inputs(votes: np.ndarray, iterations: int):
    """gram-ai's routing, from its code: logits of zeros, probs = softmax over the input
    capsules (their dim 2), outputs = squash(sum_i probs * priors), logits += priors . outputs."""
    votes = np.asarray(votes, np.float64)
    v_all, c_all = [], []
    for u in votes:                                     # (N, K, D)
        logits = np.zeros(u.shape[:2])
        for r in range(iterations):
            c = softmax(logits, axis=0)
            v = squash(np.einsum("ij,ijd->jd", c, u))
            if r < iterations - 1:
                logits = logits + np.einsum("ijd,jd->ij", u, v)
        v_all.append(v)
        c_all.append(c)
    return np.stack(v_all), np.stack(c_all)


@pytest.mark.parametrize("iterations", [1, 3])
def test_routing_softmax_over_inputs_matches_the_oracle(iterations):
    from reportgen.families.capsnet.routing import dynamic_routing

    votes = np.random.default_rng(0).normal(size=(2, 12, 3, 4)).astype(np.float32)
    v, c = dynamic_routing(votes, iterations, softmax_over="inputs")
    v_ref, c_ref = routing_over_inputs(votes, iterations)
    np.testing.assert_allclose(np.asarray(v), v_ref, atol=1e-5)
    np.testing.assert_allclose(np.asarray(c), c_ref, atol=1e-6)
    np.testing.assert_allclose(np.asarray(c).sum(axis=1), 1.0, atol=1e-5)  # over the inputs
    if iterations == 1:   # uniform over the inputs: the mean vote, squashed
        np.testing.assert_allclose(np.asarray(v), squash(votes.mean(axis=1)), atol=1e-5)


def test_the_default_routing_is_unchanged():
    from reference.capsules import dynamic_routing as oracle
    from reportgen.families.capsnet.routing import dynamic_routing

    votes = np.random.default_rng(1).normal(size=(2, 12, 3, 4)).astype(np.float32)
    v, c = dynamic_routing(votes, 3)
    v_ref, c_ref = oracle(votes, 3)
    np.testing.assert_allclose(np.asarray(v), v_ref, atol=1e-5)
    np.testing.assert_allclose(np.asarray(c), c_ref, atol=1e-6)


def _twin_nets(**class_caps):
    """Two tiny nets with the same weights, the second with `class_caps` settings."""
    from reportgen.capsnet.architecture import build_capsnet

    base = parse_model_params(TINY_PARAMS)
    other = parse_model_params({**TINY_PARAMS, "class_caps": {**TINY_PARAMS["class_caps"],
                                                               **class_caps}})
    a, b = build_capsnet(base), build_capsnet(other)
    # Longer votes than at initialisation, so that routing really moves the couplings.
    a.class_caps.kernel.assign(a.class_caps.kernel * 20.0)
    b.model.set_weights(a.model.get_weights())
    return a, b


def test_detached_votes_give_the_same_outputs_and_gradients_through_fixed_couplings(images):
    import tensorflow as tf
    from keras import ops

    from reportgen.capsnet.ops import capsule_length
    from reportgen.capsnet.ops import squash as capsnet_squash

    plain, detached = _twin_nets(detach_routing_votes=True)
    assert detached.class_caps.detach_routing_votes and not plain.class_caps.detach_routing_votes
    x = tf.constant(images)
    out_p, out_d = plain.model(x), detached.model(x)
    for key in ("class_capsules", "coupling", "lengths", "reconstruction"):
        np.testing.assert_allclose(out_d[key].numpy(), out_p[key].numpy(), atol=1e-6)

    def grad(net, fixed_coupling=None):
        with tf.GradientTape() as tape:
            tape.watch(x)
            if fixed_coupling is None:
                lengths = net.model(x)["lengths"]
            else:   # the oracle: the couplings as constants, gradient through the votes only
                primary = net.model(x)["primary_capsules"]
                votes = net.class_caps.votes(primary)
                s = ops.einsum("bij,bijd->bjd", fixed_coupling, votes)
                lengths = capsule_length(capsnet_squash(s))
            target = ops.sum(ops.max(lengths, axis=-1))
        return tape.gradient(target, x).numpy()

    g_detached = grad(detached)
    g_fixed = grad(plain, fixed_coupling=tf.constant(out_p["coupling"].numpy()))
    g_plain = grad(plain)
    np.testing.assert_allclose(g_detached, g_fixed, atol=1e-6)
    # routing's own gradient is really gone
    assert np.abs(g_plain - g_detached).max() > 0.01 * np.abs(g_plain).max()


def test_the_model_with_inputs_softmax_routes_over_inputs(images):
    _, net = _twin_nets(routing_softmax="inputs", routing_iterations=2)
    out = net.model(images)
    coupling = out["coupling"].numpy()
    np.testing.assert_allclose(coupling.sum(axis=1), 1.0, atol=1e-5)
    votes = np.asarray(net.class_caps.votes(out["primary_capsules"]))
    v_ref, c_ref = routing_over_inputs(votes, 2)
    np.testing.assert_allclose(out["class_capsules"].numpy(), v_ref, atol=1e-5)
    assert net.description.primary_capsules.routing.sums_over == "children"


def test_class_caps_config_round_trips_the_new_settings():
    from reportgen.families.capsnet.layers import ClassCaps

    layer = ClassCaps(3, 4, routing_softmax="inputs", detach_routing_votes=True)
    again = ClassCaps.from_config(layer.get_config())
    assert (again.routing_softmax, again.detach_routing_votes) == ("inputs", True)
    with pytest.raises(ValueError, match="routing_softmax"):
        ClassCaps(3, 4, routing_softmax="classes_and_inputs")


def test_schema_validates_the_new_fields():
    with pytest.raises(ReportgenError, match=r"class_caps\.routing_softmax.*'classes', 'inputs'"):
        parse_model_params({**TINY_PARAMS, "class_caps": {"routing_softmax": "rows"}})
    with pytest.raises(ReportgenError, match=r"class_caps\.detach_routing_votes.*true or false"):
        parse_model_params({**TINY_PARAMS, "class_caps": {"detach_routing_votes": "yes"}})
    with pytest.raises(ReportgenError, match="imported_from"):
        parse_model_params({**TINY_PARAMS, "imported_from": 3})


def test_models_without_the_new_fields_keep_their_dict_and_cache_keys():
    """to_dict() (hashed into every cache key) leaves the new fields out at their defaults."""
    default = parse_model_params(TINY_PARAMS).to_dict()
    assert set(default["class_caps"]) == {"dims", "routing_iterations", "weight_sharing",
                                          "kernel_init_stddev"}
    assert "imported_from" not in default
    imported = parse_model_params({**TINY_PARAMS, "imported_from": "somewhere",
                                   "class_caps": {"routing_softmax": "inputs",
                                                  "detach_routing_votes": True}}).to_dict()
    assert imported["imported_from"] == "somewhere"
    assert imported["class_caps"]["routing_softmax"] == "inputs"
    assert imported["class_caps"]["detach_routing_votes"] is True
