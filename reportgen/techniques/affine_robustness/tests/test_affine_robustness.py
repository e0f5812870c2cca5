"""The batched affine helper (reportgen.probe.affine) against Pillow, and the affine_robustness
analysis on a tiny CapsNet: identity sweeps reproduce the clean accuracy, chunking changes
nothing, figures and summaries are well-formed."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from PIL import Image

from reportgen.errors import ReportgenError
from reportgen.probe.affine import FACTORS, affine_batch, factor_batch
from reportgen.probe.evaluation import EvalBatch
from reportgen.techniques import affine_robustness as ar
from reportgen.techniques.base import RenderContext

CLASS_NAMES = ("a", "b", "c")


def _bordered(count=3, h=20, w=24, channels=1, border=4, seed=0):
    """Random images with a zero border: Pillow clamps neighbours at the edge where we read 0,
    and the two agree wherever the border is zero."""
    rng = np.random.default_rng(seed)
    images = np.zeros((count, h, w, channels), np.float32)
    images[:, border:h - border, border:w - border] = rng.random(
        (count, h - 2 * border, w - 2 * border, channels), dtype=np.float32)
    return images


def _pillow_affine(image2d, matrix, translation):
    """Pillow's Image.transform with the inverse map of p_out = A (p - c) + c + t, written in
    Pillow's continuous coordinates (pixel centres at i + 0.5, centre (W/2, H/2))."""
    h, w = image2d.shape
    inverse = np.linalg.inv(matrix)
    centre = np.array([w / 2.0, h / 2.0])
    offset = centre - inverse @ (centre + translation)
    data = (inverse[0, 0], inverse[0, 1], offset[0], inverse[1, 0], inverse[1, 1], offset[1])
    out = Image.fromarray(image2d.astype(np.float32), mode="F").transform(
        (w, h), Image.Transform.AFFINE, data, resample=Image.Resampling.BILINEAR)
    return np.asarray(out)


# --- the affine helper --------------------------------------------------------------------------

def test_identity_is_exact():
    images = np.random.default_rng(3).random((4, 9, 11, 3), dtype=np.float32)
    assert np.array_equal(affine_batch(images), images)
    assert np.array_equal(affine_batch(images, rotation_deg=0, tx=0, ty=0, scale=1), images)
    np.testing.assert_allclose(affine_batch(images, rotation_deg=360.0), images, atol=1e-5)


@pytest.mark.parametrize("angle", [15.0, -37.5, 90.0, 180.0])
def test_rotation_matches_pillow(angle):
    images = _bordered()
    ours = affine_batch(images, rotation_deg=angle)
    for image, mine in zip(images, ours):
        theirs = np.asarray(Image.fromarray(image[:, :, 0], mode="F").rotate(
            angle, resample=Image.Resampling.BILINEAR))
        np.testing.assert_allclose(mine[:, :, 0], theirs, atol=1e-5)


@pytest.mark.parametrize("options", [
    {"tx": 1.5, "ty": -0.75},
    {"scale": 1.2},
    {"scale": 0.8, "rotation_deg": 20.0},
    {"shear_x": 0.3},
    {"shear_y": -0.25, "tx": 2.0},
    {"rotation_deg": -10.0, "tx": -1.0, "ty": 1.0, "scale": 1.1, "shear_x": 0.2, "shear_y": 0.1},
])
def test_affine_matches_pillow_transform(options):
    images = _bordered(count=2, seed=5)
    # The convention of the module docstring, written out independently.
    theta = math.radians(options.get("rotation_deg", 0.0))
    rotation = np.array([[math.cos(theta), math.sin(theta)], [-math.sin(theta), math.cos(theta)]])
    shear = np.array([[1.0, options.get("shear_x", 0.0)], [options.get("shear_y", 0.0), 1.0]])
    matrix = rotation @ shear * options.get("scale", 1.0)
    translation = np.array([options.get("tx", 0.0), options.get("ty", 0.0)])
    ours = affine_batch(images, **options)
    for image, mine in zip(images, ours):
        np.testing.assert_allclose(mine[:, :, 0], _pillow_affine(image[:, :, 0], matrix,
                                                                 translation), atol=1e-5)


def test_integer_translation_shifts_with_zero_fill():
    images = np.random.default_rng(4).random((2, 8, 10, 2), dtype=np.float32)
    moved = affine_batch(images, tx=3, ty=-2)
    expected = np.zeros_like(images)
    expected[:, 0:6, 3:10] = images[:, 2:8, 0:7]
    np.testing.assert_allclose(moved, expected, atol=1e-6)
    assert np.all(affine_batch(images, tx=50) == 0)


def test_per_image_parameters_equal_one_by_one():
    images = _bordered(count=4, seed=7)
    angles = np.array([-30.0, 0.0, 12.5, 45.0])
    scales = np.array([0.9, 1.0, 1.1, 1.3])
    batched = affine_batch(images, rotation_deg=angles, scale=scales, shear_x=0.1)
    for i in range(4):
        np.testing.assert_array_equal(
            batched[i], affine_batch(images[i:i + 1], rotation_deg=angles[i], scale=scales[i],
                                     shear_x=0.1)[0])
    np.testing.assert_array_equal(factor_batch(images, "rotation", angles),
                                  affine_batch(images, rotation_deg=angles))
    for factor, (_, identity, _) in FACTORS.items():
        assert np.array_equal(factor_batch(images, factor, identity), images)


def test_invalid_parameters():
    images = np.zeros((2, 5, 5, 1), np.float32)
    with pytest.raises(ValueError):
        affine_batch(images, scale=0.0)
    with pytest.raises(ValueError):
        affine_batch(images, rotation_deg=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError):
        affine_batch(images[0])
    with pytest.raises(ValueError):
        factor_batch(images, "zoom", 1.0)


# --- the analysis -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def evaluation(tiny_net):
    rng = np.random.default_rng(11)
    images = rng.random((14, 12, 12, 1), dtype=np.float32)
    return EvalBatch(tiny_net, images, rng.integers(0, 3, 14), CLASS_NAMES)


SMALL = dict(rotation=(-20.0, 0.0, 20.0), translation_x=(-2.0, 0.0), translation_y=(1.0,),
             scale=(0.9, 1.0), shear_x=(), shear_y=(0.0, 0.2))


@pytest.fixture(scope="module")
def small_result(evaluation):
    return ar.compute(evaluation, ar.Params(**SMALL))


@pytest.mark.slow
def test_identity_sweep_keeps_clean_accuracy(evaluation):
    identity = ar.Params(rotation=(0.0,), translation_x=(0.0,), translation_y=(0.0,),
                         scale=(1.0,), shear_x=(0.0,), shear_y=(0.0,), chunk=5)
    arrays = ar.compute(evaluation, identity)
    clean = evaluation.tensors("lengths")["lengths"].argmax(1)
    assert float(arrays["clean_accuracy"]) == np.mean(clean == evaluation.labels)
    for factor in FACTORS:
        assert arrays[f"accuracy_{factor}"].tolist() == [float(arrays["clean_accuracy"])]
        np.testing.assert_array_equal(arrays[f"predicted_{factor}"][0], clean)
        np.testing.assert_allclose(arrays[f"class_accuracy_{factor}"][0],
                                   arrays["clean_class_accuracy"], equal_nan=True)


def test_chunk_size_does_not_change_results(evaluation, small_result):
    other = ar.compute(evaluation, ar.Params(**SMALL, chunk=3))
    assert other.keys() == small_result.keys()
    for key in small_result:
        np.testing.assert_allclose(other[key], small_result[key], rtol=1e-5, atol=1e-6,
                                   equal_nan=True, err_msg=key)


def test_sweep_matches_transform_then_classify(tiny_net, evaluation, small_result):
    images = np.asarray(evaluation.images)
    for value, predicted in zip(SMALL["rotation"], small_result["predicted_rotation"]):
        lengths = np.asarray(tiny_net.model(affine_batch(images, rotation_deg=value),
                                            training=False)["lengths"])
        np.testing.assert_array_equal(predicted, lengths.argmax(1))
    assert "values_shear_x" not in small_result            # an empty sweep is skipped
    assert small_result["accuracy_rotation"].shape == (3,)
    assert small_result["class_accuracy_rotation"].shape == (3, 3)


def test_params_validation():
    assert ar.Params(rotation=[-5, 5]).rotation == (-5.0, 5.0)
    hash(ar.Params())
    assert ar.Params().rotation == tuple(float(v) for v in range(-60, 61, 15))
    assert ar.Params().scale[0] == 0.6 and ar.Params().scale[-1] == 1.4
    with pytest.raises(ReportgenError):
        ar.Params(scale=(0.0, 1.0))
    with pytest.raises(ReportgenError):
        ar.Params(rotation=("x",))
    with pytest.raises(ReportgenError):
        ar.Params(chunk=0)


@pytest.mark.slow
def test_summary_and_figures(small_result):
    summary = ar.summarize(small_result, ar.Params(**SMALL))
    json.dumps(summary, allow_nan=False)
    assert summary["images"] == 14
    assert summary["rotation_values"] == [-20.0, 0.0, 20.0]
    assert "shear_x_values" not in summary
    assert summary["mean_accuracy"] == pytest.approx(np.mean(
        [summary[f"{f}_mean_accuracy"] for f in FACTORS if f"{f}_values" in summary]))
    technique = ar.TECHNIQUE
    assert (technique.name, technique.scope, technique.layer) == ("affine_robustness",
                                                                  "dataset", "model")
    ctx = RenderContext(model="tiny", step="1-10", class_names=CLASS_NAMES)
    figures = technique.render(small_result, ar.Params(**SMALL), ctx)
    assert [f.kind for f in figures] == ["png", "svg", "pdf"]
    assert "79%" in figures[0].caption and "66%" in figures[0].caption
    assert figures[0].width > 0 and figures[0].data.startswith(b"\x89PNG")
    again = technique.render(small_result, ar.Params(**SMALL), ctx)
    assert [f.data for f in figures] == [f.data for f in again]          # deterministic
    assert technique.render_trend([("1-10", summary)], None, ctx) == []
    trend = technique.render_trend([("1-10", summary), ("2-10", summary)], None, ctx)
    compare = technique.render_compare([("A", summary), ("B", summary)], None, ctx)
    assert [f.kind for f in trend] == [f.kind for f in compare] == ["png", "svg", "pdf"]
    assert "79%" in compare[0].caption


@pytest.mark.parametrize("module", ["affine_robustness", "capsule_semantics",
                                    "routing_entropy", "vote_agreement", "dead_units"])
def test_empty_evaluation_set_is_refused(tiny_net, module):
    from importlib import import_module

    technique = import_module(f"reportgen.techniques.{module}")
    empty = EvalBatch(tiny_net, np.zeros((0, 12, 12, 1), np.float32), np.zeros(0, np.int64),
                      CLASS_NAMES)
    with pytest.raises(ReportgenError, match="at least one evaluation image"):
        technique.compute(empty, technique.Params())


def test_the_per_image_outcomes_add_up_to_the_accuracies(evaluation, small_result):
    """What the intervals are computed from: each image's clean and swept correctness."""
    np.testing.assert_array_equal(small_result["labels"], evaluation.labels)
    assert small_result["clean_correct"].dtype == bool
    assert small_result["clean_correct"].mean() == float(small_result["clean_accuracy"])
    for factor in ("rotation", "scale"):
        np.testing.assert_allclose((small_result[f"predicted_{factor}"]
                                    == small_result["labels"]).mean(1),
                                   small_result[f"accuracy_{factor}"])
    summary = ar.summarize(small_result, ar.Params(**SMALL))
    assert summary["intervals"]["rotation_accuracy"]["n"] == [14, 14, 14]
