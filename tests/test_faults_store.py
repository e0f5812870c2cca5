"""The artifact store under real processes: a writer killed with -9 mid-entry, `cache clear`
while a build holds the store (waiting, refusing, or going ahead once the holder was killed),
and a clear pointed at a folder that is not a store."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from reportgen.cache import workdirs
from reportgen.cache.store import ArtifactStore
from reportgen.techniques.base import Figure

pytestmark = [pytest.mark.faults, pytest.mark.slow]

KEY_DONE, KEY_HALF = "aa" * 32, "bb" * 32

# Writes one complete entry, then stalls half-way through the second: its first file is in its
# working folder, the second never comes.
WRITER = """
import os, sys, time
from pathlib import Path
from reportgen.cache.store import ArtifactStore
from reportgen.techniques.base import Figure

root, ready = sys.argv[1], Path(sys.argv[2])

class Stalled:
    name, kind, caption, width, height = "b.png", "png", "", 1, 1

    @property
    def data(self):
        ready.write_text(str(os.getpid()))
        time.sleep(600)

store = ArtifactStore(root)
store.put_figures("%s", [Figure(name="done.png", data=b"complete")])
store.put_figures("%s", [Figure(name="a.png", data=b"first half"), Stalled()])
""" % (KEY_DONE, KEY_HALF)

# Holds the store as a build does until told to stop, then checks its entry is still there.
HOLDER = """
import sys, time
from pathlib import Path
root, ready, stop, key = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
sys.argv = ["reportgen", "build", "--models", "Tiny"]   # what the holder's note names
from reportgen.cache.store import ArtifactStore

store = ArtifactStore(root)
with store.shared_lock():
    ready.write_text("held")
    while not stop.exists():
        time.sleep(0.05)
    assert store.get_arrays(key) is not None, "the store was cleared under a build"
"""


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"helper exited early: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"helper never wrote {path}")
        time.sleep(0.02)


def _read_line(stream, timeout: float = 30.0) -> str:
    ready, _, _ = select.select([stream], [], [], timeout)
    assert ready, "no output in time"
    return stream.readline()


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "reportgen", *args]


def _cache_cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(_cli("cache", "--cache-dir", str(root), *args), capture_output=True,
                          text=True, timeout=60)


def _holder(tmp_path: Path, root: Path, key: str) -> tuple[subprocess.Popen, Path]:
    ready, stop = tmp_path / "held", tmp_path / "stop"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(root), str(ready), str(stop), key],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(ready, proc)
    return proc, stop


def test_writer_killed_mid_entry_leaves_no_entry_and_its_folder_goes_with_the_next_use(
        tmp_path):
    root = tmp_path / "cache"
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root), str(ready)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for(ready, proc)
    pid = int(ready.read_text())
    working = [p for p in (root / "tmp").iterdir() if p.name.startswith(KEY_HALF[:12])]
    assert len(working) == 1 and workdirs.writer_of(working[0].name).pid == pid
    assert (working[0] / "a.png").read_bytes() == b"first half"

    ArtifactStore(root).put_arrays("cc" * 32, {"x": np.zeros(3)}, {})   # writer still alive:
    assert working[0].is_dir()                                          # its folder stays

    os.kill(pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    store = ArtifactStore(root)
    assert store.get_figures(KEY_HALF) is None
    assert not store._dir("figures", KEY_HALF).exists()
    assert Path(store.get_figures(KEY_DONE)[0]["path"]).read_bytes() == b"complete"
    # The next use removes the dead writer's folder and finishes the job.
    listing = store.put_figures(KEY_HALF, [Figure(name="a.png", data=b"first half"),
                                           Figure(name="b.png", data=b"second half")])
    assert [Path(f["path"]).read_bytes() for f in listing] == [b"first half", b"second half"]
    assert not any((root / "tmp").iterdir())


def test_cache_clear_refuses_or_waits_while_a_build_holds_the_store(tmp_path):
    root = tmp_path / "cache"
    ArtifactStore(root).put_arrays("ab" * 32, {"x": np.zeros(1000)}, {})
    holder, stop = _holder(tmp_path, root, "ab" * 32)
    try:
        named = f"1 build using {root} (pid {holder.pid}: reportgen build --models Tiny)"
        refused = _cache_cli(root, "clear", "--no-wait")
        assert refused.returncode == 2
        assert refused.stderr.splitlines() == [
            f"Error: {named}; not clearing it. Fix: wait for it to finish, or run `reportgen "
            f"cache clear` without --no-wait to wait for it."]
        assert ArtifactStore(root).has_arrays("ab" * 32)

        info = _cache_cli(root, "info")
        assert info.stdout.splitlines()[-1].strip() == (
            f"builds using it: 1 (pid {holder.pid}: reportgen build --models Tiny)")

        waiting = subprocess.Popen(_cli("cache", "--cache-dir", str(root), "clear"),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert _read_line(waiting.stderr) == f"waiting for {named} to finish (Ctrl-C to stop)\n"
            time.sleep(0.3)
            assert waiting.poll() is None and ArtifactStore(root).has_arrays("ab" * 32)
            stop.touch()
            out, err = waiting.communicate(timeout=30)
        finally:
            waiting.kill()
        assert waiting.returncode == 0, err
        assert out.startswith("freed ") and err == ""
        assert holder.wait(timeout=30) == 0, holder.communicate()
        assert not root.exists()
    finally:
        stop.touch()
        holder.kill()
        holder.communicate()


def test_a_killed_build_does_not_block_cache_clear(tmp_path):
    root = tmp_path / "cache"
    ArtifactStore(root).put_arrays("ab" * 32, {"x": np.zeros(1000)}, {})
    holder, _ = _holder(tmp_path, root, "ab" * 32)
    os.kill(holder.pid, signal.SIGKILL)
    holder.communicate(timeout=30)
    assert ArtifactStore(root).holders() == []   # its note names a process that is gone
    done = _cache_cli(root, "clear", "--no-wait")
    assert done.returncode == 0, done.stderr
    assert not root.exists()


def test_cache_clear_refuses_a_folder_that_is_not_a_store(tmp_path):
    folder = tmp_path / "results"
    (folder / "figures").mkdir(parents=True)
    (folder / "figures" / "plot.png").write_bytes(b"mine")
    (folder / "report.md").write_text("mine")
    done = _cache_cli(folder, "clear")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"Error: {folder} is not a reportgen artifact store (it holds report.md); not deleting "
        f"it. Fix: pass the store's folder to --cache-dir (default .reportgen/cache)."]
    assert (folder / "figures" / "plot.png").read_bytes() == b"mine"
    assert (folder / "report.md").read_text() == "mine"
    assert sorted(p.name for p in folder.iterdir()) == ["figures", "report.md"]


# -- damaged entries: found before they reach a site, drawn or computed again in the same build --

@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    from trained_tiny import copy_trained_tiny

    root = tmp_path_factory.mktemp("damage") / "models"
    copy_trained_tiny(tmp_path_factory, root / "Tiny")
    return root


def _build(cwd: Path, models: Path, cache: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPORTGEN_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    return subprocess.run(_cli("--models-dir", str(models), "build", "--steps", "last",
                               "--images", "test:0-1", "--analyses", "none", "--cache-dir",
                               cache, "--site-dir", "site"),
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _site_figures(site: Path) -> dict[str, bytes]:
    return {p.relative_to(site).as_posix(): p.read_bytes()
            for p in sorted((site / "artifacts").rglob("*"))
            if p.suffix in (".png", ".svg", ".pdf", ".json", ".csv")}


def _damage(path: Path, how: int) -> None:
    """Flip a byte in the middle, or cut the file in half: in place, as a disk does."""
    data = bytearray(path.read_bytes())
    if how % 2:
        data = data[:len(data) // 2]
    else:
        data[len(data) // 2] ^= 0x5A
    with open(path, "r+b") as f:
        f.write(bytes(data))
        f.truncate()


def _damage_npz(path: Path, how: int) -> None:
    """Cut a .npz in half, or change the last byte of its first array's data (a byte in a zip
    header the reader never uses, such as a local extra field, would harm nothing)."""
    import struct
    import zipfile

    if how % 2:
        _damage(path, how)
        return
    with zipfile.ZipFile(path) as archive:
        first = archive.infolist()[0]
    data = bytearray(path.read_bytes())
    name, extra = struct.unpack_from("<HH", data, first.header_offset + 26)
    data[first.header_offset + 30 + name + extra + first.compress_size - 1] ^= 0x5A
    with open(path, "r+b") as f:
        f.write(bytes(data))


def _damage_local(root: Path, legacy: bool) -> set[str]:
    """Damage every stored PNG and the arrays every build reads (predictions, evaluation);
    `legacy`: first make the figure entries as reportgen wrote them before digests."""
    import json

    damaged = set()
    for i, png in enumerate(sorted(root.glob("figures/*/*/*.png"))):
        if legacy:
            meta = json.loads((png.parent / "meta.json").read_text())
            meta.pop("sha256", None)
            (png.parent / "meta.json").write_text(json.dumps(meta))
        _damage(png, i)
        damaged.add(png.parent.name)
    for i, meta in enumerate(sorted(root.glob("arrays/*/*/meta.json"))):
        if json.loads(meta.read_text()).get("technique") in ("predictions", "evaluation"):
            _damage_npz(meta.parent / "arrays.npz", i)
            damaged.add(meta.parent.name)
    return damaged


def _damage_remote(root: Path, mirror: Path) -> set[str]:
    """Damage every PNG in the local mirror; of those entries, every other one in the store as
    well (a byte of the PNG inside the .zip, or the .zip cut): the others are fetched again,
    these drawn again. And the arrays every build reads."""
    import json

    damaged = set()
    for i, png in enumerate(sorted(mirror.glob("figures/*/*/*.png"))):
        key = png.parent.name
        _damage(png, i)
        damaged.add(key)
        if i % 2:
            remote = root / "figures" / key[:2] / f"{key}.zip"
            data = remote.read_bytes()
            if i % 4 == 1:                         # a byte of the PNG's image data
                at = data.index(b"IDAT") + 8
                remote.write_bytes(data[:at] + bytes([data[at] ^ 0x5A]) + data[at + 1:])
            else:
                remote.write_bytes(data[:len(data) // 2])
    for i, npz in enumerate(sorted(root.glob("arrays/*/*.npz"))):
        with np.load(npz) as archive:
            meta = json.loads(archive["__meta__"].tobytes())
        if meta.get("technique") in ("predictions", "evaluation"):
            _damage_npz(npz, i)
            damaged.add(npz.stem)
    return damaged


def _clean_build(cwd: Path, models: Path, url: str) -> None:
    clean = _build(cwd, models, url)
    assert clean.returncode == 0, clean.stderr
    assert "Damaged" not in clean.stderr


@pytest.fixture(scope="module")
def clean_folder_build(tiny_models, tmp_path_factory):
    """A clean build on a folder store (site, cache): the same for both folder kinds, which
    damage copies of it."""
    work = tmp_path_factory.mktemp("clean")
    _clean_build(work, tiny_models, str(work / "cache"))
    return work


@pytest.mark.parametrize("kind", ["folder", "folder without digests", "fsspec"])
def test_damaged_figures_and_arrays_are_repaired_in_the_same_build(tmp_path, tiny_models, kind,
                                                                   request):
    """Every stored PNG and the arrays a build reads, damaged in place (a flipped byte, a file
    cut short): the next build finds each, says so in one line, draws or computes it again, and
    its site's figures decode and are the clean build's, byte for byte."""
    from PIL import Image

    if kind == "fsspec":
        url = f"file://{tmp_path}/remote"
        _clean_build(tmp_path, tiny_models, url)
    else:
        url = str(tmp_path / "cache")
        # cp -a keeps the site's figures hard links of the store's, as the build made them
        subprocess.run(["cp", "-a", f"{request.getfixturevalue('clean_folder_build')}/.",
                        str(tmp_path)], check=True)
    expected = _site_figures(tmp_path / "site")
    assert sum(name.endswith(".png") for name in expected) >= 10

    if kind == "fsspec":
        mirrors = list((tmp_path / ".reportgen" / "mirrors").iterdir())
        assert len(mirrors) == 1
        damaged = _damage_remote(tmp_path / "remote", mirrors[0])
    else:
        damaged = _damage_local(tmp_path / "cache", legacy=kind != "folder")
    assert len(damaged) >= 12

    repaired = _build(tmp_path, tiny_models, url)
    assert repaired.returncode == 0, repaired.stderr
    lines = [line for line in repaired.stderr.splitlines() if line.startswith("Damaged in")]
    said = {key: [line for line in lines if f"entry {key[:12]})" in line
                  or f"entry {key[:12]}:" in line] for key in damaged}
    assert {key: len(found) for key, found in said.items()} == {key: 1 for key in damaged}, \
        repaired.stderr
    assert len(lines) == len(damaged)
    assert all(line.endswith(("drawing it again.", "computing it again.",
                              f"fetched again from {url}.")) for line in lines)

    site = _site_figures(tmp_path / "site")
    assert site == expected
    for name in site:
        if name.endswith(".png"):
            with Image.open(tmp_path / "site" / name) as image:
                image.load()

    again = _build(tmp_path, tiny_models, url)      # what was repaired stays sound
    assert again.returncode == 0 and "Damaged" not in again.stderr, again.stderr
    assert "computed 0 · " in again.stdout and "figures drawn 0 · " in again.stdout
