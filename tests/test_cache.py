"""Artifact store and cache keys: content addressing, atomicity, concurrency."""

import multiprocessing
import os

import numpy as np
import pytest

from reportgen.cache.keys import artifact_key, file_digest
from reportgen.cache.store import ArtifactStore
from reportgen.techniques.base import Figure

BASE = dict(model="m", weights="w", input="i", technique="rpv", version=1,
            params={"method": "modified"})


def test_key_changes_when_any_input_changes_and_only_then():
    key = artifact_key(**BASE)
    assert artifact_key(**BASE) == key
    assert artifact_key(**{**BASE, "params": {"method": "modified"}}) == key
    for field, value in [("model", "m2"), ("weights", "w2"), ("input", "i2"),
                         ("technique", "gradcam_pp"), ("version", 2),
                         ("params", {"method": "original"})]:
        assert artifact_key(**{**BASE, field: value}) != key, field


def test_file_digest_follows_content(tmp_path):
    path = tmp_path / "w.weights.h5"
    path.write_bytes(b"abc")
    first = file_digest(path)
    path.write_bytes(b"abd")
    os.utime(path, ns=(1, 1))
    assert file_digest(path) != first


def test_arrays_round_trip_without_pickle(tmp_path):
    store = ArtifactStore(tmp_path)
    arrays = {"maps": np.random.default_rng(0).random((3, 4, 4), dtype=np.float32),
              "flag": np.array([1, 0, 1], np.int64)}
    store.put_arrays("ab" * 32, arrays, {"technique": "x"})
    assert store.has_arrays("ab" * 32)
    back = store.get_arrays("ab" * 32)
    for k, v in arrays.items():
        np.testing.assert_array_equal(back[k], v)
        assert back[k].dtype == v.dtype
    assert store.get_arrays("cd" * 32) is None
    info = store.info()
    assert info["arrays"]["entries"] == 1 and info["arrays"]["bytes"] > 0
    assert store.clear() > 0 and not tmp_path.exists()


def test_failed_write_leaves_no_entry(tmp_path):
    store = ArtifactStore(tmp_path)

    class Boom:
        def __array__(self, *a, **k):
            raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError):
        store.put_arrays("ef" * 32, {"a": np.zeros(3), "b": Boom()}, {})
    assert not store.has_arrays("ef" * 32)
    assert not any((tmp_path / "tmp").iterdir())
    store.put_arrays("ef" * 32, {"a": np.zeros(3)}, {})  # the next build finishes the job
    assert store.has_arrays("ef" * 32)


def test_figures_round_trip(tmp_path):
    store = ArtifactStore(tmp_path)
    figs = [Figure(name="a.png", data=b"\x89PNG...", width=3, height=4, caption="c"),
            Figure(name="a.svg", data=b"<svg/>", kind="svg")]
    listing = store.put_figures("12" * 32, figs)
    assert [f["name"] for f in listing] == ["a.png", "a.svg"]
    from pathlib import Path

    assert Path(listing[0]["path"]).read_bytes() == b"\x89PNG..."
    assert store.get_figures("12" * 32)[0]["caption"] == "c"


def _writer(root, n):
    store = ArtifactStore(root)
    for i in range(n):
        store.put_arrays(f"{i:064x}", {"x": np.full(1000, i, np.float32)}, {"i": i})


def test_two_concurrent_writers_do_not_corrupt(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), 30)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    store = ArtifactStore(tmp_path)
    for i in range(30):
        np.testing.assert_array_equal(store.get_arrays(f"{i:064x}")["x"],
                                      np.full(1000, i, np.float32))
    assert not any((tmp_path / "tmp").iterdir())
