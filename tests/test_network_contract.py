"""The network contract (reportgen/contract.py): every registered family's network gives the
standard outputs its description calls for and what its family declares (capabilities, its own
outputs), checked on every build; a network that breaks it is refused in one line naming the
family; every family's model survives a Keras `.keras` save and load (the Keras layer-test
habit); its architecture table adds up to its trainable parameters."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from reportgen.contract import CAPABILITIES, required_outputs
from reportgen.errors import ReportgenError
from reportgen.settings import families
from reportgen.settings.families import example_params, registered
from reportgen.settings.model_params import parse_model_params

FAMILIES = registered()


def _example(name: str, seed: int = 0):
    import keras

    from reportgen.capsnet.architecture import build_capsnet

    keras.utils.set_random_seed(seed)
    return build_capsnet(parse_model_params(example_params(name)))


@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_keeps_the_contract(name):
    from reportgen.capsnet.description import describe

    net = _example(name)
    family = families.family(name)
    assert net.description == describe(net.params)
    assert family.capabilities <= net.description.features
    assert set(family.outputs) <= set(net.description.outputs)
    outputs = set(net.model.output)
    assert set(required_outputs(net.description)) <= outputs
    assert (net.decoder is None) == (net.description.decoder is None)
    x = np.random.default_rng(1).random((2, *net.description.input_shape), dtype=np.float32)
    if "votes" in net.description.capabilities:
        votes = np.asarray(net.votes(x))
        # the votes of the capsules routed into the class capsules (the layer before them)
        layers = net.description.capsule_layers
        routed = layers[[c.name for c in layers].index(net.description.head.layer) - 1]
        assert votes.shape == (2, routed.capsules, net.description.classes,
                               net.description.class_capsules.pose_size)
    if "explanation" in net.description.capabilities:
        primary = net.description.primary_capsules
        maps = np.asarray(net.model(x, training=False)["explanation"])
        assert maps.shape == (2, net.description.classes, *primary.grid)


def test_the_capabilities_serve_what_they_promise():
    """GraCapsNet's explanation output is E, the mean over heads of its attention on the grid
    (Gu, Wu & Tresp 2021), as reportgen.families.gracapsnet.attention.numbers computes it in
    NumPy; the CapsNet's votes are u_hat[j|i] = W_ij u_i of its primary capsules."""
    from reportgen.families.gracapsnet.attention.numbers import explanation_maps

    net = _example("gracapsnet")
    x = np.random.default_rng(2).random((3, 12, 12, 1), dtype=np.float32)
    out = net.model(x, training=False)
    np.testing.assert_allclose(np.asarray(out["explanation"]),
                               explanation_maps(np.asarray(out["attention"]),
                                                net.description.primary_capsules.grid),
                               rtol=1e-5, atol=1e-7)
    capsnet = _example("capsnet")
    primary = np.asarray(capsnet.model(x, training=False)["primary_capsules"])     # (B, N, D)
    kernel = np.asarray(capsnet.class_caps.kernel)                               # (N, K, D', D)
    want = np.einsum("nkod,bnd->bnko", kernel, primary)
    np.testing.assert_allclose(np.asarray(capsnet.votes(x)), want, rtol=1e-4, atol=1e-6)


def _breaking(**changes):
    """The CapsNet family with its build changed (a plug-in that breaks the contract)."""
    capsnet = families.family("capsnet")
    return dataclasses.replace(capsnet, name="broken_caps", routing=(), modules=(),
                               **changes)


@pytest.mark.parametrize("what, change, words", [
    ("no coupling output", "drop", "its model has no output 'coupling' (routing weights of "
                                   "primary_caps)"),
    ("votes declared, none given", "votes", "declares the capability 'votes' but its Network "
                                            "has no `votes` function"),
    ("decoder missing", "decoder", "its `decoder` must be given exactly when"),
])
def test_a_network_that_breaks_the_contract_is_refused_in_one_line(what, change, words):
    import keras

    from reportgen.capsnet.architecture import build_capsnet

    capsnet = families.family("capsnet")

    def build(params):
        net = capsnet.build(dataclasses.replace(params, family="capsnet"))
        net.params = params
        if change == "drop":
            outputs = {k: v for k, v in net.model.output.items() if k != "coupling"}
            net.model = keras.Model(net.model.inputs, outputs)
        elif change == "votes":
            net.votes = None
        else:
            net.decoder = None
        return net

    broken = _breaking(build=build, describe=capsnet.describe)
    families.register(broken)
    try:
        params = parse_model_params({**example_params("capsnet"), "family": "broken_caps"})
        with pytest.raises(ReportgenError) as err:
            build_capsnet(params)
    finally:
        families.unregister("broken_caps")
    message = str(err.value)
    assert "model family 'broken_caps' does not keep the network contract" in message, what
    assert words in message and "\n" not in message


@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_survives_a_keras_save_and_load(name, tmp_path):
    """`.keras` round trip: every layer registered as serialisable, its config complete."""
    import keras

    net = _example(name)
    x = np.random.default_rng(3).random((3, *net.description.input_shape), dtype=np.float32)
    want = net.model(x, training=False)
    path = tmp_path / f"{name}.keras"
    net.model.save(path)
    back = keras.saving.load_model(path)
    got = back(x, training=False)
    assert set(got) == set(want)
    for key in want:
        np.testing.assert_allclose(np.asarray(got[key]), np.asarray(want[key]), rtol=1e-6,
                                   atol=1e-7, err_msg=f"{name}: {key}")


@pytest.mark.parametrize("name", FAMILIES)
def test_the_architecture_table_adds_up_to_the_trainable_parameters(name):
    """BatchNorm's moving statistics (Self-Routing) are listed apart, not as trainable."""
    from reportgen.capsnet.param_count import count_trainable_params
    from reportgen.pages.assemble import architecture_rows

    net = _example(name)
    rows = architecture_rows(net)
    assert sum(r.params for r in rows) == net.trainable_params() == \
        count_trainable_params(net.params)
    statistics = sum(r.non_trainable for r in rows)
    assert statistics == int(sum(np.prod(w.shape) for w in net.model.non_trainable_weights))
    if name == "self_routing":
        assert statistics > 0


def test_what_a_description_leaves_out_is_declared():
    """What the layers of a description cannot express is said, one sentence each."""
    from reportgen.capsnet.description import describe

    sr = describe(parse_model_params(example_params("self_routing")))
    assert sr.leaves_out and all("BatchNorm" in s for s in sr.leaves_out)
    plain = describe(parse_model_params(example_params("capsnet")))
    assert plain.leaves_out == ()
    raw = example_params("capsnet")
    normed = describe(parse_model_params({**raw, "primary": {**raw["primary"],
                                                             "batch_norm": True}}))
    assert any("BatchNorm" in s for s in normed.leaves_out)
    assert set(CAPABILITIES) == {"votes", "explanation"}
