"""Weights files and atomic writes in a model folder.

Which step a weights file holds (`Step` <-> `3-100.weights.h5`) and how temporary files are
named are reportgen.model_folder's; `Step`, `WEIGHTS_SUFFIX` and `list_steps` are re-exported
here for the code that imports them from this module. Writes are atomic: a temporary file in the
same folder (model_folder.TEMP_PREFIX + 8 random characters + the target's suffix, so that the
next `reportgen train` can recognise and delete leftovers of a killed write), flushed to disk,
then renamed over the target. How a training step's files are committed together is in
reportgen.training.run_state.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from reportgen.errors import ReportgenError
from reportgen.model_folder import TEMP_PREFIX, WEIGHTS_SUFFIX
from reportgen.model_folder import Step, list_steps  # noqa: F401  (re-exported)


# tempfile.mkstemp's alphabet (model_folder recognises its 8 characters in a temporary name)
_TEMP_CHARACTERS = "abcdefghijklmnopqrstuvwxyz0123456789_"


def _create_temporary(folder: Path, suffix: str) -> Path:
    """Create a new empty file TEMP_PREFIX + 8 random characters + `suffix` in `folder`, with
    the permissions the user's umask gives any new file (tempfile.mkstemp's are owner-only:
    the file renamed onto history.json would keep them)."""
    for _ in range(100):
        name = TEMP_PREFIX + "".join(secrets.choice(_TEMP_CHARACTERS) for _ in range(8))
        path = folder / f"{name}{suffix}"
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return path
    raise FileExistsError(errno.EEXIST, "No free temporary file name", str(folder))


@contextmanager
def atomic_path(final: Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `final`; rename it onto `final` only if the block succeeds."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = _create_temporary(final.parent, suffix or "".join(final.suffixes))
    try:
        yield tmp
        fsync_file(tmp)
        os.replace(tmp, final)
        fsync_dir(final.parent)
    finally:
        if tmp.exists():
            tmp.unlink()


def fsync_file(path: Path) -> None:
    """Flush a written file to disk, so a rename never publishes a file the OS has not stored."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(folder: Path) -> None:
    """Flush a folder's entries (a rename) to disk; a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(final: Path, data: bytes) -> None:
    with atomic_path(final) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(final: Path, text: str) -> None:
    atomic_write_bytes(final, text.encode("utf-8"))


def save_weights(net, path: Path) -> None:
    """Save every weight of `net.model` atomically to `path` (*.weights.h5)."""
    with atomic_path(path, suffix=WEIGHTS_SUFFIX) as tmp:
        net.model.save_weights(str(tmp))


# Every HDF5 file Keras writes starts with this (HDF5's format signature, at offset 0).
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_TRUNCATED = re.compile(r"eof = (\d+).*stored_eof = (\d+)")


def weights_file_problem(path: Path, trainable: int | None = None) -> str | None:
    """Why `path` cannot be a step's weights file, in a few words, or None. Cheap: no weight
    is read. Checked: HDF5's signature; that h5py opens it (which compares the file's size with
    the end of file its superblock records, so a truncated copy is caught); and, given the
    model's `trainable` parameter count, that its datasets hold at least that many values
    (Keras writes every weight of the model)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(len(HDF5_SIGNATURE))
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if not head:
        return "an empty file"
    if head != HDF5_SIGNATURE:
        return "not an HDF5 file (no HDF5 signature at its start)"
    import h5py

    try:
        with h5py.File(path, "r") as f:
            stored = [0]

            def count(_, item):
                if isinstance(item, h5py.Dataset):
                    stored[0] += item.size
            f.visititems(count)
    except OSError as exc:
        text = str(exc)
        cut = _TRUNCATED.search(text)
        if cut:
            return f"truncated ({int(cut.group(1)):,} of {int(cut.group(2)):,} bytes)"
        detail = text[text.find("(") + 1:text.rfind(")")] if "(" in text else text
        return f"an unreadable HDF5 file ({' '.join(detail.split()) or type(exc).__name__})"
    if trainable is not None and stored[0] < trainable:
        return (f"holds {stored[0]:,} weight values, fewer than the model's {trainable:,} "
                "trainable parameters")
    return None


def nonfinite(named_arrays) -> str | None:
    """The first of (name, array) holding a value that is not a finite number, in words
    ("tensor 'layers/dense/vars/0' holds 3 NaN and 1 infinite of its 512 values"); None when
    every value is finite."""
    import numpy as np

    for name, array in named_arrays:
        array = np.asarray(array)
        if array.dtype.kind != "f":
            continue
        finite = np.isfinite(array)
        if not finite.all():
            nan = int(np.isnan(array).sum())
            return (f"tensor '{name}' holds {nan:,} NaN and {int((~finite).sum()) - nan:,} "
                    f"infinite of its {array.size:,} values")
    return None


# No trained weight comes near this (the sources' CapsNets keep theirs below ~10); a corrupt or
# mis-scaled file's 1e30 would overflow float32 in the first forward pass.
MAX_WEIGHT = 1e6
WEIGHT_RULE = ("finite floating-point weights of magnitude at most "
               f"{MAX_WEIGHT:g}")


def weights_problem(named_arrays) -> str | None:
    """The first of (name, array) that is no weight a network trains to, in words: a tensor of
    another dtype than a floating one ("tensor 'conv1.bias' of dtype bool"), one holding NaN or
    infinite values (`nonfinite`), or one with a value of magnitude above MAX_WEIGHT ("tensor
    'x' holds a weight of magnitude 1e+30"); None when every tensor is fine. The one rule for
    an imported checkpoint (reportgen.importers.common.check_numbers) and a model's own saved
    steps (`nonfinite_weights`, `load_weights`)."""
    import numpy as np

    for name, array in named_arrays:
        array = np.asarray(array)
        if array.dtype.kind != "f":
            return f"tensor '{name}' of dtype {array.dtype}"
        problem = nonfinite([(name, array)])
        if problem is not None:
            return problem
        largest = float(np.abs(array).max()) if array.size else 0.0
        if largest > MAX_WEIGHT:
            return f"tensor '{name}' holds a weight of magnitude {largest:.3g}"
    return None


def nonfinite_weights(path: Path) -> str | None:
    """`weights_problem` over every weight stored in the weights file `path` (reads them all:
    the build and `reportgen models` remember the answer per file version and per `version`
    of this rule, reportgen.engine.digests)."""
    import h5py

    try:
        with h5py.File(path, "r") as f:
            names = []
            f.visititems(lambda name, item: names.append(name)
                         if isinstance(item, h5py.Dataset) else None)
            return weights_problem((name, f[name][()]) for name in names)
    except OSError:
        return None         # damaged: weights_file_problem says how, where it is loaded


# 2: dtype and magnitude too, not only NaN and infinite values (answers remembered under 1 are
# not reused: reportgen.engine.digests.DigestMemo.fact)
nonfinite_weights.version = 2


def nonfinite_step_error(path: Path, problem: str) -> ReportgenError:
    """The one-line error of a step whose weights are not numbers a network trains to."""
    return ReportgenError(
        f"Weights file {path} holds weights that are not numbers a network trains to: "
        f"{problem}",
        expected=WEIGHT_RULE,
        fix="Build the other steps (--steps), or delete this file; training that stopped "
            "there keeps its last good step (`reportgen train NAME --resume`).")


def load_weights(net, path: Path) -> None:
    """Load `path` into `net.model`; a missing, truncated or foreign file names itself, and
    so does one holding NaN, infinite or absurdly large weights (`weights_problem`)."""
    path = Path(path)
    if not path.is_file():
        raise ReportgenError(f"Weights file not found: {path}",
                             fix="List the saved steps with `reportgen models`, or train with "
                                 "`reportgen train NAME`.")
    problem = weights_file_problem(path)
    if problem is not None:
        raise ReportgenError(f"Weights file {path} is unreadable (truncated or not HDF5).",
                             received=problem,
                             fix=f"Delete {path} and retrain, or choose another step.")
    try:
        net.model.load_weights(str(path))
        problem = weights_problem((v.path, v.numpy()) for v in net.model.weights)
    except (ValueError, KeyError, OSError) as exc:
        raise ReportgenError(
            f"Weights file {path} does not fit this model's architecture.",
            expected=f"weights saved from a model built from the same params.toml "
                     f"({net.trainable_params():,} trainable parameters)",
            received=" ".join(str(exc).split())[:400],
            fix="Check that params.toml was not edited after training; retrain with "
                "`reportgen train NAME --fresh` if it was.") from exc
    if problem is not None:
        raise nonfinite_step_error(path, problem)
