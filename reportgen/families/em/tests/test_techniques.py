"""Every analysis on a tiny model of matrix capsules with EM routing: through a probe view
restricted to what it declared (as tests/test_technique_contract.py does for the vector
CapsNet), batch equal to item by item, and the EM-specific numbers against NumPy computed
here from the model's raw outputs (RPV through every routing layer, assignment entropies,
ConvCaps heatmaps, class poses)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from em_fixture import build_tiny_em

from reportgen.engine.step import plan
from reportgen.probe.evaluation import EvalBatch
from reportgen.probe.probe import TENSORS, run_probe, tensor_kind
from reportgen.techniques import all_techniques, get_technique

CLASS_NAMES = ("a", "b", "c")
SMALL = {
    "capsule_semantics": {"images": 4, "steps": 3, "perturbation_steps": 3},
    "affine_robustness": {"rotation": (-30.0, 30.0), "translation_x": (2.0,),
                          "translation_y": (), "scale": (0.9,), "shear_x": (), "shear_y": ()},
    "adversarial_robustness": {"images": 6, "epsilons": (0.0, 0.1), "pgd_steps": 2},
}
APPLICABLE = {"predictions", "gradcam_pp", "conv_feature_maps", "conv_kernels",
              "primary_heatmaps", "class_capsules", "rpv", "routing_entropy", "dead_units",
              "capsule_semantics", "affine_robustness", "adversarial_robustness"}


@pytest.fixture(scope="module")
def net():
    from reportgen.settings.families import XLA

    # Plain tf.function passes: what these tests check does not depend on XLA (the compiled
    # passes' own tests hold XLA to the eager model), and compiling each batch shape with XLA
    # made them the fast loop's slowest.
    net = build_tiny_em(seed=3)
    net.xla = XLA()
    return net


@pytest.fixture(scope="module")
def images():
    return np.random.default_rng(8).random((4, 12, 12, 1), dtype=np.float32)


@pytest.fixture(scope="module")
def outputs(net, images):
    return {k: np.asarray(v) for k, v in net.model(images).items()}


def test_what_applies_and_what_does_not(net):
    result = plan(all_techniques(), net)
    assert APPLICABLE <= {t.name for t, _ in result.variants}
    missing = {t.name: m for t, m in result.not_applicable}
    for name in ("live_decoder", "decoder_length", "decoder_perturbation"):
        assert "decoder" in missing[name]
    assert [p.layer for t, p in result.variants if t.name == "primary_heatmaps"] == [
        "", "conv_caps1", "conv_caps2"]


def _variants(technique, net):
    options = SMALL.get(technique.name, {})
    return [dataclasses.replace(p, **options) if options else p for p in technique.variants(net)]


# the slowest cases (attacks, per-class capsule sweeps); the technique contract's table keeps an
# EM case of each in the fast loop
SLOW_CASES = {"adversarial_robustness", "class_capsules"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_CASES
                                  else n for n in sorted(APPLICABLE)])
def test_reads_only_what_it_declares(name, net, images):
    technique = get_technique(name)
    rng = np.random.default_rng(11)
    x, y = rng.random((10, 12, 12, 1), dtype=np.float32), rng.integers(0, 3, 10)
    for params in _variants(technique, net):
        declared = technique.needs_for(params, net)
        assert all(tensor_kind(n) in TENSORS for n in declared), declared
        reader = f"Technique '{name}'"
        if technique.scope == "input":
            probed = run_probe(net, images, needs=declared)
            assert set(probed.tensors) <= declared | {"images"}
            got = technique.compute(probed.restricted(declared, reader), params)
            want = technique.compute(run_probe(net, images), params)
            one = technique.compute(run_probe(net, images[2:3], needs=declared), params)
            for key in want:      # a batch gives what each image gives alone
                np.testing.assert_allclose(np.asarray(one[key])[0], np.asarray(want[key])[2],
                                           rtol=1e-4, atol=1e-6, err_msg=f"{name}: {key}")
        elif technique.scope == "checkpoint":
            continue
        else:
            shared = EvalBatch(net, x, y, CLASS_NAMES)
            got = technique.compute(shared.restricted(declared, reader), params)
            assert set(shared._tensors) <= declared
            want = technique.compute(EvalBatch(net, x, y, CLASS_NAMES), params)
        assert sorted(got) == sorted(want)
        for key in want:
            # Equal up to float32 rounding: eagerly, the EM layers run XLA-compiled, and a pass
            # with gradients compiles (fuses) the same arithmetic differently from one without.
            np.testing.assert_allclose(np.asarray(got[key]), np.asarray(want[key]), rtol=1e-5,
                                       atol=1e-7, err_msg=f"{name}: {key}")


def _dense(window, child_grid, kernel, stride):
    """Window-form weights (B, Ph, Pw, K, K, Tin, Tout) -> (B, children, parents) by loops."""
    b, ph, pw, _, _, tin, tout = window.shape
    h, w = child_grid
    dense = np.zeros((b, h * w * tin, ph * pw * tout))
    for p in range(ph):
        for q in range(pw):
            for ky in range(kernel):
                for kx in range(kernel):
                    for i in range(tin):
                        child = ((p * stride + ky) * w + q * stride + kx) * tin + i
                        for o in range(tout):
                            dense[:, child, (p * pw + q) * tout + o] = window[:, p, q, ky, kx, i, o]
    return dense


def test_probe_routing_tensors_are_the_dense_assignments(net, images, outputs):
    batch = run_probe(net, images, needs={"routing:primary_caps", "routing:conv_caps1",
                                          "routing:conv_caps2", "routing_entropy:primary_caps"})
    r0 = _dense(outputs["primary_caps_routing"], (10, 10), 3, 2)
    # the probe's pass is XLA-compiled (Family.xla): float32 rounding differs from eager calls
    np.testing.assert_allclose(batch["routing:primary_caps"], r0, atol=1e-5)
    np.testing.assert_allclose(batch["routing:conv_caps1"],
                               _dense(outputs["conv_caps1_routing"], (4, 4), 2, 1), atol=1e-5)
    np.testing.assert_allclose(batch["routing:conv_caps2"], outputs["conv_caps2_routing"],
                               atol=1e-5)
    terms = np.where(r0 > 0, -r0 * np.log(np.where(r0 > 0, r0, 1)), 0.0)
    np.testing.assert_allclose(batch["routing_entropy:primary_caps"], terms.sum(-1), atol=1e-5)


@pytest.mark.parametrize("method, power", [("modified", 1), ("original", 2)])
def test_rpv_multiplies_every_hop(method, power, net, images, outputs):
    """m_ij = a_i sum over paths i -> p -> q -> j of prod (R a_head)^power, averaged over the
    primary types at each grid cell."""
    rpv = get_technique("rpv")
    maps = rpv.compute(run_probe(net, images), rpv.params_type(method=method))["maps"]
    r0 = _dense(outputs["primary_caps_routing"], (10, 10), 3, 2)
    r1 = _dense(outputs["conv_caps1_routing"], (4, 4), 2, 1)
    r2 = outputs["conv_caps2_routing"].astype(np.float64)
    a0 = outputs["primary_caps_activations"].reshape(4, -1).astype(np.float64)
    a1 = outputs["conv_caps1_activations"].reshape(4, -1).astype(np.float64)
    a2 = outputs["conv_caps2_activations"].reshape(4, -1).astype(np.float64)
    a3 = outputs["activations"].astype(np.float64)
    h0 = (r0 * a1[:, None, :]) ** power
    h1 = (r1 * a2[:, None, :]) ** power
    h2 = (r2 * a3[:, None, :]) ** power
    strength = a0[:, :, None] * np.einsum("bip,bpq,bqj->bij", h0, h1, h2)
    want = strength.reshape(4, 10, 10, 2, 3).mean(3).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(maps, want, rtol=1e-4, atol=1e-9)
    assert maps.shape == (4, 3, 10, 10) and np.isfinite(maps).all()


def test_heatmaps_and_class_poses_are_the_layers_outputs(net, images, outputs):
    probe = run_probe(net, images)
    heatmaps = get_technique("primary_heatmaps")
    close = dict(rtol=1e-5, atol=1e-5)       # the probe's pass is XLA-compiled (Family.xla)
    for params in heatmaps.variants(net):
        layer = params.layer or "primary_caps"
        got = heatmaps.compute(probe, params)["lengths"]
        np.testing.assert_allclose(got, outputs[f"{layer}_activations"], **close)
    poses = get_technique("class_capsules").compute(probe, None)
    np.testing.assert_allclose(poses["capsules"], outputs["class_capsules"], **close)
    np.testing.assert_allclose(poses["lengths"], outputs["activations"], **close)
    np.testing.assert_array_equal(probe["predicted"], outputs["activations"].argmax(1))


def _tile_colours(png: bytes) -> set[tuple[int, int, int]]:
    """The colours of the pose tiles of a class-pose figure: the rows between the top and the
    bottom of the predicted class's frame (a run of at least one tile width in its colour)."""
    import io

    from PIL import Image

    from reportgen.figures.matrix_capsules import CELL
    from reportgen.figures.panel_kit import HIGHLIGHT

    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    framed = np.flatnonzero((rgb == HIGHLIGHT).all(-1).sum(1) >= 4 * CELL)
    band = rgb[framed.min():framed.max() + 1]
    return {tuple(int(c) for c in p) for p in band.reshape(-1, 3)}


def test_class_poses_give_coordinate_addition_its_own_scale(net):
    """Coordinate addition (Hinton et al. 2018) adds each child's scaled position to pose
    entries (0, 3) and (1, 3) of its votes: they get their own scale, so the other 14 entries
    (here 16x smaller) still span theirs; without it, one scale for all 16."""
    from reportgen.figures.colormaps import DIVERGING, apply_colormap
    from reportgen.figures.figure import RenderContext
    from reportgen.figures.matrix_capsules import COORDINATE_COLORMAP, render_class_poses

    description = net.description
    assert description.class_capsules.coordinate_addition           # the fixture's default
    poses = np.zeros((3, 16))
    poses[:, [3, 7]] = [[0.8, 0.5], [0.6, 0.4], [0.7, 0.2]]        # positions in [0, 1]
    poses[0, 5], poses[1, 10], poses[2, 0] = -0.05, 0.025, 0.04
    result = {"capsules": poses, "lengths": np.array([0.2, 0.9, 0.1])}
    ctx = RenderContext("EM", "1-0", ("a", "b", "c"), description=description)
    figure, = render_class_poses(result, None, ctx)
    colours = _tile_colours(figure.data)

    def colour(value, vmax, name):
        return tuple(int(c) for c in apply_colormap(0.5 + value / (2 * vmax), name))

    # -0.05, the largest of the other entries, at the blue end of their scale; 0.025 halfway
    for value in (-0.05, 0.025, 0.04, 0.0):
        assert colour(value, 0.05, DIVERGING) in colours, value
    for value in (0.8, 0.5, 0.2):
        assert colour(value, 0.8, COORDINATE_COLORMAP) in colours, value
    assert "±0.05" in figure.caption and "±0.8" in figure.caption
    assert "coordinate addition" in figure.caption and "(0, 3) and (1, 3)" in figure.caption

    # A model without coordinate addition: one shared scale, ±0.8
    without = dataclasses.replace(description, capsule_layers=(
        *description.capsule_layers[:-1],
        dataclasses.replace(description.class_capsules, coordinate_addition=False)))
    figure, = render_class_poses(result, None, dataclasses.replace(ctx, description=without))
    colours = _tile_colours(figure.data)
    assert colour(-0.05, 0.05, DIVERGING) not in colours
    for value in (-0.05, 0.8, 0.5):
        assert colour(value, 0.8, DIVERGING) in colours, value
    assert not any(colour(v, 0.8, COORDINATE_COLORMAP) in colours for v in (0.8, 0.5))
    assert "coordinate addition" not in figure.caption


@pytest.mark.slow
def test_routing_entropy_against_uniform(net):
    """With one EM iteration the assignments are uniform: every routed layer's entropy ratio is
    1. With two it is below 1, and the means are those of the probe's entropies."""
    from reportgen.capsnet.description import parents_per_child

    rng = np.random.default_rng(2)
    x, y = rng.random((6, 12, 12, 1), dtype=np.float32), rng.integers(0, 3, 6)
    diagnostics = get_technique("routing_entropy")
    uniform_net = build_tiny_em(seed=3, em={"routing_iterations": 1, "inverse_temperature": 0.5,
                                            "conv_caps": [{"types": 3, "kernel_size": 3,
                                                           "strides": 2},
                                                          {"types": 2, "kernel_size": 2,
                                                           "strides": 1}]})
    flat = diagnostics.compute(EvalBatch(uniform_net, x, y, CLASS_NAMES),
                               diagnostics.params_type())
    np.testing.assert_allclose(flat["layer_entropy_normalized_mean"], 1.0, atol=1e-5)
    assert flat["layer_entropy_hist"][:, -1].sum() == flat["layer_entropy_hist"].sum()
    routed = diagnostics.compute(EvalBatch(net, x, y, CLASS_NAMES), diagnostics.params_type())
    assert (routed["layer_entropy_normalized_mean"] < 1.0).all()
    entropy = run_probe(net, x, needs={"routing_entropy:conv_caps1"})[
        "routing_entropy:conv_caps1"].astype(np.float64)
    fan = parents_per_child(net.description, "conv_caps1")
    assert sorted(set(fan)) == [2, 4, 8]     # corner, edge, inner cells (2x2 kernel, 2 types)
    ratio = entropy[:, fan >= 2] / np.log(fan[fan >= 2])
    assert routed["layer_entropy_normalized_mean"][1] == pytest.approx(ratio.mean(), rel=1e-5)
    summary = diagnostics.summarize(routed, diagnostics.params_type())
    assert summary["layers"] == 3
    assert summary["entropy_max"] == pytest.approx(np.log(3))      # into the 3 classes
    assert summary["entropy_normalized_per_layer"] == pytest.approx(
        list(routed["layer_entropy_normalized_mean"]))
