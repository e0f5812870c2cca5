"""Artifact store and cache keys: content addressing, atomicity, concurrency."""

import hashlib
import json
import multiprocessing
import os
import time
from pathlib import Path

import numpy as np
import pytest

from reportgen.cache.keys import artifact_key, file_digest
from reportgen.cache.store import ArtifactStore
from reportgen.techniques.base import Figure

BASE = dict(model="m", weights="w", input="i", technique="rpv", version=1,
            params={"method": "modified"}, code="c")


def test_key_changes_when_any_input_changes_and_only_then():
    key = artifact_key(**BASE)
    assert artifact_key(**BASE) == key
    assert artifact_key(**{**BASE, "params": {"method": "modified"}}) == key
    for field, value in [("model", "m2"), ("weights", "w2"), ("input", "i2"),
                         ("technique", "gradcam_pp"), ("version", 2),
                         ("params", {"method": "original"}), ("code", "c2")]:
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


def test_failed_write_leaves_no_entry(tmp_path, monkeypatch):
    store = ArtifactStore(tmp_path)

    def killed_mid_write(file, **arrays):
        Path(file).write_bytes(b"PK\x03\x04 half an archive")
        raise RuntimeError("killed mid-write")

    monkeypatch.setattr(np, "savez", killed_mid_write)
    with pytest.raises(RuntimeError):
        store.put_arrays("ef" * 32, {"a": np.zeros(3)}, {})
    monkeypatch.undo()
    assert not store.has_arrays("ef" * 32)
    assert store.get_arrays("ef" * 32) is None
    assert not any((tmp_path / "tmp").iterdir())
    store.put_arrays("ef" * 32, {"a": np.zeros(3)}, {})  # the next build finishes the job
    assert store.has_arrays("ef" * 32)


def test_figures_round_trip(tmp_path):
    store = ArtifactStore(tmp_path)
    figs = [Figure(name="a.png", data=b"\x89PNG...", width=3, height=4, caption="c"),
            Figure(name="a.svg", data=b"<svg/>", kind="svg")]
    listing = store.put_figures("12" * 32, figs)
    assert [f["name"] for f in listing] == ["a.png", "a.svg"]
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


# -- working folders left by killed writers ------------------------------------------------------
def _dead_pid() -> int:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(proc.stdout)


def test_next_store_use_removes_only_working_folders_of_gone_writers(tmp_path):
    from reportgen.cache import workdirs

    root = tmp_path / "cache"
    ArtifactStore(root).put_arrays("aa" * 32, {"x": np.zeros(2)}, {})
    host, tmp = workdirs.this_host(), root / "tmp"
    dead = tmp / f"0123456789ab@{host}@{_dead_pid()}@00ff00ff"
    live = tmp / f"0123456789ab@{host}@{os.getppid()}@00ff00ff"
    far_new = tmp / "0123456789ab@otherhost@1@00ff00ff"
    far_old = tmp / "0123456789ab@otherhost@2@00ff00ff"
    odd_new, odd_old = tmp / "hand-made", tmp / "hand-made-old"
    for folder in (dead, live, far_new, far_old, odd_new, odd_old):
        folder.mkdir()
        (folder / "arrays.npz").write_bytes(b"half")
    day_ago = time.time() - 25 * 3600
    for folder in (far_old, odd_old):
        os.utime(folder, (day_ago, day_ago))
    outside = tmp_path / "precious"      # a stale-looking link must not lead the cleaner out
    outside.mkdir()
    (outside / "keep.txt").write_text("x")
    link = tmp / f"0123456789ab@{host}@{_dead_pid()}@11ff00ff"
    link.symlink_to(outside)
    beside = root / dead.name            # stale-looking, but not under tmp/
    beside.mkdir()

    ArtifactStore(root).put_arrays("bb" * 32, {"x": np.ones(2)}, {})

    assert sorted(p.name for p in tmp.iterdir()) == sorted(
        [live.name, far_new.name, odd_new.name])
    assert (outside / "keep.txt").read_text() == "x" and beside.is_dir()
    np.testing.assert_array_equal(ArtifactStore(root).get_arrays("aa" * 32)["x"], np.zeros(2))


def test_working_folders_name_their_writer(tmp_path, monkeypatch):
    from reportgen.cache import workdirs

    seen = []

    def spy(tmp):
        seen.append(tmp.name)
        np.save(tmp / "x.npy", np.zeros(1))
    store = ArtifactStore(tmp_path)
    store._commit("arrays", "cc" * 32, spy)
    writer = workdirs.writer_of(seen[0])
    assert (writer.host, writer.pid) == (workdirs.this_host(), os.getpid())
    assert writer.prefix == ("cc" * 32)[:12]


# -- the marker and what clear may delete ------------------------------------------------------
def test_clear_refuses_a_folder_that_is_not_a_store(tmp_path):
    from reportgen.errors import StoreError

    (tmp_path / "thesis.tex").write_text("years of work")
    (tmp_path / "arrays").mkdir()
    with pytest.raises(StoreError) as err:
        ArtifactStore(tmp_path).clear()
    assert "not a reportgen artifact store" in err.value.message
    assert "thesis.tex" in err.value.message and "\n" not in err.value.message
    assert (tmp_path / "thesis.tex").read_text() == "years of work"
    assert (tmp_path / "arrays").is_dir()


def test_clear_of_a_store_beside_user_files_removes_only_what_the_store_made(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    store = ArtifactStore(tmp_path)
    store.put_arrays("ab" * 32, {"x": np.zeros(100)}, {})
    assert (tmp_path / ".reportgen-store").is_file()
    with store.shared_lock():
        pass
    assert store.clear() > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [".reportgen-store", "notes.txt"]
    assert ArtifactStore(tmp_path).clear() == 0 and (tmp_path / "notes.txt").is_file()


def test_clear_recognises_a_store_made_before_the_marker(tmp_path):
    root = tmp_path / "cache"
    ArtifactStore(root).put_arrays("ab" * 32, {"x": np.zeros(100)}, {})
    (root / ".reportgen-store").unlink()
    assert ArtifactStore(root).clear() > 0 and not root.exists()


def test_clear_unlinks_a_symlink_in_place_of_a_store_folder(tmp_path):
    root, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("x")
    ArtifactStore(root).put_arrays("ab" * 32, {"x": np.zeros(3)}, {})
    (root / "figures").symlink_to(elsewhere)
    ArtifactStore(root).clear()
    assert not root.exists() and (elsewhere / "keep.txt").read_text() == "x"


def test_clear_without_waiting_refuses_while_a_build_holds_the_store(tmp_path):
    from reportgen.cache.store import StoreBusyError

    store = ArtifactStore(tmp_path / "cache")
    store.put_arrays("ab" * 32, {"x": np.zeros(3)}, {})
    with store.shared_lock():
        with pytest.raises(StoreBusyError) as err:
            ArtifactStore(tmp_path / "cache").clear(wait=False)
        assert f"1 build using {tmp_path / 'cache'} (pid {os.getpid()}" in err.value.message
        assert store.has_arrays("ab" * 32)
    assert ArtifactStore(tmp_path / "cache").clear(wait=False) > 0


# -- an unusable location: one line naming the folder, the OS error and the fix ----------------
@pytest.mark.parametrize("blocked", ["store", "parent"])
def test_a_file_where_the_store_should_be_is_a_store_error(tmp_path, blocked):
    from reportgen.errors import StoreError

    (tmp_path / "x").write_text("a file")
    root = tmp_path / "x" if blocked == "store" else tmp_path / "x" / "cache"
    for use in (lambda s: s.put_arrays("ab" * 32, {"x": np.zeros(3)}, {}),
                lambda s: s.shared_lock().__enter__()):
        with pytest.raises(StoreError) as err:
            use(ArtifactStore(root))
        message = err.value.message
        assert str(root) in message and f"{tmp_path / 'x'} is a file" in message
        assert "--cache-dir" in message and "\n" not in message
    assert (tmp_path / "x").read_text() == "a file"


def test_disk_full_while_writing_is_a_store_error_and_leaves_nothing(tmp_path, monkeypatch):
    import errno

    from reportgen.errors import StoreError

    store = ArtifactStore(tmp_path)

    def full(path, **arrays):
        with open(path, "wb") as f:
            f.write(b"PK\x03\x04")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    monkeypatch.setattr(np, "savez", full)
    with pytest.raises(StoreError) as err:
        store.put_arrays("ab" * 32, {"x": np.zeros(3)}, {})
    assert str(tmp_path) in err.value.message and "No space left on device" in err.value.message
    assert "free disk space" in err.value.message
    assert not store.has_arrays("ab" * 32) and not any((tmp_path / "tmp").iterdir())


def test_permission_denied_is_a_store_error(tmp_path, monkeypatch):
    from reportgen.errors import StoreError

    real_mkdir = Path.mkdir

    def denied(self, *a, **k):   # root ignores permission bits: simulate the refusal
        if self == tmp_path / "cache":
            raise PermissionError(13, "Permission denied", str(self))
        return real_mkdir(self, *a, **k)
    monkeypatch.setattr(Path, "mkdir", denied)
    with pytest.raises(StoreError) as err:
        ArtifactStore(tmp_path / "cache").put_arrays("ab" * 32, {"x": np.zeros(3)}, {})
    assert err.value.message == (f"Cannot write to the artifact store {tmp_path / 'cache'}: "
                                 f"Permission denied. Fix: fix the permissions of "
                                 f"{tmp_path / 'cache'}, or pass --cache-dir a writable folder.")


# -- readers: a complete entry or None --------------------------------------------------------
def test_figures_that_vanish_read_as_missing_and_are_rewritten(tmp_path):
    store = ArtifactStore(tmp_path)
    figs = [Figure(name="a.png", data=b"png"), Figure(name="a.svg", data=b"svg", kind="svg")]
    key = "12" * 32
    store.put_figures(key, figs)
    (store._dir("figures", key) / "a.svg").unlink()
    assert store.get_figures(key) is None
    listing = store.put_figures(key, figs)
    assert [Path(f["path"]).read_bytes() for f in listing] == [b"png", b"svg"]
    (store._dir("figures", key) / "meta.json").write_text("{not json")
    assert store.get_figures(key) is None
    import shutil
    shutil.rmtree(tmp_path / "figures")
    assert store.get_figures(key) is None
    assert store.put_figures(key, figs)[1]["name"] == "a.svg"


def test_put_figures_rewrites_an_entry_cleared_right_after_writing(tmp_path, monkeypatch):
    import shutil

    store = ArtifactStore(tmp_path)
    commits, real_commit = [], store._commit_entry

    def commit_then_clear(kind, key, fill):
        final, ours = real_commit(kind, key, fill)
        commits.append(key)
        if len(commits) == 1:
            shutil.rmtree(final)
        return final, ours
    monkeypatch.setattr(store, "_commit_entry", commit_then_clear)
    listing = store.put_figures("34" * 32, [Figure(name="a.png", data=b"png")])
    assert len(commits) == 2 and Path(listing[0]["path"]).read_bytes() == b"png"


def test_arrays_that_vanish_or_are_damaged_read_as_missing(tmp_path):
    store = ArtifactStore(tmp_path)
    store.put_arrays("ab" * 32, {"x": np.zeros(3)}, {})
    (store._dir("arrays", "ab" * 32) / "arrays.npz").unlink()
    assert store.get_arrays("ab" * 32) is None
    assert not store.has_arrays("ab" * 32)     # dropped, so the next plan computes it again
    store.put_arrays("ab" * 32, {"x": np.ones(3)}, {})
    np.testing.assert_array_equal(store.get_arrays("ab" * 32)["x"], np.ones(3))
    store.put_arrays("cd" * 32, {"x": np.zeros(3)}, {})
    npz = store._dir("arrays", "cd" * 32) / "arrays.npz"
    npz.write_bytes(npz.read_bytes()[:40])
    assert store.get_arrays("cd" * 32) is None and not store.has_arrays("cd" * 32)
    store.put_arrays("cd" * 32, {"x": np.ones(3)}, {})
    np.testing.assert_array_equal(store.get_arrays("cd" * 32)["x"], np.ones(3))


def test_cache_cli_info_and_clear_one_line_per_fact(tmp_path):
    from click.testing import CliRunner

    from reportgen.cli import main

    root = tmp_path / "cache"
    ArtifactStore(root).put_arrays("ab" * 32, {"x": np.zeros(1000)}, {})
    out = CliRunner().invoke(main, ["cache", "--cache-dir", str(root), "info"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0] == f"store: {root}"
    assert lines[1].split()[:3] == ["arrays", "1", "entries"]
    assert lines[-1].strip() == "builds using it: 0"
    out = CliRunner().invoke(main, ["cache", "--cache-dir", str(root), "clear", "--no-wait"])
    assert out.exit_code == 0 and out.output == "freed 0.0 MB\n" and not root.exists()
    (tmp_path / "mine.txt").write_text("x")
    out = CliRunner().invoke(main, ["cache", "--cache-dir", str(tmp_path), "clear"])
    assert out.exit_code == 2 and len(out.output.splitlines()) == 1
    assert out.output.startswith(f"Error: {tmp_path} is not a reportgen artifact store")
    assert (tmp_path / "mine.txt").is_file()


def test_a_write_whose_working_folder_is_deleted_under_it_starts_over(tmp_path, monkeypatch):
    import shutil

    store = ArtifactStore(tmp_path)
    real_savez, calls = np.savez, []

    def savez_then_clear(path, **arrays):
        real_savez(path, **arrays)
        calls.append(path)
        if len(calls) == 1:
            shutil.rmtree(tmp_path / "tmp")   # a clear that did not wait for the lock
    monkeypatch.setattr(np, "savez", savez_then_clear)
    store.put_arrays("ab" * 32, {"x": np.arange(3)}, {})
    assert len(calls) == 2
    np.testing.assert_array_equal(store.get_arrays("ab" * 32)["x"], np.arange(3))


def test_arrays_read_back_from_memory_are_the_stored_ones_and_read_only(tmp_path, monkeypatch):
    """What a build stored comes back from memory (no .npz parse), equal to what a fresh store
    reads from disk, and no caller can change it for the next."""
    import reportgen.cache.store as store_module

    store = ArtifactStore(tmp_path)
    original = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([3, 1])}
    store.put_arrays("ab" * 32, original, {})
    original["a"][0, 0] = 99          # the caller's own array: the stored entry keeps its value
    parsed = []
    monkeypatch.setattr(store_module, "read_npz", lambda f: parsed.append(f) or {})
    got = store.get_arrays("ab" * 32)
    assert parsed == []
    monkeypatch.undo()
    fresh = ArtifactStore(tmp_path).get_arrays("ab" * 32)
    for name in ("a", "b"):
        np.testing.assert_array_equal(got[name], fresh[name])
    assert got["a"][0, 0] == 0
    with pytest.raises(ValueError):
        got["a"][0, 0] = 5
    # an entry removed from disk is gone, memory or not
    import shutil
    shutil.rmtree(store._dir("arrays", "ab" * 32))
    assert store.get_arrays("ab" * 32) is None


def test_recent_arrays_keep_within_their_budget():
    from reportgen.cache.recent import RecentArrays

    recent = RecentArrays(budget=3 * 800)
    for i in range(5):
        recent.remember(str(i), {"x": np.zeros(100)})      # 800 bytes each
    assert [recent.get(str(i)) is not None for i in range(5)] == [False, False, True, True, True]
    recent.get("2")                                         # used last: kept over 3
    recent.remember("5", {"x": np.zeros(100)})
    assert recent.get("3") is None and recent.get("2") is not None
    recent.remember("big", {"x": np.zeros(1000)})           # larger than the budget: not kept
    assert recent.get("big") is None and recent.get("5") is not None


# -- damage: every file served is the file stored ----------------------------------------------
def _png(seed: int = 0, size: int = 12) -> bytes:
    """A real PNG (Pillow's encoder), with several chunks."""
    import io

    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 255, (size, size, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG", pnginfo=None)
    return out.getvalue()


def _decodes(data: bytes) -> bool:
    import io

    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
        return True
    except Exception:
        return False


def _flip(path: Path, at: int) -> None:
    """Damage a file in place: one byte changed, same size."""
    data = bytearray(path.read_bytes())
    data[at] ^= 0x5A
    path.write_bytes(bytes(data))


def _damage_lines(err: str, key: str) -> list[str]:
    return [line for line in err.splitlines() if key[:12] in line]


def test_every_single_byte_change_of_a_png_is_found_by_its_structure():
    """The check for entries stored without digests: any one byte changed anywhere in a PNG
    (signature, lengths, types, data, CRCs) or a PNG cut anywhere is found, where Pillow alone
    decodes some of these damaged files without complaint."""
    from reportgen.cache.integrity import png_problem

    png = _png()
    assert png_problem(png) is None and _decodes(png)
    missed, pillow_missed = [], 0
    for at in range(len(png)):
        damaged = bytearray(png)
        damaged[at] ^= 0x5A
        if png_problem(bytes(damaged)) is None:
            missed.append(at)
        pillow_missed += _decodes(bytes(damaged))
    assert missed == []
    assert pillow_missed > 0          # why decoding is no check
    assert all(png_problem(png[:n]) is not None for n in range(len(png)))
    assert png_problem(png + b"\0") is not None


def test_a_damaged_figure_reads_as_missing_is_removed_and_reported_once(tmp_path, capsys):
    store = ArtifactStore(tmp_path)
    png, svg = _png(1), b"<svg xmlns='http://www.w3.org/2000/svg'></svg>\n"
    figures = [Figure(name="rpv.png", data=png, width=12, height=12, caption="c"),
               Figure(name="rpv.svg", data=svg, kind="svg")]
    for key, damage in (("a1" * 32, lambda p: _flip(p, len(png) // 2)),
                        ("a2" * 32, lambda p: p.write_bytes(png[:len(png) // 3]))):
        store.put_figures(key, figures, about="rpv (Tiny, step 1-5, test-0)")
        meta = json.loads((store._dir("figures", key) / "meta.json").read_text())
        assert meta["sha256"] == {"rpv.png": hashlib.sha256(png).hexdigest(),
                                  "rpv.svg": hashlib.sha256(svg).hexdigest()}
        assert store.get_figures(key) is not None
        damage(store._dir("figures", key) / "rpv.png")
        capsys.readouterr()
        assert store.get_figures(key) is None and store.get_figures(key) is None
        assert not store._dir("figures", key).exists()
        lines = _damage_lines(capsys.readouterr().err, key)
        assert lines == [f"Damaged in the artifact store {tmp_path}: rpv (Tiny, step 1-5, "
                         f"test-0) (figures entry {key[:12]}): rpv.png does not match the "
                         f"sha256 recorded when it was stored; removed, drawing it again."]
        listing = store.put_figures(key, figures)
        assert [Path(f["path"]).read_bytes() for f in listing] == [png, svg]
        assert store.get_figures(key) is not None
    # a file replaced by another of the same size is no better than a damaged one
    key = "a3" * 32
    store.put_figures(key, figures)
    (store._dir("figures", key) / "rpv.png").write_bytes(_png(2))
    assert len(_png(2)) == len(png) and store.get_figures(key) is None


def _strip_digests(entry: Path) -> None:
    """Make an entry as the store wrote it before digests were recorded."""
    meta = json.loads((entry / "meta.json").read_text())
    del meta["sha256"]
    (entry / "meta.json").write_text(json.dumps(meta))


def test_entries_stored_without_digests_are_served_when_their_structure_holds(tmp_path,
                                                                               capsys):
    store = ArtifactStore(tmp_path)
    good = [Figure(name="x.png", data=_png(3), width=12, height=12),
            Figure(name="x.svg", data=b"<svg>\n</svg>\n", kind="svg"),
            Figure(name="x.pdf", data=b"%PDF-1.4\n...\n%%EOF\n", kind="pdf"),
            Figure(name="x.json", data=b'{"a": [1, 2]}', kind="json"),
            Figure(name="x.csv", data=b"a,b\n1,2\n", kind="csv")]
    damages = {"x.png": lambda p: _flip(p, 40), "x.svg": lambda p: p.write_bytes(b"<svg>\n"),
               "x.pdf": lambda p: p.write_bytes(p.read_bytes()[:12]),
               "x.json": lambda p: p.write_bytes(b'{"a": [1,'),
               "x.csv": lambda p: p.write_bytes(b"a,\xff\n")}
    for i, (name, damage) in enumerate(damages.items()):
        key = f"{i:02x}" * 32
        store.put_figures(key, good)
        _strip_digests(store._dir("figures", key))
        assert [f["name"] for f in store.get_figures(key)] == [f.name for f in good]
        damage(store._dir("figures", key) / name)
        capsys.readouterr()
        assert store.get_figures(key) is None, name
        assert len(_damage_lines(capsys.readouterr().err, key)) == 1
    assert not any((tmp_path / "figures").glob("*/*/meta.json"))


def test_damaged_arrays_are_removed_and_reported_once_naming_the_result(tmp_path, capsys):
    store = ArtifactStore(tmp_path)
    meta = {"model": "Tiny", "step": "1-5", "technique": "rpv", "input": "test-0"}
    for key, damage in (("b1" * 32, lambda p: _flip(p, p.stat().st_size // 2)),
                        ("b2" * 32, lambda p: p.write_bytes(p.read_bytes()[:-30]))):
        store.put_arrays(key, {"x": np.arange(1000, dtype=np.float32)}, meta)
        damage(store._dir("arrays", key) / "arrays.npz")
        capsys.readouterr()
        fresh = ArtifactStore(tmp_path)           # not this store's memory: the file
        assert fresh.get_arrays(key) is None and fresh.get_arrays(key) is None
        assert not fresh.has_arrays(key)
        lines = _damage_lines(capsys.readouterr().err, key)
        assert len(lines) == 1 and lines[0].startswith(
            f"Damaged in the artifact store {tmp_path}: rpv (Tiny, step 1-5, test-0) "
            f"(arrays entry {key[:12]}): arrays.npz cannot be read (")
        assert lines[0].endswith("; removed, computing it again.")
        assert key in fresh.damage.damaged


def test_any_one_byte_changed_in_a_stored_npz_raises_or_leaves_every_array_as_written():
    """The arrays' check: each member's CRC-32 and the count of members. Changing any one byte
    of an archive, or cutting it anywhere, never gives other numbers or fewer arrays, where
    numpy alone can drop a member whose directory entry was hit."""
    import io
    import zipfile

    from reportgen.cache.npz import read_npz

    arrays = {"maps": np.random.default_rng(0).random((4, 5), dtype=np.float32),
              "labels": np.arange(7), "__meta__": np.frombuffer(b'{"technique": "rpv"}',
                                                                 np.uint8)}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    data = buffer.getvalue()
    failures = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile)

    def unchanged(got):
        return set(got) == set(arrays) and all(
            got[k].dtype == v.dtype and np.array_equal(got[k], v) for k, v in arrays.items())

    assert unchanged(read_npz(io.BytesIO(data)))
    wrong, numpy_alone_wrong = [], 0
    for at in range(len(data)):
        damaged = bytearray(data)
        damaged[at] ^= 0x5A
        try:
            with np.load(io.BytesIO(bytes(damaged))) as plain:
                numpy_alone_wrong += len(plain.files) < len(arrays)
        except (*failures, NotImplementedError):
            pass
        try:
            got = read_npz(io.BytesIO(bytes(damaged)))
        except failures:
            continue
        if not unchanged(got):
            wrong.append(at)
    assert wrong == []
    assert numpy_alone_wrong > 0              # why the members are counted
    for end in range(len(data)):
        with pytest.raises(failures):
            read_npz(io.BytesIO(data[:end]))
