"""PyTorch state dicts as .safetensors, read without PyTorch: the format (written here from its
specification), an imported gram-ai network against the NumPy forward pass written from
gram-ai's code, damaged files, and a .pt file without PyTorch installed."""

from __future__ import annotations

import json
import struct
import sys
import zipfile

import numpy as np
import pytest

from reference.imported_capsnets import gram_ai_forward
from reportgen.errors import ReportgenError
from reportgen.importers import import_checkpoint
from reportgen.importers.tensors import read_checkpoint

DTYPES = {np.dtype("<f4"): "F32", np.dtype("<f2"): "F16", np.dtype("<f8"): "F64",
          np.dtype("<i8"): "I64"}


def write_safetensors(path, tensors: dict[str, np.ndarray], metadata=None, bf16=()):
    """The format: u64 little-endian header size, JSON header {name: {dtype, shape,
    data_offsets [begin, end) into the data section}}, the data section. Names in `bf16` are
    stored as bfloat16 (the float32's high 16 bits)."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, array in tensors.items():
        if name in bf16:
            data = (np.asarray(array, "<f4").view("<u4") >> 16).astype("<u2").tobytes()
            dtype = "BF16"
        else:
            data, dtype = np.ascontiguousarray(array).tobytes(), DTYPES[np.asarray(array).dtype]
        header[name] = {"dtype": dtype, "shape": list(np.shape(array)),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)          # writers pad the header to 8 bytes
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def gram_ai_state(seed=0, filters=16, types=4, dims=8, classes=10, class_dims=16, units=(32,)):
    """A gram-ai state dict (their names and shapes) for 28x28x1, lengths spread over (0, 1)."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    sd = {"conv1.weight": rng.normal(0, 0.1, (filters, 1, 9, 9)).astype(f32),
          "conv1.bias": rng.normal(0, 0.1, filters).astype(f32)}
    for d in range(dims):
        sd[f"primary_capsules.capsules.{d}.weight"] = rng.normal(0, 0.1, (types, filters, 9, 9)
                                                                 ).astype(f32)
        sd[f"primary_capsules.capsules.{d}.bias"] = rng.normal(0, 0.1, types).astype(f32)
    sd["digit_capsules.route_weights"] = rng.normal(0, 1.0, (classes, types * 36, dims,
                                                             class_dims)).astype(f32)
    width = classes * class_dims
    for n, out in enumerate((*units, 784)):
        sd[f"decoder.{2 * n}.weight"] = rng.normal(0, 1 / np.sqrt(width), (out, width)).astype(f32)
        sd[f"decoder.{2 * n}.bias"] = rng.normal(0, 0.1, out).astype(f32)
        width = out
    return sd


def test_gram_ai_from_safetensors_matches_its_numpy_forward(tmp_path):
    sd = gram_ai_state()
    path = tmp_path / "epoch_12.safetensors"
    write_safetensors(path, sd, metadata={"format": "pt"})
    result = import_checkpoint(tmp_path / "models", path, "gram-ai", step="12-600")
    assert str(result.step) == "12-600"

    x = np.random.default_rng(9).random((4, 28, 28, 1), dtype=np.float32)
    caps, lengths, probs, recon = gram_ai_forward(sd, x.transpose(0, 3, 1, 2))
    top2 = np.sort(lengths, 1)[:, -2:]
    assert (top2[:, 1] - top2[:, 0] > 1e-3).all() and lengths.min() > 0.02   # a fair test

    from reportgen.catalog import Catalog

    out = Catalog(tmp_path / "models").load(result.name).model(x)
    np.testing.assert_allclose(out["lengths"].numpy(), lengths, atol=1e-4)
    np.testing.assert_allclose(out["class_capsules"].numpy(), caps, atol=1e-4)
    np.testing.assert_allclose(out["reconstruction"].numpy().reshape(4, -1), recon, atol=1e-4)
    order = (np.arange(4)[None, :] * 36 + np.arange(36)[:, None]).reshape(-1)
    np.testing.assert_allclose(out["coupling"].numpy(), probs.transpose(1, 2, 0)[:, order],
                               atol=1e-5)


def test_tiny_class_capsules_keep_the_lengths_gram_ai_computes(tmp_path):
    """Class capsules of lengths 1e-8 .. 1e-3 (route weights scaled down per class, as in an
    untrained or collapsed network): gram-ai's squash and lengths have no epsilon, and the
    imported model reads the same lengths and predicts the same classes (an epsilon floor of
    3.2e-4 would make them all equal to float32 precision)."""
    sd = gram_ai_state(seed=1)
    factors = 10.0 ** -(1.5 + 0.25 * np.arange(10))               # |s_j| ~ 3e-2 .. 1e-4
    sd["digit_capsules.route_weights"] *= factors[:, None, None, None].astype(np.float32)
    path = tmp_path / "epoch_1.safetensors"
    write_safetensors(path, sd)
    result = import_checkpoint(tmp_path / "models", path, "gram-ai")
    x = np.random.default_rng(10).random((6, 28, 28, 1), dtype=np.float32)
    _, lengths, _, _ = gram_ai_forward(sd, x.transpose(0, 3, 1, 2))
    assert lengths.max() < 4.5e-3 and lengths.min() < 1e-6 and lengths.min() > 1e-10

    from reportgen.catalog import Catalog

    out = Catalog(tmp_path / "models").load(result.name).model(x)
    got = out["lengths"].numpy()
    np.testing.assert_allclose(got, lengths, atol=1e-4)
    np.testing.assert_allclose(got, lengths, rtol=1e-3)       # exact at every scale
    np.testing.assert_array_equal(got.argmax(1), lengths.argmax(1))


def test_reader_dtypes_metadata_and_prefix(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 4)).astype(np.float32)
    tensors = {"module.a": a, "module.h": a.astype(np.float16), "module.b": a,
               "module.step": np.array(7, np.int64)}
    path = tmp_path / "t.safetensors"
    write_safetensors(path, tensors, metadata={"epoch": "3"}, bf16=("module.b",))
    got = read_checkpoint(path).tensors
    assert set(got) == {"a", "h", "b", "step"}            # DataParallel's prefix dropped
    np.testing.assert_array_equal(got["a"], a)
    assert got["h"].dtype == np.float32 and np.allclose(got["h"], a, atol=2e-3)
    assert np.allclose(got["b"], a, rtol=1e-2)            # bfloat16 keeps 8 bits of mantissa
    assert got["step"].shape == () and int(got["step"]) == 7


def test_the_reference_writer_agrees(tmp_path):
    import safetensors.numpy as st  # the reference writer (in the test extra)

    sd = gram_ai_state(units=())
    path = tmp_path / "ref.safetensors"
    st.save_file(sd, str(path))
    got = read_checkpoint(path).tensors
    assert list(got) and all(np.array_equal(got[k], v) for k, v in sd.items())


@pytest.mark.parametrize("damage,words", [
    (lambda b: b[:5], "5 bytes"),
    (lambda b: struct.pack("<Q", 10 ** 12) + b[8:], "header length"),
    (lambda b: b[:8] + b"x" + b[9:], "unreadable JSON header"),
    (lambda b: b[:-4], "data_offsets"),
])
def test_damaged_files_are_one_line(tmp_path, damage, words):
    path = tmp_path / "x.safetensors"
    write_safetensors(path, {"w": np.ones((4, 4), np.float32)})
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(ReportgenError, match="not a valid safetensors file") as info:
        read_checkpoint(path)
    assert words in info.value.message and "\n" not in info.value.message


def test_a_pt_file_without_pytorch_says_how_to_read_it(tmp_path, monkeypatch):
    path = tmp_path / "epoch_1.pt"
    with zipfile.ZipFile(path, "w") as archive:         # torch.save's layout, as far as a
        archive.writestr("epoch_1/data.pkl", b"")       # look at the file can tell
    monkeypatch.setitem(sys.modules, "torch", None)       # import torch -> ModuleNotFoundError
    with pytest.raises(ReportgenError) as info:
        read_checkpoint(path)
    assert "pip install -e '.[torch]'" in info.value.message
    assert ".safetensors" in info.value.message


def test_unknown_suffix_and_missing_file(tmp_path):
    with pytest.raises(ReportgenError, match="not found"):
        read_checkpoint(tmp_path / "nope.pt")
    (tmp_path / "w.npz").write_bytes(b"")
    with pytest.raises(ReportgenError, match="Unknown checkpoint format.*'.npz'"):
        read_checkpoint(tmp_path / "w.npz")
