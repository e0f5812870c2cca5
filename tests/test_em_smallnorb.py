"""smallNORB's official binary matrix files (magic number, ndim, max(3, ndim) dimensions, data),
written here in that format at a small size, read back through the dataset registry."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from reportgen.data import smallnorb
from reportgen.data.datasets import clear_dataset_cache, known_datasets, load_dataset
from reportgen.errors import ReportgenError

MAGIC = {"u1": 0x1E3D4C55, "<i4": 0x1E3D4C54, "<f4": 0x1E3D4C51}


def write_matrix(path, array, compress=False):
    array = np.ascontiguousarray(array)
    kind = array.dtype.str if array.dtype.str != "|u1" else "u1"
    dims = list(array.shape) + [1] * max(0, 3 - array.ndim)
    data = (np.array([MAGIC[kind], array.ndim], "<u4").tobytes()
            + np.array(dims, "<i4").tobytes() + array.tobytes())
    if compress:
        path = path.with_name(path.name + ".gz")
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return path


def write_split(folder, split, images, classes, compress=False):
    stem = smallnorb.SPLITS[split]
    write_matrix(folder / f"{stem}-dat.mat", images, compress)
    write_matrix(folder / f"{stem}-cat.mat", classes.astype("<i4"), compress)
    info = np.stack([np.arange(len(classes))] * 4, 1).astype("<i4")
    write_matrix(folder / f"{stem}-info.mat", info, compress)


@pytest.fixture
def keras_home(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    clear_dataset_cache()
    yield tmp_path / "keras" / "datasets" / "smallnorb"
    clear_dataset_cache()


@pytest.mark.parametrize("compress", [False, True])
def test_official_files_load_as_48x48_centre_crops(keras_home, compress):
    rng = np.random.default_rng(0)
    keras_home.mkdir(parents=True)
    train = rng.integers(0, 256, (6, 2, 96, 96), dtype=np.uint8)
    test = rng.integers(0, 256, (4, 2, 96, 96), dtype=np.uint8)
    write_split(keras_home, "train", train, np.array([0, 1, 2, 3, 4, 0]), compress)
    write_split(keras_home, "test", test, np.array([4, 3, 2, 1]), compress)
    assert "smallnorb" in known_datasets()
    data = load_dataset("SMALLNORB")
    assert data.input_shape == (32, 32, 1) and data.num_classes == 5
    assert data.class_names == ("animal", "human", "airplane", "truck", "car")
    np.testing.assert_array_equal(data.y_train, [0, 1, 2, 3, 4, 0])
    np.testing.assert_array_equal(data.y_test, [4, 3, 2, 1])
    # pixel (r, c) of the crop = mean of the first camera's 2x2 block at (2(r+8), 2(c+8)) / 255
    left = test[2, 0].astype(np.float64)
    r, c = 5, 17
    block = left[2 * (r + 8):2 * (r + 8) + 2, 2 * (c + 8):2 * (c + 8) + 2]
    assert data.x_test[2, r, c, 0] == pytest.approx(block.mean() / 255.0, abs=1e-6)
    expected = left.reshape(48, 2, 48, 2).mean((1, 3))[8:40, 8:40] / 255.0
    np.testing.assert_allclose(data.x_test[2, :, :, 0], expected, atol=1e-6)
    assert "smallNORB from" in data.source


def test_reader_checks_the_header(tmp_path):
    values = np.arange(24, dtype="<i4").reshape(2, 3, 4)
    path = write_matrix(tmp_path / "m.mat", values)
    np.testing.assert_array_equal(smallnorb.read_binary_matrix(path), values)
    one_d = write_matrix(tmp_path / "v.mat", np.array([3, 1, 4], "<i4"))   # dims 3, 1, 1 stored
    np.testing.assert_array_equal(smallnorb.read_binary_matrix(one_d), [3, 1, 4])
    floats = write_matrix(tmp_path / "f.mat", np.array([[0.5, -2.0]], "<f4"))
    assert smallnorb.read_binary_matrix(floats).tolist() == [[0.5, -2.0]]
    bad = tmp_path / "bad.mat"
    bad.write_bytes(b"\x00\x01\x02\x03" + path.read_bytes()[4:])
    with pytest.raises(ReportgenError, match="not a smallNORB binary matrix"):
        smallnorb.read_binary_matrix(bad)
    short = tmp_path / "short.mat"
    short.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(ReportgenError, match="wrong size"):
        smallnorb.read_binary_matrix(short)


def test_missing_files_are_named_in_one_line(keras_home):
    keras_home.mkdir(parents=True)
    write_split(keras_home, "train", np.zeros((1, 2, 96, 96), np.uint8), np.array([0]))
    with pytest.raises(ReportgenError) as err:
        load_dataset("smallnorb")
    message = err.value.message
    assert "\n" not in message and "3 of its 6 files are missing" in message
    assert "smallnorb-5x01235x9x18x6x2x96x96-testing-dat.mat" in message
    assert "training-dat.mat" not in message          # the files that are there
