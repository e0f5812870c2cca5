"""smallNORB (LeCun, Huang & Bottou 2004), the data set of Hinton, Sabour & Frosst 2018, read
from its official "binary matrix" files when the user has them (no registry serves it here).

A binary matrix file: a little-endian int32 magic number naming the element type, an int32
ndim, max(3, ndim) int32 dimensions (the unused ones are 1), then the elements in C order.
The six files of the distribution (optionally gzipped):
    smallnorb-5x46789x9x18x6x2x96x96-training-{dat,cat,info}.mat   24,300 stereo pairs
    smallnorb-5x01235x9x18x6x2x96x96-testing-{dat,cat,info}.mat    24,300 stereo pairs
dat: (N, 2, 96, 96) uint8 images (two cameras); cat: (N,) int32 classes 0-4; info: (N, 4) int32
(instance, elevation, azimuth, lighting).

As in the paper, images are downscaled to 48x48 (2x2 means) and cut to 32x32 — here the
centre crop for training and testing alike (the paper's random training crops and brightness
/ contrast jitter are augmentation, which reportgen's trainer does not do); the first camera's
image is used, as one grey channel in [0, 1].
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from reportgen.errors import ReportgenError

CLASSES = ("animal", "human", "airplane", "truck", "car")
FOLDER = "smallnorb"
SPLITS = {"train": "smallnorb-5x46789x9x18x6x2x96x96-training",
          "test": "smallnorb-5x01235x9x18x6x2x96x96-testing"}
PARTS = ("dat", "cat", "info")
MAGIC = {0x1E3D4C51: np.dtype("<f4"), 0x1E3D4C53: np.dtype("<f8"), 0x1E3D4C54: np.dtype("<i4"),
         0x1E3D4C55: np.dtype("u1"), 0x1E3D4C56: np.dtype("<i2")}
PACKED = 0x1E3D4C52
DOWNSCALED, CROP = 48, 32


def file_names() -> list[str]:
    return [f"{SPLITS[split]}-{part}.mat" for split in SPLITS for part in PARTS]


def read_binary_matrix(path: str | Path) -> np.ndarray:
    """The array of one binary matrix file (gzipped or not; a plain file is memory-mapped, so
    the 448 MB image files are not read whole)."""
    path = Path(path)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                raw = f.read()
            head, size = raw[:8 + 4 * 64], len(raw)
        else:
            raw = None
            with open(path, "rb") as f:
                head = f.read(8 + 4 * 64)
            size = path.stat().st_size
    except (OSError, EOFError) as exc:
        raise ReportgenError(f"Cannot read the smallNORB file {path}.",
                             received=f"{type(exc).__name__}: {exc}",
                             fix="download the file again") from None
    magic = int(np.frombuffer(head[:4], "<u4")[0]) if len(head) >= 4 else None
    if magic not in MAGIC:
        found = "a packed matrix (unsupported)" if magic == PACKED else \
            f"first bytes {head[:4].hex(' ') or '(empty file)'}"
        raise ReportgenError(f"{path} is not a smallNORB binary matrix file.",
                             expected="a magic number 0x1E3D4C51 … 0x1E3D4C56 (element type)",
                             received=found, fix="download the file again")
    ndim = int(np.frombuffer(head[4:8], "<i4")[0]) if len(head) >= 8 else 0
    stored = max(3, ndim)
    if not 1 <= ndim <= 64 or len(head) < 8 + 4 * stored:
        raise ReportgenError(f"{path} has a truncated or invalid header.",
                             expected="ndim >= 1 and its dimensions",
                             received=f"ndim {ndim}, {size} bytes")
    dims = tuple(int(d) for d in np.frombuffer(head, "<i4", count=ndim, offset=8))
    dtype = MAGIC[magic]
    offset = 8 + 4 * stored
    count = int(np.prod(dims, dtype=np.int64))
    if min(dims) < 0 or size != offset + count * dtype.itemsize:
        raise ReportgenError(f"{path} has the wrong size for its header.",
                             expected=f"{offset + count * dtype.itemsize:,} bytes for shape {dims}",
                             received=f"{size:,} bytes",
                             fix="the file is truncated or corrupt: download it again")
    if raw is not None:
        return np.frombuffer(raw, dtype, count=count, offset=offset).reshape(dims)
    return np.memmap(path, dtype, mode="r", offset=offset, shape=dims)


def find_files(folders) -> dict[str, Path]:
    """{"train-dat": path, …} for the six files in the first folder holding all of them
    (plain or .gz); a one-line ReportgenError naming the missing files otherwise."""
    folders = [Path(f) for f in folders]
    best, best_missing = None, file_names()
    for folder in folders:
        found, missing = {}, []
        for split in SPLITS:
            for part in PARTS:
                name = f"{SPLITS[split]}-{part}.mat"
                path = next((p for p in (folder / name, folder / f"{name}.gz") if p.is_file()),
                            None)
                if path is None:
                    missing.append(name)
                else:
                    found[f"{split}-{part}"] = path
        if not missing:
            return found
        if len(missing) < len(best_missing):
            best, best_missing = folder, missing
    where = best if best is not None else (folders[0] if folders else Path(FOLDER))
    raise ReportgenError(
        f"smallNORB is not available offline: {len(best_missing)} of its 6 files are missing "
        f"from {where} ({', '.join(best_missing)}).",
        fix=f"download the six files of the NYU smallNORB distribution into {where} "
            "(gzipped or not); no package registry serves them")


def _prepare(dat: np.ndarray) -> np.ndarray:
    """First camera, 96 -> 48 by 2x2 means, centre 32x32 crop, [0, 1], (N, 32, 32, 1)."""
    n, _, height, width = dat.shape
    if (height, width) != (96, 96):
        raise ReportgenError("smallNORB images have the wrong size.",
                             expected="(N, 2, 96, 96) uint8", received=f"{dat.shape}")
    out = np.empty((n, CROP, CROP, 1), np.float32)
    start = (DOWNSCALED - CROP) // 2
    for lo in range(0, n, 2048):              # a chunk at a time: the file is 448 MB
        left = dat[lo:lo + 2048, 0].astype(np.float32)
        small = left.reshape(-1, DOWNSCALED, 2, DOWNSCALED, 2).mean((2, 4))
        out[lo:lo + 2048, :, :, 0] = small[:, start:start + CROP, start:start + CROP] / 255.0
    return out


def load_smallnorb(folders):
    """Train and test arrays ((x, y) each) and a one-line description of the source."""
    files = find_files(folders)
    splits = {}
    for split in SPLITS:
        dat = read_binary_matrix(files[f"{split}-dat"])
        cat = read_binary_matrix(files[f"{split}-cat"]).reshape(-1)
        info = read_binary_matrix(files[f"{split}-info"])
        if dat.ndim != 4 or len(dat) != len(cat) or len(info) != len(cat):
            raise ReportgenError(f"The smallNORB {split} files do not match.",
                                 expected="N images, N classes and N info rows",
                                 received=f"{dat.shape}, {cat.shape}, {info.shape}")
        if cat.size and (cat.min() < 0 or cat.max() >= len(CLASSES)):
            raise ReportgenError(f"The smallNORB {split} classes are out of range.",
                                 expected="0 … 4", received=f"{cat.min()} … {cat.max()}")
        splits[split] = (_prepare(dat), cat.astype(np.int64))
    folder = files["train-dat"].parent
    source = (f"smallNORB from {folder} ({len(splits['train'][1]):,} train / "
              f"{len(splits['test'][1]):,} test, first camera, 48x48, centre 32x32 crop)")
    return splits["train"], splits["test"], source
