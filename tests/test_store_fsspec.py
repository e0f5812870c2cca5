"""The artifact store at an fsspec URL (memory://, file://, s3:// on a local S3-compatible
server): entries found by any process that opens the same URL, written whole, damaged ones
dropped, figures served from local files, a prefix that is not a store never cleared; local
folders keep the disk store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from reportgen.cache.backends import location_of, open_store, shared_between_processes
from reportgen.cache.fsspec_store import FsspecStore
from reportgen.cache.store import ArtifactStore
from reportgen.errors import StoreError
from reportgen.techniques.base import Figure

KEY = "ab" * 32
OTHER = "cd" * 32


def _url(protocol: str, tmp_path: Path) -> str:
    if protocol == "memory":
        return f"memory://reportgen-test-{uuid.uuid4().hex}/cache"
    return f"file://{tmp_path}/remote/cache"


@pytest.fixture
def mirrors(tmp_path, monkeypatch):
    """Each test's local mirrors under its own folder (not the working folder)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path / ".reportgen" / "mirrors"


@pytest.mark.parametrize("protocol", ["memory", "file"])
def test_an_entry_written_by_one_store_is_read_whole_by_another(tmp_path, mirrors, protocol):
    url = _url(protocol, tmp_path)
    writer, reader = open_store(url), open_store(url)
    assert isinstance(writer, FsspecStore) and location_of(writer) == url
    assert not reader.has_arrays(KEY) and reader.get_arrays(KEY) is None
    arrays = {"lengths": np.linspace(0, 1, 12, dtype=np.float32).reshape(4, 3),
              "labels": np.arange(4)}
    writer.put_arrays(KEY, arrays, {"model": "Tiny", "technique": "predictions"})
    assert reader.has_arrays(KEY)               # a miss is not remembered: seen once written
    got = reader.get_arrays(KEY)
    assert set(got) == {"lengths", "labels"}     # the metadata travels inside, not as an array
    np.testing.assert_array_equal(got["lengths"], arrays["lengths"])
    assert got["lengths"].dtype == np.float32 and got["labels"].dtype == arrays["labels"].dtype
    info = reader.info()
    assert info["root"] == url and info["is_store"]
    assert info["arrays"]["entries"] == 1 and info["tmp"]["entries"] == 0


@pytest.mark.parametrize("protocol", ["memory", "file"])
def test_figures_are_local_files_and_reach_another_client_through_the_store(
        tmp_path, mirrors, protocol):
    url = _url(protocol, tmp_path)
    drawn = [Figure(name="predictions.png", data=b"\x89PNG fake", kind="png", caption="c",
                    width=3, height=2),
             Figure(name="predictions.json", data=b'{"a": 1}', kind="json")]
    listing = open_store(url).put_figures(OTHER, drawn)
    assert [Path(f["path"]).read_bytes() for f in listing] == [f.data for f in drawn]

    other = open_store(url)
    other.root = tmp_path / "another-client-mirror"   # a client with an empty mirror
    fetched = other.get_figures(OTHER)
    assert [(f["name"], f["kind"], f["caption"], f["width"], f["height"]) for f in fetched] == [
        ("predictions.png", "png", "c", 3, 2), ("predictions.json", "json", "", 0, 0)]
    assert all(Path(f["path"]).is_relative_to(other.root) for f in fetched)
    assert [Path(f["path"]).read_bytes() for f in fetched] == [f.data for f in drawn]
    assert other.get_figures(KEY) is None


def test_a_damaged_object_is_dropped_and_reads_as_missing(tmp_path, mirrors):
    store = open_store(_url("file", tmp_path))
    store.put_arrays(KEY, {"x": np.ones(3)}, {})
    path = Path(store._path("arrays", KEY))
    path.write_bytes(path.read_bytes()[:40])         # truncated by hand
    fresh = open_store(store.location)
    assert fresh.get_arrays(KEY) is None and not path.exists()
    assert not fresh.has_arrays(KEY)


def test_a_writer_killed_before_its_rename_leaves_no_entry_and_its_leftover_goes(
        tmp_path, mirrors):
    """On a filesystem without atomic puts an entry is written under tmp/ and renamed: a killed
    writer's object never shows as an entry, and the next store removes it (its pid is gone)."""
    url = _url("file", tmp_path)
    script = (
        "import os, numpy as np\n"
        "from reportgen.cache.backends import open_store\n"
        "store = open_store(os.environ['URL'])\n"
        "move = store.fs.mv\n"
        "store.fs.mv = lambda src, dst, **k: (os.kill(os.getpid(), 9) if dst.endswith('.npz')\n"
        "                                     else move(src, dst, **k))   # killed at the rename\n"
        f"store.put_arrays('{KEY}', {{'x': np.ones(1000)}}, {{}})\n")
    env = {**os.environ, "URL": url, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, timeout=120,
                          capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr
    root = tmp_path / "remote" / "cache"
    left = list((root / "tmp").iterdir())
    assert len(left) == 1 and left[0].stat().st_size > 8000      # the whole object, not renamed
    store = open_store(url)
    assert not store.has_arrays(KEY) and store.get_arrays(KEY) is None
    store.put_arrays(OTHER, {"x": np.zeros(2)}, {})              # the first write sweeps tmp/
    assert list((root / "tmp").iterdir()) == []
    assert [p.name for p in (root / "arrays").rglob("*.npz")] == [f"{OTHER}.npz"]


def test_clear_empties_a_store_and_refuses_a_prefix_that_is_not_one(tmp_path, mirrors):
    url = _url("file", tmp_path)
    store = open_store(url)
    store.put_arrays(KEY, {"x": np.ones(3)}, {})
    store.put_figures(OTHER, [Figure(name="a.json", data=b"{}", kind="json")])
    assert store.clear() > 0
    assert not (tmp_path / "remote" / "cache").exists() or not any(
        (tmp_path / "remote" / "cache").rglob("*.npz"))
    assert not store.has_arrays(KEY) and open_store(url).get_figures(OTHER) is None

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("x")
    (tmp_path / "mine" / "arrays").mkdir()
    with pytest.raises(StoreError, match="not a reportgen artifact store") as err:
        open_store(f"file://{tmp_path}/mine").clear()
    assert "\n" not in err.value.message
    assert (tmp_path / "mine" / "thesis.tex").exists()


def test_folders_keep_the_disk_store_and_urls_are_checked_in_one_line(tmp_path):
    assert type(open_store(tmp_path / "cache")) is ArtifactStore
    assert location_of(open_store("rel/cache")) == str(Path("rel/cache").absolute())
    assert not shared_between_processes(open_store("memory://x/y"))
    assert shared_between_processes(open_store(f"file://{tmp_path}/c"))
    with pytest.raises(StoreError) as err:
        open_store("nosuchfs://bucket/prefix")
    assert "nosuchfs://bucket/prefix" in err.value.message and "\n" not in err.value.message


def test_the_cache_command_reads_a_store_at_a_url(tmp_path, mirrors):
    from click.testing import CliRunner

    from reportgen.cli import main

    url = _url("file", tmp_path)
    open_store(url).put_arrays(KEY, {"x": np.ones(3)}, {})
    result = CliRunner().invoke(main, ["cache", "--cache-dir", url, "info"])
    assert result.exit_code == 0, result.output
    assert f"store: {url}" in result.output and " 1 entries" in result.output
    result = CliRunner().invoke(main, ["cache", "--cache-dir", url, "clear"])
    assert result.exit_code == 0 and not open_store(url).has_arrays(KEY)


# -- S3, on a local S3-compatible server (moto) ---------------------------------------------------

@pytest.fixture
def s3_url(monkeypatch, mirrors):
    server_module = pytest.importorskip("moto.server", reason="moto[server] is not installed")
    pytest.importorskip("s3fs", reason="s3fs is not installed")
    from s3_server import start_s3

    endpoint, stop = start_s3(server_module)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    for name, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    import boto3

    boto3.client("s3").create_bucket(Bucket="reportgen")
    yield "s3://reportgen/cache"
    stop()


def test_a_store_on_s3_is_shared_by_every_client(s3_url, tmp_path):
    writer, reader = open_store(s3_url), open_store(s3_url)
    assert writer.protocol == "s3"
    writer.put_arrays(KEY, {"x": np.arange(5, dtype=np.float32)}, {"model": "Tiny"})
    writer.put_figures(OTHER, [Figure(name="a.json", data=b'{"v": 2}', kind="json")])
    reader.root = tmp_path / "reader-mirror"
    np.testing.assert_array_equal(reader.get_arrays(KEY)["x"], np.arange(5))
    assert json.loads(Path(reader.get_figures(OTHER)[0]["path"]).read_bytes()) == {"v": 2}
    info = reader.info()
    assert info["arrays"]["entries"] == 1 and info["figures"]["entries"] == 1
    reader.clear()
    assert open_store(s3_url).get_arrays(KEY) is None


# -- damage: what the store serves is what was stored -------------------------------------------

def _png(seed: int) -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 255, (10, 10), np.uint8)).save(
        out, format="PNG")
    return out.getvalue()


def _flip(data: bytes, at: int) -> bytes:
    damaged = bytearray(data)
    damaged[at] ^= 0x5A
    return bytes(damaged)


def _lines(err: str, key: str) -> list[str]:
    return [line for line in err.splitlines() if key[:12] in line]


def test_a_damaged_mirror_copy_is_fetched_again_and_reported_once(tmp_path, mirrors, capsys):
    url = _url("file", tmp_path)
    png = _png(0)
    store = open_store(url)
    listing = store.put_figures(OTHER, [Figure(name="rpv.png", data=png, width=10, height=10)],
                                about="rpv (Tiny, step 1-5, test-0)")
    local = Path(listing[0]["path"])
    local.write_bytes(_flip(png, len(png) // 2))       # the local mirror's copy, damaged
    capsys.readouterr()
    again = open_store(url)
    fetched = again.get_figures(OTHER)
    assert Path(fetched[0]["path"]).read_bytes() == png
    assert again.get_figures(OTHER) == fetched
    assert _lines(capsys.readouterr().err, OTHER) == [
        f"Damaged in the artifact store {url}: rpv (Tiny, step 1-5, test-0) (figures entry "
        f"{OTHER[:12]}): rpv.png does not match the sha256 recorded when it was stored (in the "
        f"local copy {again.root}); removed, fetched again from {url}."]


@pytest.mark.parametrize("damage", ["flip", "truncate", "mirror and store"])
def test_a_damaged_figures_object_reads_as_missing_and_is_reported_once(
        tmp_path, mirrors, capsys, damage):
    url = _url("file", tmp_path)
    png = _png(1)
    store = open_store(url)
    listing = store.put_figures(OTHER, [Figure(name="rpv.png", data=png, width=10, height=10)],
                                about="rpv (Tiny, step 1-5, test-0)")
    remote = Path(store._path("figures", OTHER))
    stored = remote.read_bytes()
    at = stored.index(png) + len(png) // 2                 # inside the PNG, inside the zip
    remote.write_bytes(_flip(stored, at) if damage != "truncate" else stored[:at])
    if damage == "mirror and store":
        Path(listing[0]["path"]).write_bytes(png[:-5])
    else:
        store.mirror.clear()                                # a client that never saw it
    capsys.readouterr()
    reader = open_store(url)
    assert reader.get_figures(OTHER) is None and reader.get_figures(OTHER) is None
    assert not remote.exists()
    lines = _lines(capsys.readouterr().err, OTHER)
    named = (f"figures entry {OTHER[:12]}" if damage == "truncate"      # its listing is lost
             else f"rpv (Tiny, step 1-5, test-0) (figures entry {OTHER[:12]})")
    assert len(lines) == 1 and lines[0].startswith(
        f"Damaged in the artifact store {url}: {named}: ")
    assert lines[0].endswith("; removed, drawing it again.")
    reader.put_figures(OTHER, [Figure(name="rpv.png", data=png, width=10, height=10)])
    assert Path(open_store(url).get_figures(OTHER)[0]["path"]).read_bytes() == png


def test_a_damaged_arrays_object_is_reported_once_naming_the_result(tmp_path, mirrors, capsys):
    url = _url("file", tmp_path)
    store = open_store(url)
    store.put_arrays(KEY, {"x": np.arange(500, dtype=np.float32)},
                     {"model": "Tiny", "step": "1-5", "technique": "predictions",
                      "input": "test-0"})
    path = Path(store._path("arrays", KEY))
    path.write_bytes(_flip(path.read_bytes(), 700))     # inside the array's data
    capsys.readouterr()
    reader = open_store(url)
    assert reader.get_arrays(KEY) is None and reader.get_arrays(KEY) is None
    lines = _lines(capsys.readouterr().err, KEY)
    assert len(lines) == 1 and lines[0].startswith(
        f"Damaged in the artifact store {url}: predictions (Tiny, step 1-5, test-0) (arrays "
        f"entry {KEY[:12]}): its .npz cannot be read (")
    assert "CRC" in lines[0] and KEY in reader.damage.damaged and not path.exists()
