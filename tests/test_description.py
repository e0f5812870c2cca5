"""The model description: built from params.toml alone, it agrees with the Keras model it builds,
and its receptive fields are what the layers actually see."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from conftest import TINY_PARAMS

from reportgen.capsnet.description import (INPUT_FIELD, CapsuleLayer, ConvLayer, Head,
                                           ModelDescription, ReceptiveField, conv_stack,
                                           describe)
from reportgen.settings.model_params import load_model_params, parse_model_params

DEEP = {"conv": [{"filters": 4, "kernel_size": 3}, {"filters": 6, "kernel_size": 3,
                                                     "strides": 2}],
        "primary": {"types": 2, "dims": 4, "kernel_size": 2, "strides": 1},
        "input_shape": [16, 16, 1]}
VARIANTS = {
    "tiny": {},
    "deep": DEEP,
    "no_decoder": {"decoder": {"enabled": False}},
    "no_routing": {"class_caps": {"dims": 4, "routing_iterations": 1, "weight_sharing": True}},
    # [[conv]] padding "same": 11 -> ceil(11 / 2) = 6 (one cell of padding before, two after)
    # -> 6 -> primary 3x3 s1 4x4
    "same_padding": {"conv": [{"filters": 4, "kernel_size": 4, "strides": 2, "padding": "same"},
                              {"filters": 6, "kernel_size": 3, "padding": "same"}],
                     "primary": {"types": 2, "dims": 4, "kernel_size": 3, "strides": 1},
                     "input_shape": [11, 11, 1]},
}


def _params(**overrides):
    return parse_model_params({**TINY_PARAMS, **overrides})


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_description_matches_the_built_model(name, make_net):
    net = make_net(**VARIANTS[name])
    description = describe(net.params)
    assert description == net.description
    shapes = {k: tuple(v.shape[1:]) for k, v in net.model.output.items()}
    for conv in description.conv_layers:
        assert shapes[conv.name] == (*conv.grid, conv.filters)
        config = net.model.get_layer(conv.name).get_config()
        assert tuple(config["kernel_size"]) == conv.kernel_size
        assert tuple(config["strides"]) == conv.strides and config["padding"] == conv.padding
    primary, classes = description.primary_capsules, description.class_capsules
    assert net.model.get_layer(primary.name) is net.primary_caps
    assert net.model.get_layer(classes.name) is net.class_caps
    assert shapes["primary_capsules"] == (primary.capsules, primary.pose_size)
    assert shapes["coupling"] == (primary.capsules, description.classes)
    assert shapes["class_capsules"] == (classes.types, classes.pose_size)
    assert primary.routing.kind == "dynamic_routing" and primary.routing.sums_over == "parents"
    assert primary.routing.iterations == net.class_caps.routing_iterations
    assert (description.decoder is None) == (net.decoder is None)
    if net.decoder is not None:
        assert shapes["reconstruction"] == description.decoder.output_shape
        assert tuple(net.decoder.input_shape[1:]) == (description.decoder.input_size,)
    # The aliases kept for older callers read the description.
    assert net.conv_layer_names == description.conv_layer_names
    assert net.grid_shape == primary.grid
    assert net.receptive_fields() == [c.receptive_field.rows for c in description.conv_layers]


def test_features():
    tiny = describe(_params())
    assert tiny.features == {"conv", "capsules", "vector_capsules", "primary_capsules",
                             "capsule_maps", "class_capsules", "routing_weights",
                             "dynamic_routing", "decoder", "class_vectors", "routing_paths",
                             "own_explanation", "votes", "capsule_activations",
                             "grid_activations"}
    assert tiny.capabilities == {"votes"}          # declared by its family (reportgen.contract)
    assert "decoder" not in describe(_params(decoder={"enabled": False})).features
    assert tiny.conv_layer_names == ("conv1", "primary_conv")
    assert [c.name for c in tiny.plain_conv_layers] == ["conv1"]
    assert tiny.layer("primary_conv").capsules == "primary_caps"
    hash(tiny)                                  # frozen: usable as a key by planners


def test_baseline_receptive_fields_by_hand():
    """MNIST: conv1 9x9 s1 -> (0, 9, 1); primary 9x9 s2 -> cell p sees rows 2p … 2p+16 of a
    6x6 grid, centres 8 … 18. LPcaps: primary 3x3 s1 -> (0, 11, 1) on 18x18."""
    mnist = describe(load_model_params("models/MNIST/params.toml"))
    assert mnist.receptive_field("conv1") == ReceptiveField((0, 0), (9, 9), (1, 1))
    field = mnist.primary_capsules.receptive_field
    assert field.rows == field.cols == (0, 17, 2) and mnist.primary_capsules.grid == (6, 6)
    assert field.centre(0, 5) == (8.0, 18.0)
    lpcaps = describe(load_model_params("models/MNIST_LPcaps/params.toml"))
    assert lpcaps.primary_capsules.receptive_field.rows == (0, 11, 1)
    assert lpcaps.primary_capsules.capsules == 10_368


def _seen_pixels(model, names, input_hw):
    """For each layer, (h, w, H, W) bool: does cell (r, c) see input pixel (y, x)? Measured on
    the Keras layers: positive kernels, zero biases, one lit pixel per image."""
    import keras

    height, width = input_hw
    for layer in model.layers:
        if isinstance(layer, keras.layers.Conv2D):
            layer.set_weights([np.full(layer.kernel.shape, 0.01, np.float32),
                               np.zeros(layer.bias.shape, np.float32)])
    pixels = np.eye(height * width, dtype=np.float32).reshape(-1, height, width, 1)
    outputs = model(pixels)
    return {n: np.moveaxis(np.asarray(outputs[n]).max(-1) > 0, 0, -1).reshape(
        *outputs[n].shape[1:3], height, width) for n in names}


def _expected(field: ReceptiveField, grid, input_hw):
    seen = np.zeros((*grid, *input_hw), bool)
    for r in range(grid[0]):
        for c in range(grid[1]):
            y0, x0 = field.start[0] + r * field.stride[0], field.start[1] + c * field.stride[1]
            seen[r, c, max(y0, 0):y0 + field.size[0], max(x0, 0):x0 + field.size[1]] = True
    return seen


@pytest.mark.parametrize("name", ["tiny", "deep", "same_padding"])
def test_receptive_fields_are_what_the_model_sees(name, make_net):
    net = make_net(**VARIANTS[name])
    description = net.description
    names = description.conv_layer_names
    seen = _seen_pixels(net.model, names, description.input_shape[:2])
    for conv in description.conv_layers:
        np.testing.assert_array_equal(
            seen[conv.name], _expected(conv.receptive_field, conv.grid,
                                       description.input_shape[:2]), err_msg=conv.name)


def test_same_padding_and_uneven_input_geometry():
    """conv_stack's rule for 'same' padding (TensorFlow's: extra padding after) and non-square
    inputs, against Keras Conv2D layers."""
    import keras

    layers = [("a", 3, 3, 2, "same", "relu", ""), ("b", 2, 4, 1, "same", "relu", ""),
              ("c", 2, 3, 2, "valid", "relu", "")]
    stack = conv_stack((11, 14, 1), layers)
    image = keras.Input((11, 14, 1))
    x, outputs = image, {}
    for name, filters, kernel, stride, padding, _, _ in layers:
        x = keras.layers.Conv2D(filters, kernel, strides=stride, padding=padding,
                                activation="relu", name=name)(x)
        outputs[name] = x
    model = keras.Model(image, outputs)
    seen = _seen_pixels(model, [c.name for c in stack], (11, 14))
    for conv in stack:
        assert tuple(model.output[conv.name].shape[1:3]) == conv.grid
        np.testing.assert_array_equal(seen[conv.name],
                                      _expected(conv.receptive_field, conv.grid, (11, 14)),
                                      err_msg=conv.name)
    assert stack[0].receptive_field.start == (-1, 0) and stack[0].grid == (6, 7)


def test_a_cnn_description_plans_only_conv_techniques():
    """A plain CNN (logits head, no capsules) gets the conv techniques and what any classifier
    has (predictions, Grad-CAM++, affine and adversarial robustness: Gu 2022 compares CNNs on
    them; the draw panel runs any network); every other technique is reported as not applicable, with the features it lacks."""
    from reportgen.engine.step import plan
    from reportgen.techniques import BUILT_IN, all_techniques

    convs = conv_stack((28, 28, 1), [("conv1", 8, 5, 1, "valid", "relu", ""),
                                     ("conv2", 8, 5, 2, "valid", "relu", "")])
    cnn = ModelDescription(input_shape=(28, 28, 1), conv_layers=convs, capsule_layers=(),
                           head=Head(kind="logits", classes=10, layer="logits"))
    assert cnn.features == {"conv", "logits"}
    own = [t for t in all_techniques() if t.name in BUILT_IN]    # reportgen's (not plug-ins')
    result = plan(own, cnn)
    applicable = ["adversarial_robustness", "affine_robustness", "clrp_evaluation",
                  "conv_feature_maps", "conv_kernels", "draw_panel", "gradcam_pp", "lrp_clrp",
                  "predictions"]
    assert sorted({t.name for t, _ in result.variants}) == applicable
    assert [p.layer for t, p in result.variants if t.name == "conv_kernels"] == ["conv1",
                                                                                 "conv2"]
    missing = {t.name: m for t, m in result.not_applicable}
    assert missing["rpv"] >= {"routing_paths", "class_capsules"}
    assert missing["live_decoder"] >= {"decoder"}
    assert missing["capsule_semantics"] == {"class_vectors"}
    assert missing["pose_space"] == {"class_capsules"}        # no capsule poses to project
    # affnist_benchmark applies to any classifier of its 40x40 input: here it says why not
    assert missing["affnist_benchmark"] == ("its input is 28x28x1, not the affine benchmark's "
                                            "40x40 grayscale digits")
    # the MultiMNIST analyses apply only to models of two classes per image (Technique.labels),
    # and are no gap on a single-label model's pages
    silent = {"multimnist_pair", "multimnist_segmentation", "explanation_localisation"}
    assert not silent & set(missing)
    assert len(missing) == len(own) - len(applicable) - len(silent)


def test_describe_and_plan_without_tensorflow():
    code = (
        "import sys\n"
        "from reportgen.settings.model_params import load_model_params\n"
        "from reportgen.capsnet.description import describe\n"
        "from reportgen.engine.step import plan\n"
        "from reportgen.techniques import all_techniques\n"
        "d = describe(load_model_params('models/MNIST_NoDecoder/params.toml'))\n"
        "names = {t.name for t, _ in plan(all_techniques(), d).variants}\n"
        "assert 'rpv' in names and 'decoder_length' not in names, names\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')]\n"
        "assert not heavy, heavy\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_layer_lookup_names_the_known_layers():
    from reportgen.errors import ReportgenError

    with pytest.raises(ReportgenError, match="conv1, primary_conv, primary_caps, class_caps"):
        describe(_params()).layer("conv9")
    with pytest.raises(ValueError, match="pose"):
        ModelDescription(input_shape=(8, 8, 1), conv_layers=(),
                         capsule_layers=(CapsuleLayer(name="x", pose="tensor", grid=None,
                                                      types=2, pose_size=4,
                                                      activation="length"),),
                         head=Head("capsules", 2, "x"))
    for pose, size, activation in (("none", 4, "logistic"), ("vector", 0, "logistic"),
                                   ("none", 0, "length")):    # no pose: an activation only
        with pytest.raises(ValueError, match="without a pose"):
            ModelDescription(input_shape=(8, 8, 1), conv_layers=(),
                             capsule_layers=(CapsuleLayer(name="x", pose=pose, grid=None,
                                                          types=2, pose_size=size,
                                                          activation=activation),),
                             head=Head("capsules", 2, "x"))
    assert INPUT_FIELD.through((3, 3), (2, 2), (0, 0)) == ReceptiveField((0, 0), (3, 3), (2, 2))
    assert isinstance(describe(_params()).conv_layers[0], ConvLayer)


def test_render_context_reads_the_geometry_from_the_description(tiny_net):
    """Renderers get receptive fields from the description (one place computes them); the
    older per-conv-layer tuples are derived from it."""
    from reportgen.figures.figure import RenderContext

    ctx = RenderContext(model="m", step="1-1", class_names=("a", "b", "c"),
                        description=tiny_net.description)
    assert ctx.receptive_fields == tuple(tiny_net.receptive_fields()) == ((0, 3, 1), (0, 5, 2))
    assert ctx.conv_layer_names == tiny_net.conv_layer_names
    assert ctx.receptive_field() == tiny_net.description.primary_capsules.receptive_field
    assert ctx.receptive_field("conv1").rows == (0, 3, 1)
    assert ctx.receptive_field("conv9") is None
    assert RenderContext(model="m", step="s", class_names=()).receptive_field() is None


@pytest.mark.parametrize("name", ["primary_heatmaps", "rpv", "gradcam_pp"])
def test_overlays_are_the_same_from_the_description_or_the_old_tuples(name, tiny_net, probe):
    from reportgen.capsnet.model_words import gradient_words
    from reportgen.figures.figure import RenderContext
    from reportgen.techniques import get_technique

    technique = get_technique(name)
    common = dict(model="m", step="1-1", class_names=("a", "b", "c"),
                  image=probe.images[0])
    new = RenderContext(**common, description=tiny_net.description)
    old = RenderContext(**common, receptive_fields=tuple(tiny_net.receptive_fields()),
                        conv_layer_names=tiny_net.conv_layer_names)
    # without a description a caption names no family's score: Grad-CAM++'s gradients are
    # "of the class score" there, and of the model's own score (its length) with one
    own = gradient_words(tiny_net.description)
    for params in technique.variants(tiny_net):
        result = {k: v[0] for k, v in technique.compute(probe, params).items()}
        drawn = [(f.name, f.data, f.caption.replace(own, "the class score"))
                 for f in technique.render(result, params, new)]
        assert drawn == [(f.name, f.data, f.caption)
                         for f in technique.render(result, params, old)]
        assert "placed by receptive field" in drawn[0][2]
        if name == "gradcam_pp":
            assert "gradients of the class capsule's length" in \
                technique.render(result, params, new)[0].caption


def test_not_applicable_names_the_most_fundamental_lack():
    from reportgen.capsnet.description import feature_words, lacks_words
    from reportgen.engine.model import not_applicable_reason

    # every feature a technique may need is worded, the families' routing kinds too
    assert set(lacks_words()) == set(feature_words())
    assert {"dynamic_routing", "em_routing", "attention"} <= set(feature_words())
    assert not_applicable_reason(frozenset({"em_routing"})) == "it has no EM routing"
    # a CNN lacks capsules, routing weights and attention: the capsules are what to name
    assert not_applicable_reason(frozenset({"attention", "routing_weights", "capsules"})) == \
        "it has no capsule layers"
    assert not_applicable_reason(frozenset({"decoder"})) == "it has no reconstruction decoder"
    # an EM model's decoder analyses: the decoder is what it lacks, not merely vector capsules
    assert not_applicable_reason(frozenset({"vector_capsules", "decoder"})) == \
        "it has no reconstruction decoder"
    assert not_applicable_reason(frozenset()) == "it does not apply here"


def test_what_each_family_declares_picks_the_techniques_paths():
    """The class vectors, the vote attack and the built-in explanation follow from what a
    description declares (poses, routing weights), the same for every family as before they
    were read from routing names: votes where the family declares them (the CapsNet's, whichever
    axis its softmax runs over), the built-in explanation where it declares one (GraCapsNet's
    pooling map), RPV through the routing weights of every other routed family (EM,
    Self-Routing), nothing for a CNN."""
    from em_fixture import TINY_EM
    from family_nets import TINY_GRACAPS, TINY_SELF_ROUTING, tiny_cnn

    from reportgen.techniques.adversarial_robustness import has_votes
    from reportgen.techniques.explanation_fidelity import builtin_explanation

    inputs_softmax = {**TINY_PARAMS, "class_caps": {**TINY_PARAMS["class_caps"],
                                                    "routing_softmax": "inputs"}}
    models = {"capsnet": (TINY_PARAMS, "class_capsules", True, "rpv_modified"),
              "capsnet_inputs": (inputs_softmax, "class_capsules", True, "rpv_modified"),
              "gracaps": (TINY_GRACAPS, "class_capsules", False, "builtin"),
              "em": (TINY_EM, "class_capsules", False, "rpv_modified"),
              "self_routing": (TINY_SELF_ROUTING, None, False, "rpv_modified"),
              "cnn_cr": (tiny_cnn("cr"), "features", False, None),
              "cnn_avg": (tiny_cnn("avg"), None, False, None)}
    for name, (raw, vectors, votes, builtin) in models.items():
        description = describe(parse_model_params(raw))
        got = (description.class_vectors, has_votes(description),
               builtin_explanation(description))
        assert got == (vectors, votes, builtin), name
        assert ("class_vectors" in description.features) == (vectors is not None), name
    assert describe(parse_model_params(inputs_softmax)).primary_capsules.routing.sums_over \
        == "children"
