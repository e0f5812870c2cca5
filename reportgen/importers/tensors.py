"""Read the tensors of a checkpoint another framework saved: Keras HDF5 weights, PyTorch state
dicts and safetensors files, as NumPy arrays by name, without running any code from the file.

- `.h5` / `.hdf5`: the HDF5 layout of Keras 2's `model.save_weights` (and of `model.save`,
  under its `model_weights` group): the root lists the layers in `layer_names`, each layer group
  lists its weights in `weight_names`. A tensor's name is its HDF5 path, `layer/weight_name`
  (e.g. `digitcaps/digitcaps/W:0`).
- `.pt` / `.pth` / `.bin`: `torch.load(..., weights_only=True)`, which refuses any pickled object
  that is not a tensor or a plain container (PyTorch is the optional extra `[torch]`). The state
  dict may be wrapped as `{"state_dict": ...}` or `{"model_state_dict": ...}`; a `module.`
  prefix on every name (nn.DataParallel) is dropped.
- `.safetensors`: parsed here (no dependency): an 8-byte little-endian header length, a JSON
  header {name: {dtype, shape, data_offsets}}, then the raw little-endian tensors.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

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


def read_checkpoint(path: str | Path) -> Checkpoint:
    """The tensors of `path`, chosen by its suffix; a file that is not one of these formats, or
    is damaged, is a ReportgenError naming it."""
    path = Path(path)
    if not path.is_file():
        raise ReportgenError(f"Checkpoint file not found: {path}",
                             fix="Pass the path of a .h5, .pt/.pth or .safetensors file.")
    suffix = path.suffix.lower()
    if suffix in H5_SUFFIXES:
        return _read_h5(path)
    if suffix in TORCH_SUFFIXES:
        return _read_torch(path)
    if suffix in SAFETENSORS_SUFFIXES:
        return _read_safetensors(path)
    raise ReportgenError(
        f"Unknown checkpoint format: {path}",
        expected="a Keras weights file (.h5, .hdf5), a PyTorch state dict (.pt, .pth, .bin) or "
                 "a .safetensors file", received=repr(path.suffix or path.name),
        fix="Rename the file to its format's usual suffix, or save it in one of these formats.")


def _as_array(value) -> np.ndarray:
    """float32 for every floating tensor (what the Keras model holds), other dtypes as stored."""
    array = np.asarray(value)
    return array.astype(np.float32) if array.dtype.kind == "f" else array


# -- Keras HDF5 ----------------------------------------------------------------------------------

def _decode(names) -> list[str]:
    return [n.decode("utf-8") if isinstance(n, bytes) else str(n) for n in names]


def _read_h5(path: Path) -> Checkpoint:
    import h5py

    try:
        with h5py.File(path, "r") as f:
            root = f["model_weights"] if "model_weights" in f else f
            if "layer_names" not in root.attrs:
                raise ReportgenError(
                    f"{path} is an HDF5 file but not a Keras 2 weights file.",
                    expected="the layout of Keras 2's model.save_weights (a 'layer_names' "
                             "attribute listing layer groups)",
                    received=f"top-level entries {sorted(root.keys())[:8]}",
                    fix="Save the weights with the source project's model.save_weights(...).")
            tensors, groups = {}, {}
            for layer in _decode(root.attrs["layer_names"]):
                group = root[layer]
                names = _decode(group.attrs.get("weight_names", []))
                groups[layer] = []
                for weight in names:
                    key = f"{layer}/{weight}"
                    tensors[key] = _as_array(group[weight][()])
                    groups[layer].append(key)
    except OSError as exc:
        raise ReportgenError(f"Checkpoint {path} is unreadable (truncated or not HDF5).",
                             received=str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                             fix="Copy the file again from where it was saved.") from exc
    except KeyError as exc:
        raise ReportgenError(f"Checkpoint {path} is damaged: a listed weight is missing.",
                             received=str(exc), fix="Copy the file again from where it was saved."
                             ) from exc
    return Checkpoint(path, "keras-h5", tensors, groups)


# -- PyTorch -------------------------------------------------------------------------------------

def _read_torch(path: Path) -> Checkpoint:
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
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - an UnpicklingError, a zip error, an EOF ...
        text = " ".join(str(exc).split())
        refused = "weights_only" in text or "Unsupported global" in text
        raise ReportgenError(
            f"Cannot read the PyTorch file {path}"
            + (": it holds Python objects besides tensors, which reportgen never unpickles."
               if refused else "."),
            received=text[:300] or type(exc).__name__,
            fix="Save the model's state dict alone: torch.save(model.state_dict(), 'model.pt')"
                if refused else "Copy the file again from where it was saved.") from exc
    state = _state_dict(data, path)
    tensors = {}
    for name, value in state.items():
        if not isinstance(value, torch.Tensor):
            continue   # e.g. an epoch number saved beside the tensors
        tensor = value.detach().cpu()
        if tensor.is_floating_point():
            tensor = tensor.to(torch.float32)
        tensors[name] = tensor.numpy()
    return Checkpoint(path, "pytorch", _strip_prefix(tensors, "module."))


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


def _strip_prefix(tensors: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    if tensors and all(name.startswith(prefix) for name in tensors):
        return {name[len(prefix):]: value for name, value in tensors.items()}
    return tensors


# -- safetensors ---------------------------------------------------------------------------------

def _read_safetensors(path: Path) -> Checkpoint:
    def damaged(problem: str) -> ReportgenError:
        return ReportgenError(f"Checkpoint {path} is not a valid safetensors file.",
                              received=problem,
                              fix="Save it again with safetensors' save_file.")

    data = path.read_bytes()
    if len(data) < 8:
        raise damaged(f"{len(data)} bytes")
    (header_size,) = struct.unpack("<Q", data[:8])
    if header_size > min(_MAX_HEADER, len(data) - 8):
        raise damaged(f"a header length of {header_size} bytes in a {len(data)}-byte file")
    try:
        header = json.loads(data[8:8 + header_size].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise damaged(f"an unreadable JSON header ({exc})") from exc
    if not isinstance(header, dict):
        raise damaged("a JSON header that is not an object")
    body = memoryview(data)[8 + header_size:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape = info["dtype"], [int(d) for d in info["shape"]]
            begin, end = (int(o) for o in info["data_offsets"])
        except (TypeError, KeyError, ValueError) as exc:
            raise damaged(f"tensor '{name}' without dtype, shape and data_offsets") from exc
        if dtype not in _SAFETENSORS_DTYPES:
            raise damaged(f"tensor '{name}' of unsupported dtype {dtype}")
        np_dtype = np.dtype(_SAFETENSORS_DTYPES[dtype])
        count = int(np.prod(shape)) if shape else 1
        if not 0 <= begin <= end <= len(body) or end - begin != count * np_dtype.itemsize:
            raise damaged(f"tensor '{name}' with data_offsets [{begin}, {end}] for shape "
                          f"{tuple(shape)} {dtype} in a {len(body)}-byte data section")
        array = np.frombuffer(body[begin:end], dtype=np_dtype).reshape(shape)
        if dtype == "BF16":   # bfloat16 = the high 16 bits of a float32
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = _as_array(array.copy())
    return Checkpoint(path, "safetensors", _strip_prefix(tensors, "module."))
