"""The artifact store: arrays (.npz, no pickle) + a JSON sidecar, and rendered files.

Layout: ROOT/arrays/ab/<key>/{arrays.npz, meta.json}, ROOT/figures/ab/<key>/{files, meta.json},
ROOT/tmp/ (private working folders), ROOT/store.lock and the marker file ROOT/.reportgen-store.
An entry is written in a private temporary folder and renamed into place in one step, so a
killed build never leaves a half-written entry and two builds sharing a store cannot corrupt
it (the second rename finds the entry there and drops its own copy). The working folder a
killed build leaves is removed by the next use of the store (see workdirs.py).

Builds hold `shared_lock()`; `clear()` takes the lock alone, so it never deletes entries under
a running build. Readers return a complete entry or None, never a half one, and never a damaged
one: each figure file is checked against the sha256 its meta.json recorded, arrays against the
CRC-32s of their .npz (integrity.py). A damaged entry is removed, reported once in one line,
and reads as missing, so the caller computes or draws it again. The arrays a store object wrote
or read last are also kept in memory (recent.py) while their file is unchanged.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import threading
import time
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from reportgen import console, file_locks
from reportgen.cache import integrity, locking, workdirs
from reportgen.cache.npz import read_npz
from reportgen.cache.recent import RecentArrays
from reportgen.errors import StoreError
from reportgen.sizes import free_space, size_text

DEFAULT_CACHE_DIR = Path(".reportgen/cache")
MARKER = ".reportgen-store"
KINDS = ("arrays", "figures")
STORE_NAMES = frozenset({*KINDS, "tmp", locking.LOCK_NAME, MARKER})
_MARKER_TEXT = ("This folder is a reportgen artifact store (see README, 'The artifact store').\n"
                "`reportgen cache clear` empties it; everything here can be recomputed.\n")
_PUT_ATTEMPTS = 3


class StoreBusyError(StoreError):
    """`clear(wait=False)` while builds hold the store."""


class ArtifactStore:
    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else Path(
            os.environ.get("REPORTGEN_CACHE", DEFAULT_CACHE_DIR))
        self._ready = False
        self._ready_lock = threading.Lock()
        self._recent = RecentArrays()      # what this build stored or read last
        self._parents: set[Path] = set()   # entry folders' parents known to exist
        self.damage = integrity.DamageReport(str(self.root))   # damaged entries, said once

    # -- paths ------------------------------------------------------------------------------
    def _dir(self, kind: str, key: str) -> Path:
        return self.root / kind / key[:2] / key

    @property
    def _tmp(self) -> Path:
        return self.root / "tmp"

    def _prepare(self) -> None:
        """Create the store (with its marker) and remove what killed writers left in tmp/;
        once per store object."""
        if self._ready:
            return
        with self._ready_lock:
            if self._ready:
                return
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                self._mark()
                self._tmp.mkdir(exist_ok=True)
            except OSError as exc:
                raise store_error(self.root, exc) from exc
            removed = workdirs.remove_stale(self._tmp)
            if removed:
                console.notice(f"Removed {removed} working folder{'s' * (removed != 1)} left "
                               f"in {self._tmp} by interrupted builds.")
            self._ready = True

    def _mark(self) -> None:
        """Write the marker that says this folder is a store. Not into a folder that already
        holds an `arrays/`, `figures/` or `tmp/` the store did not make (clear refuses those)."""
        marker = self.root / MARKER
        if marker.is_file():
            return
        children = set(os.listdir(self.root))
        if not children <= STORE_NAMES and children & {*KINDS, "tmp"}:
            return
        marker.write_text(_MARKER_TEXT)   # only its presence counts: a torn write is harmless

    def is_store(self) -> bool:
        """Whether ROOT is a store: it has the marker, or (a store made before the marker)
        holds nothing but what a store makes. A missing folder is an empty store."""
        if not self.root.exists():
            return True
        if not self.root.is_dir():
            return False
        if (self.root / MARKER).is_file():
            return True
        return set(os.listdir(self.root)) <= STORE_NAMES

    def _commit(self, kind: str, key: str, fill) -> Path:
        """Write an entry through `fill(folder)` into a private folder and rename it into place
        in one step; returns the entry's folder (another writer's when it was there first)."""
        return self._commit_entry(kind, key, fill)[0]

    def _commit_entry(self, kind: str, key: str, fill) -> tuple[Path, bool]:
        """`_commit`, and whether the entry in place is the one `fill` wrote."""
        final = self._dir(kind, key)
        for _ in range(_PUT_ATTEMPTS):
            if (final / "meta.json").is_file():
                return final, False
            self._prepare()
            tmp = None
            try:
                tmp = workdirs.make_private_dir(self._tmp, key[:12], parent_exists=True)
                fill(tmp)
                self._make_parent(final.parent)
                try:
                    os.rename(tmp, final)
                    tmp = None
                except OSError:
                    if (final / "meta.json").is_file():   # a concurrent writer's win
                        return final, False
                    if not final.is_dir():
                        raise
                    self._discard(final)   # an entry damaged by hand: replace it
                    os.rename(tmp, final)
                    tmp = None
                return final, True
            except FileNotFoundError as exc:
                if tmp is not None and not (tmp.exists() and final.parent.is_dir()):
                    self._parents.clear()
                    continue   # deleted under us (a clear without the lock): start over
                raise store_error(self.root, exc) from exc
            except OSError as exc:
                raise store_error(self.root, exc) from exc
            finally:
                if tmp is not None and tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
        raise _vanishing(self.root)

    def _make_parent(self, folder: Path) -> None:
        """mkdir -p, once per folder and store object (a build commits thousands of entries
        into 256 folders)."""
        if folder not in self._parents:
            folder.mkdir(parents=True, exist_ok=True)
            self._parents.add(folder)

    def _discard(self, path: Path) -> None:
        """Remove a damaged entry: renamed into tmp/ first, so readers see it whole or gone."""
        try:
            self._tmp.mkdir(parents=True, exist_ok=True)
            workdirs.remove(path, self._tmp)
        except OSError:
            shutil.rmtree(path, ignore_errors=True)

    # -- arrays -----------------------------------------------------------------------------
    def has_arrays(self, key: str) -> bool:
        return (self._dir("arrays", key) / "meta.json").is_file()

    def put_arrays(self, key: str, arrays: dict[str, np.ndarray], meta: dict) -> None:
        arrays = {k: np.array(v) for k, v in arrays.items()}   # the caller may change its own

        def fill(tmp: Path) -> None:
            np.savez(tmp / "arrays.npz", **arrays)
            # compact: json's C encoder (indent= runs its pure-Python one, ~0.1 ms an entry)
            (tmp / "meta.json").write_text(json.dumps({**meta, "created": time.time()},
                                                      separators=(",", ":"), sort_keys=True))
        final = self._commit("arrays", key, fill)
        stamp = _stamp(final / "arrays.npz")
        if stamp is not None:
            self._recent.remember(key, arrays, stamp)

    def get_arrays(self, key: str) -> dict[str, np.ndarray] | None:
        """Every array of the entry (read-only), or None when it is missing (never part of
        one) or found damaged (then removed and reported)."""
        path = self._dir("arrays", key)
        if not (path / "meta.json").is_file():
            self._recent.forget(key)
            return None
        stamp = _stamp(path / "arrays.npz")
        recent = None if stamp is None else self._recent.get(key, stamp)
        if recent is not None:
            return recent
        seen = _inode(path)
        try:
            with open(path / "arrays.npz", "rb") as f:
                return self._recent.remember(key, read_npz(f), stamp)
        except FileNotFoundError:
            # Entries are renamed into place whole, so a listing without its arrays is damage
            # (or a clear under way): drop it so that the next plan computes it again.
            if (path / "meta.json").is_file():
                self._damaged("arrays", key, "arrays.npz is missing", seen)
            return None
        except PermissionError:      # not ours to read
            return None
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
            # a bad CRC-32, a cut archive, a garbled header (integrity.py)
            self._damaged("arrays", key, "arrays.npz cannot be read ("
                          + " ".join(f"{type(exc).__name__}: {exc}".split()) + ")", seen)
            return None

    def _damaged(self, kind: str, key: str, reason: str, seen: int | None) -> None:
        """Remove a damaged entry and say so once, naming it by its metadata. `seen` is the
        folder's inode when it was read: another build that put a good entry in its place
        meanwhile keeps it."""
        path = self._dir(kind, key)
        if _inode(path) != seen:
            return
        try:
            meta = json.loads((path / "meta.json").read_bytes())
        except (OSError, ValueError):
            meta = {}
        self._discard(path)
        if not isinstance(meta, dict):
            meta = {}
        if kind == "arrays":
            about, action = integrity.about_arrays(meta), "computing it again"
        else:
            about, action = meta.get("about"), "drawing it again"
        self.damage(kind, key, reason, about if isinstance(about, str) else None, action)

    # -- figures ----------------------------------------------------------------------------
    def get_figures(self, key: str) -> list[dict] | None:
        """[{name, kind, caption, width, height, path}] with every file as it was stored, or
        None when not rendered yet (or found damaged: then removed and reported)."""
        path = self._dir("figures", key)
        seen = _inode(path)
        try:
            meta = json.loads((path / "meta.json").read_text())
        except OSError:     # not there, cleared meanwhile, or not ours to read
            return None
        except ValueError:
            meta = None
        try:
            problem = integrity.figures_problem(meta, lambda name: (path / name).read_bytes())
        except PermissionError:     # not ours to read
            return None
        if problem is not None:
            self._damaged("figures", key, problem, seen)
            return None
        figures = meta["figures"]
        for fig in figures:
            fig["path"] = str(path / fig["name"])
        return figures

    def put_figures(self, key: str, figures, about: str | None = None) -> list[dict]:
        """Store the figures (with the sha256 of each file, and `about`: what they show, for
        the line that reports the entry if it is ever found damaged); returns their listing
        (as get_figures)."""
        figures = list(figures)

        def fill(tmp: Path) -> None:
            listing, digests = [], {}
            for fig in figures:
                data = fig.data
                (tmp / fig.name).write_bytes(data)
                digests[fig.name] = integrity.digest_bytes(data)
                listing.append({"name": fig.name, "kind": fig.kind, "caption": fig.caption,
                                "width": fig.width, "height": fig.height})
            meta = {"figures": listing, integrity.DIGESTS: digests,
                    **({"about": about} if about else {})}
            (tmp / "meta.json").write_text(json.dumps(meta, separators=(",", ":")))
        for _ in range(_PUT_ATTEMPTS):
            final, ours = self._commit_entry("figures", key, fill)
            if ours and (final / "meta.json").is_file():   # ours, whole: not read back
                return [{"name": fig.name, "kind": fig.kind, "caption": fig.caption,
                         "width": fig.width, "height": fig.height, "path": str(final / fig.name)}
                        for fig in figures]
            listing = self.get_figures(key)
            if listing is not None:
                return listing
        raise _vanishing(self.root)

    # -- sharing ----------------------------------------------------------------------------
    @contextmanager
    def shared_lock(self) -> Iterator[ArtifactStore]:
        """Hold the store for a whole build: any number of builds share it, while `clear()`
        waits for (or refuses) them. A killed holder releases it automatically."""
        self._prepare()
        try:
            fd = file_locks.acquire(self.root / locking.LOCK_NAME, exclusive=False, blocking=True)
        except OSError as exc:
            raise store_error(self.root, exc) from exc
        note = locking.write_note(self._tmp)
        try:
            yield self
        finally:
            if note is not None:
                note.unlink(missing_ok=True)
            file_locks.release(fd)

    def holders(self) -> list[str]:
        """The builds holding the store, as far as their notes tell ('pid 12: reportgen build')."""
        return locking.live_holders(self._tmp)

    # -- maintenance ------------------------------------------------------------------------
    def info(self) -> dict:
        out = {"root": str(self.root), "exists": self.root.exists(), "is_store": self.is_store()}
        for kind in KINDS:
            entries, size = 0, 0
            base = self.root / kind
            if base.is_dir():
                for meta in base.glob("*/*/meta.json"):
                    try:
                        size += sum(f.stat().st_size for f in meta.parent.iterdir())
                    except FileNotFoundError:   # removed meanwhile
                        continue
                    entries += 1
            out[kind] = {"entries": entries, "bytes": size}
        working = [p for p in self._children(self._tmp)
                   if not p.name.startswith(locking.HOLDER + workdirs.SEP)]
        out["tmp"] = {"entries": len(working), "bytes": sum(_size(p) for p in working)}
        out["builds"] = self.holders()
        return out

    def clear(self, wait: bool = True, on_wait: Callable[[str], None] | None = None) -> int:
        """Remove what the store made (arrays/, figures/, tmp/, its lock file and marker) and
        the folder itself if nothing else is left; returns the number of bytes freed.

        Waits while builds hold the store (calling `on_wait` with a one-line message once), or
        with `wait=False` raises StoreBusyError. Refuses (StoreError) a folder that is not a
        store, so a mistyped `--cache-dir` never deletes a user's files."""
        if not self.root.exists() and not self.root.is_symlink():
            return 0
        if not self.root.is_dir():
            raise StoreError(f"{self.root} is a file, not an artifact store; not deleting it",
                             fix="pass the store's folder to --cache-dir")
        if not self.is_store():
            others = sorted(set(os.listdir(self.root)) - STORE_NAMES)
            shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
            raise StoreError(f"{self.root} is not a reportgen artifact store (it holds {shown}); "
                             f"not deleting it", fix="pass the store's folder to --cache-dir "
                             f"(default {DEFAULT_CACHE_DIR})")
        lock_path = self.root / locking.LOCK_NAME
        try:
            fd = file_locks.acquire(lock_path, exclusive=True, blocking=False)
            if fd is None:
                message = self._busy_message()
                if not wait:
                    raise StoreBusyError(f"{message[0].upper()}{message[1:]}; not clearing it",
                                         fix="wait for it to finish, or run `reportgen cache "
                                             "clear` without --no-wait to wait for it")
                if on_wait is not None:
                    on_wait(f"waiting for {message} to finish (Ctrl-C to stop)")
                fd = file_locks.acquire(lock_path, exclusive=True, blocking=True)
        except OSError as exc:
            raise store_error(self.root, exc) from exc
        try:
            info = self.info()
            freed = sum(info[k]["bytes"] for k in (*KINDS, "tmp"))
            for name in (*KINDS, "tmp"):
                _remove_tree(self.root / name)
            lock_path.unlink(missing_ok=True)   # while held: see file_locks.acquire
            if set(os.listdir(self.root)) <= {MARKER}:
                (self.root / MARKER).unlink(missing_ok=True)
                if not self.root.is_symlink():
                    self.root.rmdir()
        except OSError as exc:
            raise store_error(self.root, exc) from exc
        finally:
            file_locks.release(fd)
        self._ready = False
        self._parents.clear()
        return freed

    def _busy_message(self) -> str:
        holders = self.holders()
        if not holders:
            return f"a build using {self.root} (a process holds {locking.LOCK_NAME})"
        n = len(holders)
        return (f"{n} build{'s' * (n != 1)} using {self.root} ({'; '.join(holders)})")

    @staticmethod
    def _children(folder: Path) -> list[Path]:
        try:
            return list(folder.iterdir()) if folder.is_dir() else []
        except OSError:
            return []


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What tells a stored file from the same file changed or replaced since."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _vanishing(root: Path) -> StoreError:
    return StoreError(f"Entries of the artifact store {root} vanish as soon as they are written",
                      fix="do not delete files in it while a build runs (`reportgen cache "
                          "clear` waits for running builds)")


def _size(path: Path) -> int:
    try:
        if path.is_symlink() or not path.is_dir():
            return path.lstat().st_size
        return sum(f.lstat().st_size for f in path.rglob("*") if not f.is_dir())
    except OSError:
        return 0


def _remove_tree(path: Path) -> None:
    """Delete a folder the store made; a symbolic link put in its place is unlinked, not
    followed."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def store_error(root: Path, exc: OSError) -> StoreError:
    """One line naming the store, the OS error and the fix."""
    reason = exc.strerror or str(exc)
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(root) else ""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        free = free_space(root)
        reason += "" if free is None else f" ({size_text(free)} free)"
        fix = "free disk space, or pass --cache-dir a folder on another disk"
    elif exc.errno in (errno.EEXIST, errno.ENOTDIR):
        blocker = _blocking_file(root)
        if blocker is not None:
            return StoreError(f"Cannot use the artifact store {root}: {blocker} is a file, "
                              f"not a folder", fix=f"remove or rename {blocker}, or pass "
                              f"--cache-dir another folder")
        fix = "pass --cache-dir another folder"
    else:
        fix = f"fix the permissions of {root}, or pass --cache-dir a writable folder"
    return StoreError(f"Cannot write to the artifact store {root}: {reason}{where}", fix=fix)


def _blocking_file(root: Path) -> Path | None:
    """The file standing where the store (or one of its parent folders) should be."""
    for path in [root, *root.parents]:
        if path.exists() and not path.is_dir():
            return path
    return None
