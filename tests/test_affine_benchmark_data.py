"""The affine benchmark's data (reportgen.data.affine_benchmark): 40x40 expanded digits and the
affNIST-like test split, seeded, from any 28x28 dataset."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.data import affine_benchmark as ab
from reportgen.data.datasets import load_dataset
from reportgen.errors import ReportgenError
from reportgen.data.warp import resample


def _digits(n=64, seed=0):
    """Distinct random 28x28 images with a non-zero border (to see where each one landed)."""
    return np.random.default_rng(seed).uniform(0.1, 1.0, (n, 28, 28, 1)).astype(np.float32)


def test_expand_places_each_image_whole_at_its_offset():
    images = _digits()
    out, offsets = ab.expand(images, np.random.default_rng(3))
    assert out.shape == (64, 40, 40, 1)
    assert offsets.min() >= 0 and offsets.max() <= 12
    assert len({tuple(o) for o in offsets}) > 20             # positions vary
    for image, canvas, (row, col) in zip(images, out, offsets):
        np.testing.assert_array_equal(canvas[row:row + 28, col:col + 28], image)
        rest = canvas.copy()
        rest[row:row + 28, col:col + 28] = 0
        assert not rest.any()                                # black everywhere else
    again, same = ab.expand(images, np.random.default_rng(3))
    np.testing.assert_array_equal(again, out)
    np.testing.assert_array_equal(same, offsets)


def test_affnist_like_parameters_stay_in_the_affnist_ranges():
    parameters = ab.sample_affine(5000, np.random.default_rng(0))
    ranges = {"rotation": (-20, 20), "shear": (-45, 45), "scale_x": (0.8, 1.2),
              "scale_y": (0.8, 1.2), "tx": (-8, 8), "ty": (-8, 8)}
    for name, (low, high) in ranges.items():
        values = parameters[name]
        assert values.min() >= low and values.max() <= high, name
        # uniform over the whole range: both ends are reached
        assert values.min() < low + 0.05 * (high - low) and values.max() > high - 0.05 * (
            high - low), name


def test_affnist_like_images_are_the_padded_digits_under_their_maps():
    images = _digits(6)
    out, parameters = ab.affnist_like(images, np.random.default_rng(5))
    padded = ab.pad_centred(images)
    np.testing.assert_array_equal(padded[:, 6:34, 6:34], images)
    assert not padded[:, :6].any() and not padded[:, 34:].any()
    matrices, translations = ab.affine_maps(parameters)
    np.testing.assert_allclose(out, np.clip(resample(padded, matrices, translations), 0, 1))
    # The matrix is rotation @ shear @ per-axis scale: its determinant is scale_x * scale_y.
    np.testing.assert_allclose(np.linalg.det(matrices),
                               parameters["scale_x"] * parameters["scale_y"], rtol=1e-9)
    # A pure translation of +5 px right moves the content 5 columns right, exactly.
    shift = {"rotation": np.zeros(1), "shear": np.zeros(1), "scale_x": np.ones(1),
             "scale_y": np.ones(1), "tx": np.full(1, 5.0), "ty": np.zeros(1)}
    moved = resample(padded[:1], *ab.affine_maps(shift))
    np.testing.assert_allclose(moved[0, :, 5:], padded[0, :, :-5], atol=1e-6)


def test_datasets_by_name_are_seeded_and_share_the_training_split():
    expanded = load_dataset("mnist40")
    affine = load_dataset("affnist_like")
    base = load_dataset("mnist")
    assert expanded.input_shape == affine.input_shape == (40, 40, 1)
    assert expanded.num_classes == 10 and expanded.class_names == base.class_names
    np.testing.assert_array_equal(expanded.x_train, affine.x_train)    # trained alike
    np.testing.assert_array_equal(expanded.y_test, base.y_test)
    np.testing.assert_array_equal(affine.y_test, base.y_test)
    # every expanded test image holds its 28x28 digit somewhere, unchanged
    for k in range(5):
        image, digit = expanded.x_test[k, ..., 0], base.x_test[k, ..., 0]
        found = [(r, c) for r in range(13) for c in range(13)
                 if np.array_equal(image[r:r + 28, c:c + 28], digit)]
        assert found
    assert not np.array_equal(affine.x_test, expanded.x_test)
    assert "affNIST-like" in affine.source and "40x40" in expanded.source
    assert load_dataset("MNIST40") is expanded                           # cached, case-free
    other = ab.derive("mnist40", base, 1)                              # the data's own seed
    assert not np.array_equal(other.x_train[:50], expanded.x_train[:50])


def test_only_28x28_grayscale_bases(tmp_path):
    base = load_dataset("mnist")
    import dataclasses

    wrong = dataclasses.replace(base, x_train=np.zeros((4, 32, 32, 3), np.float32))
    with pytest.raises(ReportgenError, match="28x28 grayscale"):
        ab.derive("mnist40", wrong, 0)
