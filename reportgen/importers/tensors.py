"""Read the tensors of a checkpoint another framework saved: Keras HDF5 weights, PyTorch state
dicts and safetensors files, as NumPy arrays by name, without running any code from the file.

Every file is opened for what it declares first, its tensors' names, shapes and dtypes
(`open_checkpoint` -> `StoredCheckpoint`), and no tensor is read before those are checked: the
total against what a model can have on this machine (reportgen.capsnet.footprint), each dtype,
and (by `reportgen import`) every shape against the layout, on data-free placeholders. A small
file declaring a huge tensor is refused without allocating it.

- `.h5` / `.hdf5`: the HDF5 layout of Keras 2's `model.save_weights` (and of `model.save`,
  under its `model_weights` group): the root lists the layers in `layer_names`, each layer group
  lists its weights in `weight_names`. A tensor's name is its HDF5 path, `layer/weight_name`
  (e.g. `digitcaps/digitcaps/W:0`). Shapes and dtypes are h5py's dataset metadata.
- `.pt` / `.pth` / `.bin`: `torch.load(..., weights_only=True)`, which refuses any pickled object
  that is not a tensor or a plain container (PyTorch is the optional extra `[torch]`). A file
  that is neither a zip archive (torch.save's format since PyTorch 1.6) nor a pickle (the legacy
  format) is refused before PyTorch is asked. Zip files are loaded with `mmap=True`: the pickle
  (names, shapes, dtypes) is read and the storages only mapped, so nothing of the data is read
  before the checks; legacy files cannot be mapped, and torch reads them whole. The state dict
  may be wrapped as `{"state_dict": ...}` or `{"model_state_dict": ...}`; a `module.` prefix on
  every name (nn.DataParallel) is dropped.
- `.safetensors`: parsed here (no dependency): an 8-byte little-endian header length, a JSON
  header {name: {dtype, shape, data_offsets}}, then the raw little-endian tensors. The header is
  read and checked against the file's size; each tensor's bytes only by `load()`.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from reportgen.errors import ReportgenError

H5_SUFFIXES = (".h5", ".hdf5")
TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")
SAFETENSORS_SUFFIXES = (".safetensors",)
# The pinned CPU build of the optional extra (an unpinned torch pulls a multi-GB CUDA build).
TORCH_EXTRA = "pip install -e '.[torch]'"

# safetensors dtype -> NumPy dtype (little-endian); BF16 is widened to float32 below.
_SAFETENSORS_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8",
                       "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}
_MAX_HEADER = 100 * 1024 * 1024  # a header larger than this is not a real safetensors file


@dataclass
class Checkpoint:
    """The tensors of one file, by name, in the file's order. `groups` (HDF5 only) lists each
    layer's tensor names in order, for layouts that identify weights by layer."""

    path: Path
    format: str                                   # "keras-h5", "pytorch" or "safetensors"
    tensors: dict[str, np.ndarray]
    groups: dict[str, list[str]] = field(default_factory=dict)

    @property
    def parameter_count(self) -> int:
        return int(sum(t.size for t in self.tensors.values()))


@dataclass(frozen=True)
class TensorSpec:
    """A tensor as its file declares it, before any of its data is read. `dtype` is what
    reading gives: float32 for every floating tensor, other dtypes as stored."""

    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass
class StoredCheckpoint:
    """An open checkpoint file: its tensors' declared shapes and dtypes (`specs`, in the file's
    order), read only by `load()`."""

    path: Path
    format: str
    specs: dict[str, TensorSpec]
    read: Callable[[str], np.ndarray]             # one tensor's data, as TensorSpec says
    groups: dict[str, list[str]] = field(default_factory=dict)
    rename: dict[str, str] = field(default_factory=dict)   # shown name -> name in the file

    @property
    def parameter_count(self) -> int:
        return int(sum(s.size for s in self.specs.values()))

    def placeholders(self) -> Checkpoint:
        """The checkpoint with data-free, read-only arrays of the declared shapes and dtypes
        (every value 0, one element of memory each): for checking shapes before any read."""
        return Checkpoint(self.path, self.format,
                          {name: np.broadcast_to(np.zeros((), spec.dtype), spec.shape)
                           for name, spec in self.specs.items()}, self.groups)

    def load(self) -> Checkpoint:
        """Every tensor's data, read from the file."""
        return Checkpoint(self.path, self.format,
                          {name: self.read(self.rename.get(name, name)) for name in self.specs},
                          self.groups)


def read_checkpoint(path: str | Path) -> Checkpoint:
    """The tensors of `path`, chosen by its suffix, read after their declarations were checked
    (see `open_checkpoint`)."""
    with open_checkpoint(path) as stored:
        return stored.load()


@contextmanager
def open_checkpoint(path: str | Path) -> Iterator[StoredCheckpoint]:
    """`path` opened for its tensors' declared names, shapes and dtypes, chosen by its suffix;
    a file that is not one of these formats, is damaged, or declares more values than a model
    this machine can hold is a ReportgenError naming it. Data is read by `load()` inside the
    block."""
    path = Path(path)
    if not path.is_file():
        raise ReportgenError(f"Checkpoint file not found: {path}",
                             fix="Pass the path of a .h5, .pt/.pth or .safetensors file.")
    suffix = path.suffix.lower()
    if suffix in H5_SUFFIXES:
        opener = _open_h5
    elif suffix in TORCH_SUFFIXES:
        opener = _open_torch
    elif suffix in SAFETENSORS_SUFFIXES:
        opener = _open_safetensors
    else:
        raise ReportgenError(
            f"Unknown checkpoint format: {path}",
            expected="a Keras weights file (.h5, .hdf5), a PyTorch state dict (.pt, .pth, .bin) "
                     "or a .safetensors file", received=repr(path.suffix or path.name),
            fix="Rename the file to its format's usual suffix, or save it in one of these "
                "formats.")
    with opener(path) as stored:
        _check_declared(stored)
        yield stored


def _check_declared(stored: StoredCheckpoint) -> None:
    """Numbers only, and no more of them than a model this machine can hold (before any read)."""
    from reportgen.capsnet.footprint import max_trainable_params

    for name, spec in stored.specs.items():
        if spec.dtype.kind not in "biuf":
            raise ReportgenError(f"Checkpoint {stored.path} holds tensor '{name}' of dtype "
                                 f"{spec.dtype}, which no weight has.",
                                 expected="floating-point (or integer) tensors",
                                 received=f"dtype {spec.dtype}",
                                 fix="Save the model's weights alone (its state dict).")
    limit = max_trainable_params()
    if stored.parameter_count > limit:
        largest = max(stored.specs, key=lambda n: stored.specs[n].size)
        raise ReportgenError(
            f"Checkpoint {stored.path} declares {stored.parameter_count:,} values, more than "
            f"any model this machine can hold (tensor '{largest}' alone has shape "
            f"{tuple(stored.specs[largest].shape)})",
            expected=f"at most {limit:,} (reportgen.capsnet.footprint: 16 bytes per trainable "
                     f"parameter in this machine's memory)",
            received=f"{stored.parameter_count:,}",
            fix="Check that this is the checkpoint of a CapsNet, saved by the project --from "
                "names.")


def _read_dtype(dtype: np.dtype) -> np.dtype:
    """What reading a tensor stored as `dtype` gives: float32 for every floating dtype."""
    return np.dtype(np.float32) if dtype.kind == "f" else dtype


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _as_array(value) -> np.ndarray:
    """float32 for every floating tensor (what the Keras model holds), other dtypes as stored;
    a wider tensor holding values no float32 holds stays as it is, so that the import's check
    names their magnitude (1e300) instead of a cast's overflow warning and "infinite"."""
    array = np.asarray(value)
    if array.dtype.kind != "f":
        return array
    if array.dtype.itemsize > 4 and array.size and \
            float(np.nanmax(np.abs(array), initial=0.0)) > _FLOAT32_MAX:
        return array
    return array.astype(np.float32)


# -- Keras HDF5 ----------------------------------------------------------------------------------

def _decode(names) -> list[str]:
    return [n.decode("utf-8") if isinstance(n, bytes) else str(n) for n in names]


@contextmanager
def _open_h5(path: Path) -> Iterator[StoredCheckpoint]:
    import h5py

    def unreadable(exc: Exception) -> ReportgenError:
        text = str(exc)
        return ReportgenError(f"Checkpoint {path} is unreadable (truncated or not HDF5).",
                              received=text.splitlines()[0] if text else type(exc).__name__,
                              fix="Copy the file again from where it was saved.")

    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise unreadable(exc) from exc
    with f:
        try:
            root = f["model_weights"] if "model_weights" in f else f
            if "layer_names" not in root.attrs:
                raise ReportgenError(
                    f"{path} is an HDF5 file but not a Keras 2 weights file.",
                    expected="the layout of Keras 2's model.save_weights (a 'layer_names' "
                             "attribute listing layer groups)",
                    received=f"top-level entries {sorted(root.keys())[:8]}",
                    fix="Save the weights with the source project's model.save_weights(...).")
            specs, groups = {}, {}
            for layer in _decode(root.attrs["layer_names"]):
                group = root[layer]
                groups[layer] = []
                for weight in _decode(group.attrs.get("weight_names", [])):
                    key = f"{layer}/{weight}"
                    dataset = group[weight]
                    if not isinstance(dataset, h5py.Dataset) or dataset.shape is None:
                        raise ReportgenError(
                            f"Checkpoint {path} is damaged: weight '{key}' is not an array.",
                            received=type(dataset).__name__,
                            fix="Copy the file again from where it was saved.")
                    specs[key] = TensorSpec(tuple(int(d) for d in dataset.shape),
                                            _read_dtype(dataset.dtype))
                    groups[layer].append(key)
        except OSError as exc:
            raise unreadable(exc) from exc
        except KeyError as exc:
            raise ReportgenError(f"Checkpoint {path} is damaged: a listed weight is missing.",
                                 received=str(exc),
                                 fix="Copy the file again from where it was saved.") from exc

        def read(key: str) -> np.ndarray:
            try:
                return _as_array(root[key][()])
            except OSError as exc:
                raise unreadable(exc) from exc

        yield StoredCheckpoint(path, "keras-h5", specs, read, groups)


# -- PyTorch -------------------------------------------------------------------------------------

_ZIP_SIGNATURE = b"PK\x03\x04"
_PICKLE_PROTOCOL = 0x80         # a pickle of protocol 2 or later starts with PROTO, then 2..5


def _torch_format(path: Path) -> str:
    """"zip" or "legacy" (a pickle, or PyTorch's oldest tar format), from the file's first
    bytes (and a zip's entries); anything else is not a PyTorch checkpoint, said before PyTorch
    is asked."""
    with open(path, "rb") as f:
        head = f.read(262)
    if head.startswith(_ZIP_SIGNATURE):
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except (zipfile.BadZipFile, OSError) as exc:
            raise ReportgenError(f"{path} is not a PyTorch checkpoint: a damaged zip archive.",
                                 received=" ".join(str(exc).split()) or type(exc).__name__,
                                 fix="Copy the file again from where it was saved.") from exc
        if not any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
            raise ReportgenError(f"{path} is not a PyTorch checkpoint: a zip archive without "
                                 "torch.save's data.pkl.", received=f"entries {names[:5]}",
                                 fix="Pass the file torch.save wrote.")
        return "zip"
    if len(head) >= 2 and head[0] == _PICKLE_PROTOCOL and 2 <= head[1] <= 5:
        return "legacy"
    if head[257:262] == b"ustar":
        return "legacy"
    raise ReportgenError(
        f"{path} is not a PyTorch checkpoint: neither a zip archive (torch.save's format "
        f"since PyTorch 1.6) nor a pickle (its legacy format).",
        expected="a file written by torch.save(model.state_dict(), ...)",
        received=f"first bytes {head[:8].hex(' ')}" if head else "an empty file",
        fix="Copy the file again from where it was saved, or pass the file torch.save wrote.")


# torch.load(weights_only=True) refuses a pickle that asks for anything but tensors and plain
# containers, naming the global it asked for: a blocked function ("unsupported GLOBAL
# posix.system whose module posix is blocked") or a class off its allowlist ("Unsupported
# global: GLOBAL __main__.Model was not an allowed global"). Its messages open with advice to
# load without that protection, which reportgen never repeats: only the detail is shown.
_REFUSED_GLOBAL = re.compile(r"unsupported\s+(?:global:\s+)?GLOBAL\s+([\w.]+)", re.IGNORECASE)
_UNPICKLER_DETAIL = re.compile(r"WeightsUnpickler error:\s*(.*?)(?:\s+Check the documentation|$)")


def _torch_load_error(path: Path, exc: Exception) -> ReportgenError:
    """One line for a file torch.load refused: a pickle asking for code (a function, a class
    of the project that saved it), or a damaged file."""
    text = " ".join(str(exc).split())
    refused = _REFUSED_GLOBAL.search(text)
    if refused:
        return ReportgenError(
            f"Refusing the PyTorch file {path}: it holds code that reportgen will not run (its "
            f"pickle asks for {refused.group(1)}); reportgen reads tensors only",
            fix="in the project that saved it, save the state dict alone "
                "(torch.save(model.state_dict(), 'model.pt')) or as .safetensors")
    detail = _UNPICKLER_DETAIL.search(text)
    if detail or "weights_only" in text:
        text = detail.group(1) if detail else "torch.load could not read it"
    return ReportgenError(f"Cannot read the PyTorch file {path}: it is damaged, or not a state "
                          f"dict torch.save wrote.", received=text[:300] or type(exc).__name__,
                          fix="Copy the file again from where it was saved.")


@contextmanager
def _open_torch(path: Path) -> Iterator[StoredCheckpoint]:
    kind = _torch_format(path)
    try:
        import torch
    except ModuleNotFoundError as exc:
        raise ReportgenError(
            f"Reading the PyTorch file {path} needs PyTorch, which is not installed.",
            fix=f"{TORCH_EXTRA} (a CPU build), or save the state dict as .safetensors "
                "(safetensors.torch.save_file(model.state_dict(), 'model.safetensors')), which "
                "reportgen reads without PyTorch.") from exc
    try:
        # weights_only: tensors and plain containers only; never unpickles arbitrary objects.
        # mmap: storages are mapped, not read, so the declared shapes come first.
        data = torch.load(path, map_location="cpu", weights_only=True, mmap=kind == "zip")
    except Exception as exc:  # noqa: BLE001 - an UnpicklingError, a zip error, an EOF ...
        raise _torch_load_error(path, exc) from None
    state = _state_dict(data, path)
    tensors = {name: value for name, value in state.items()
               if isinstance(value, torch.Tensor)}   # not e.g. an epoch number beside them
    names = _strip_prefix({name: name for name in tensors}, "module.")
    specs = {}
    for shown, name in names.items():
        tensor = tensors[name]
        if tensor.is_floating_point():
            dtype = np.dtype(np.float32)
        else:
            try:
                dtype = torch.empty((), dtype=tensor.dtype).numpy().dtype
            except (TypeError, RuntimeError):
                dtype = np.dtype("V")                # complex, quantised: refused by name
        specs[shown] = TensorSpec(tuple(int(d) for d in tensor.shape), dtype)

    def read(name: str) -> np.ndarray:
        tensor = tensors[name].detach()
        if tensor.is_floating_point():
            tensor = tensor.to(torch.float32)
        return np.array(tensor.numpy())          # a copy: nothing stays mapped

    yield StoredCheckpoint(path, "pytorch", specs, read,
                           rename={k: v for k, v in names.items() if k != v})


def _state_dict(data, path: Path) -> dict:
    if isinstance(data, dict):
        for key in ("state_dict", "model_state_dict", "model"):
            if isinstance(data.get(key), dict):
                return data[key]
        return data
    raise ReportgenError(f"PyTorch file {path} does not hold a state dict.",
                         expected="a dict of tensor names to tensors (model.state_dict())",
                         received=type(data).__name__,
                         fix="Save it with torch.save(model.state_dict(), 'model.pt').")


def _strip_prefix(tensors: dict, prefix: str) -> dict:
    if tensors and all(name.startswith(prefix) for name in tensors):
        return {name[len(prefix):]: value for name, value in tensors.items()}
    return tensors


# -- safetensors ---------------------------------------------------------------------------------

@contextmanager
def _open_safetensors(path: Path) -> Iterator[StoredCheckpoint]:
    def damaged(problem: str) -> ReportgenError:
        return ReportgenError(f"Checkpoint {path} is not a valid safetensors file.",
                              received=problem,
                              fix="Save it again with safetensors' save_file.")

    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            raise damaged(f"{size} bytes")
        (header_size,) = struct.unpack("<Q", f.read(8))
        if header_size > min(_MAX_HEADER, size - 8):
            raise damaged(f"a header length of {header_size} bytes in a {size}-byte file")
        try:
            header = json.loads(f.read(header_size).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise damaged(f"an unreadable JSON header ({exc})") from exc
        if not isinstance(header, dict):
            raise damaged("a JSON header that is not an object")
        body, body_size = 8 + header_size, size - 8 - header_size
        specs, places = {}, {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            try:
                dtype, shape = info["dtype"], tuple(info["shape"])
                begin, end = (int(o) for o in info["data_offsets"])
            except (TypeError, KeyError, ValueError) as exc:
                raise damaged(f"tensor '{name}' without dtype, shape and data_offsets") from exc
            if not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
                raise damaged(f"tensor '{name}' of shape {list(shape)}: dimensions must be "
                              f"whole numbers")
            if dtype not in _SAFETENSORS_DTYPES:
                raise damaged(f"tensor '{name}' of unsupported dtype {dtype}")
            stored = np.dtype(_SAFETENSORS_DTYPES[dtype])
            if (any(d < 0 for d in shape) or not 0 <= begin <= end <= body_size
                    or end - begin != math.prod(shape) * stored.itemsize):
                raise damaged(f"tensor '{name}' with data_offsets [{begin}, {end}] for shape "
                              f"{shape} {dtype} in a {body_size}-byte data section")
            specs[name] = TensorSpec(shape, np.dtype(np.float32) if dtype == "BF16"
                                     else _read_dtype(stored))
            places[name] = (stored, dtype, begin, end)

        def read(name: str) -> np.ndarray:
            stored, dtype, begin, end = places[name]
            f.seek(body + begin)
            data = f.read(end - begin)
            if len(data) != end - begin:
                raise damaged(f"tensor '{name}' cut short")
            array = np.frombuffer(data, dtype=stored).reshape(specs[name].shape)
            if dtype == "BF16":   # bfloat16 = the high 16 bits of a float32
                array = (array.astype(np.uint32) << 16).view(np.float32)
            return _as_array(array.copy())

        names = _strip_prefix({name: name for name in specs}, "module.")
        yield StoredCheckpoint(path, "safetensors", {shown: specs[name]
                                                     for shown, name in names.items()},
                               read, rename={k: v for k, v in names.items() if k != v})
