"""The artifact store on any fsspec filesystem: `s3://bucket/prefix`, `gcs://…`, `file://…`,
`memory://…` (README, "Build on a cluster").

Same interface as reportgen.cache.store.ArtifactStore, other layout: an entry is ONE object,
so it appears whole or not at all —

    PREFIX/arrays/ab/<key>.npz     the arrays, with the metadata as the uint8 array __meta__
    PREFIX/figures/ab/<key>.zip    the rendered files and their meta.json
    PREFIX/.reportgen-store        the marker that says this prefix is a store

On object stores (S3, GCS, Azure, memory) one put is atomic. Elsewhere (file://, sftp, …) an
entry is written under PREFIX/tmp/ with a name that says which process wrote it, then renamed
into place; what a killed writer leaves there is removed by the next use of the store, as on
local disk (reportgen.cache.workdirs).

The site is assembled from files on local disk (figures are linked into the MkDocs project), so
figures are also kept in a local mirror store, itself an ArtifactStore: a figure drawn or
downloaded once is read from there. Entries are content-addressed, so the mirror is never stale.

Damage is found as on local disk (reportgen.cache.integrity): a figure file that does not match
its recorded sha256 (in the mirror, or in the .zip fetched: zipfile also checks each member's
CRC-32), arrays whose .npz fails its CRC-32s. The damaged object is removed and reported once;
a mirror copy is fetched again from the store, anything else computed or drawn again.
"""

from __future__ import annotations

import io
import json
import threading
import time
import zipfile
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from reportgen import console
from reportgen.cache import integrity, workdirs
from reportgen.cache.keys import hash_bytes
from reportgen.cache.npz import read_npz
from reportgen.cache.recent import RecentArrays
from reportgen.errors import StoreError

MARKER = ".reportgen-store"
KINDS = {"arrays": ".npz", "figures": ".zip"}
STORE_NAMES = frozenset({*KINDS, "tmp", MARKER})
META = "__meta__"
MIRROR_ROOT = Path(".reportgen/mirrors")
# Where one put replaces an object whole (readers see the old object, the new one, or none).
ATOMIC_PUT = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss", "memory"})
_MARKER_TEXT = (b"This prefix is a reportgen artifact store (see README, 'Build on a cluster').\n"
                b"`reportgen cache clear` empties it; everything here can be recomputed.\n")


def is_url(location) -> bool:
    """Whether a --cache-dir names an fsspec filesystem (`PROTOCOL://…`) rather than a folder."""
    return isinstance(location, str) and "://" in location


class FsspecStore:
    """An artifact store at an fsspec URL; `root` is the local mirror's folder (what the site
    folder must stay out of), `location` the URL."""

    def __init__(self, url: str, mirror_dir: str | Path | None = None):
        self.location = url.rstrip("/")
        self.fs, self.prefix, self.protocol = _open_filesystem(self.location)
        self.root = Path(mirror_dir) if mirror_dir is not None else (
            MIRROR_ROOT / hash_bytes(self.location.encode())[:16]).absolute()
        self._mirror = None
        self._known: set[str] = set()       # entries seen whole (they never change)
        self._recent = RecentArrays()       # arrays this process stored or read last
        self._ready = False
        self._lock = threading.Lock()
        self.damage = integrity.DamageReport(self.location)    # damaged entries, said once
        self._mirror_damage: dict[str, tuple[str, str | None]] = {}   # key -> (reason, about)

    def __repr__(self) -> str:
        return f"FsspecStore({self.location!r})"

    # -- paths ----------------------------------------------------------------------------------
    def _path(self, kind: str, key: str) -> str:
        return f"{self.prefix}/{kind}/{key[:2]}/{key}{KINDS[kind]}"

    @property
    def mirror(self):
        from reportgen.cache.store import ArtifactStore

        with self._lock:
            if self._mirror is None:
                self._mirror = ArtifactStore(self.root)
                self._mirror.damage = self._note_mirror_damage   # worded by get_figures
            return self._mirror

    def _note_mirror_damage(self, kind: str, key: str, reason: str, about: str | None,
                            action: str) -> None:
        self._mirror_damage[key] = (f"{reason} (in the local copy {self.root})", about)

    @contextmanager
    def _guard(self, doing: str):
        """Any failure of the filesystem as one StoreError line naming the store."""
        try:
            yield
        except StoreError:
            raise
        except (OSError, RuntimeError, ValueError, TypeError) as exc:
            raise _store_error(self.location, doing, exc) from exc
        except Exception as exc:       # a filesystem library's own errors (credentials, HTTP)
            if type(exc).__module__.split(".")[0] in ("reportgen", "numpy"):
                raise
            raise _store_error(self.location, doing, exc) from exc

    def _prepare(self) -> None:
        """Write the marker (unless the prefix holds things a store does not make) and remove
        what killed writers left in tmp/; once per store object."""
        if self._ready:
            return
        with self._guard("open"):
            marker = f"{self.prefix}/{MARKER}"
            if not self.fs.exists(marker):
                names = self._names()
                if names <= STORE_NAMES or not names & {*KINDS, "tmp"}:
                    self._pipe(marker, _MARKER_TEXT)
            removed = self._remove_stale()
        if removed:
            console.notice(f"Removed {removed} partial entr{'ies' if removed != 1 else 'y'} "
                           f"left in {self.location}/tmp by interrupted builds.")
        self._ready = True

    def _names(self) -> set[str]:
        try:
            return {p.rstrip("/").rsplit("/", 1)[-1]
                    for p in self.fs.ls(self.prefix, detail=False)}
        except FileNotFoundError:
            return set()

    # -- writing one object ---------------------------------------------------------------------
    def _pipe(self, path: str, data: bytes) -> None:
        """Write `path` so that no reader ever sees part of it."""
        if self.protocol in ATOMIC_PUT:
            self.fs.pipe_file(path, data)
            return
        parent = path.rsplit("/", 1)[0]
        tmp_dir = f"{self.prefix}/tmp"
        self.fs.makedirs(tmp_dir, exist_ok=True)
        self.fs.makedirs(parent, exist_ok=True)
        tmp = f"{tmp_dir}/{workdirs.private_name(path.rsplit('/', 1)[-1][:12])}"
        try:
            self.fs.pipe_file(tmp, data)
            self.fs.mv(tmp, path)
        finally:
            if self.fs.exists(tmp):
                self.fs.rm(tmp)

    def _remove_stale(self) -> int:
        """Objects under tmp/ whose writer is gone (on this host), or older than a day."""
        if self.protocol in ATOMIC_PUT:
            return 0
        try:
            listing = self.fs.ls(f"{self.prefix}/tmp", detail=True)
        except FileNotFoundError:
            return 0
        removed, now = 0, time.time()
        for info in listing:
            name = info["name"].rstrip("/").rsplit("/", 1)[-1]
            alive = workdirs.writer_alive(name)
            if alive is None:
                mtime = _mtime(info)
                alive = mtime is None or now - mtime < workdirs.STALE_AFTER
            if not alive:
                try:
                    self.fs.rm(info["name"], recursive=True)
                    removed += 1
                except FileNotFoundError:
                    pass
        return removed

    def _get(self, path: str) -> bytes | None:
        try:
            return self.fs.cat_file(path)
        except FileNotFoundError:
            return None

    def _exists(self, path: str) -> bool:
        self.fs.invalidate_cache(path.rsplit("/", 1)[0])   # a listing cached before a put
        return self.fs.exists(path)

    # -- arrays ---------------------------------------------------------------------------------
    def has_arrays(self, key: str) -> bool:
        if key in self._known:
            return True
        with self._guard("read"):
            found = self._exists(self._path("arrays", key))
        if found:
            self._known.add(key)
        return found

    def put_arrays(self, key: str, arrays: dict[str, np.ndarray], meta: dict) -> None:
        if key in self._known:
            return
        self._prepare()
        arrays = {k: np.array(v) for k, v in arrays.items()}   # the caller may change its own
        text = json.dumps({**meta, "created": time.time()}, sort_keys=True).encode()
        buffer = io.BytesIO()
        np.savez(buffer, **arrays,
                 **{META: np.frombuffer(text, np.uint8)})
        with self._guard("write"):
            self._pipe(self._path("arrays", key), buffer.getvalue())
        self._known.add(key)
        self._recent.remember(key, arrays)

    def get_arrays(self, key: str) -> dict[str, np.ndarray] | None:
        """Every array of the entry (read-only), or None when it is missing (or damaged: then
        removed). What this process stored or read last comes from memory: keys are content
        hashes, so it is what the store holds."""
        recent = self._recent.get(key)
        if recent is not None:
            return recent
        path = self._path("arrays", key)
        with self._guard("read"):
            data = self._get(path)
        if data is None:
            self._known.discard(key)
            return None
        try:
            arrays = read_npz(io.BytesIO(data))    # the metadata too: its CRC-32 is checked
            arrays.pop(META, None)
            out = self._recent.remember(key, arrays)
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
            self._discard(path)
            self._known.discard(key)
            self.damage("arrays", key, "its .npz cannot be read ("
                        + " ".join(f"{type(exc).__name__}: {exc}".split()) + ")",
                        integrity.about_arrays(_meta_of(data)), "computing it again")
            return None
        self._known.add(key)
        return out

    def refresh(self) -> None:
        """Learn every stored array entry with one listing (other processes wrote them): the
        plan then asks the filesystem nothing per result."""
        with self._guard("read"):
            try:
                found = self.fs.find(f"{self.prefix}/arrays", detail=False)
            except FileNotFoundError:
                return
        self._known.update(p.rsplit("/", 1)[-1][:-len(KINDS["arrays"])]
                           for p in found if p.endswith(KINDS["arrays"]))

    def _discard(self, path: str) -> None:
        try:
            self.fs.rm(path)
        except (OSError, FileNotFoundError):
            pass

    # -- figures: drawn on the client, kept in the local mirror and uploaded --------------------
    def get_figures(self, key: str) -> list[dict] | None:
        listing = self.mirror.get_figures(key)
        if listing is not None:
            return listing
        mirror_damage = self._mirror_damage.pop(key, None)
        path = self._path("figures", key)
        with self._guard("read"):
            data = self._get(path)
        listing, problem, about = None, None, None
        if data is not None:
            try:
                with zipfile.ZipFile(io.BytesIO(data)) as archive:   # each member's CRC-32
                    meta = json.loads(archive.read("meta.json"))
                    about = meta.get("about") if isinstance(meta, dict) else None
                    files = {name: archive.read(name) for name in archive.namelist()}
                problem = integrity.figures_problem(meta, files.__getitem__)
            except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
                problem = "its .zip cannot be read (" + " ".join(
                    f"{type(exc).__name__}: {exc}".split()) + ")"
            if problem is None:
                def fill(tmp: Path) -> None:
                    for name, content in files.items():
                        (tmp / Path(name).name).write_bytes(content)
                self.mirror._commit("figures", key, fill)
                listing = self.mirror.get_figures(key)
            else:
                self._discard(path)
        about = about if isinstance(about, str) else None
        if problem is not None:
            self.damage("figures", key, problem, about or (mirror_damage or (None, None))[1],
                        "drawing it again")
        elif mirror_damage is not None:
            reason, mirror_about = mirror_damage
            self.damage("figures", key, reason, about or mirror_about,
                        f"fetched again from {self.location}" if listing is not None
                        else "drawing it again")
        return listing

    def put_figures(self, key: str, figures, about: str | None = None) -> list[dict]:
        listing = self.mirror.put_figures(key, figures, about)
        folder = Path(listing[0]["path"]).parent if listing else self.mirror._dir("figures", key)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
            for name in ["meta.json", *(f["name"] for f in listing)]:
                archive.writestr(name, (folder / name).read_bytes())
        self._prepare()
        with self._guard("write"):
            self._pipe(self._path("figures", key), buffer.getvalue())
        return listing

    # -- sharing --------------------------------------------------------------------------------
    @contextmanager
    def shared_lock(self) -> Iterator[FsspecStore]:
        """Builds hold the local mirror's lock; a remote store has no lock of its own (entries
        are written whole, so builds sharing it never corrupt it), so `cache clear` on it does
        not wait for builds elsewhere."""
        self._prepare()
        with ExitStack() as stack:
            stack.enter_context(self.mirror.shared_lock())
            yield self

    def holders(self) -> list[str]:
        return self.mirror.holders()

    # -- maintenance ----------------------------------------------------------------------------
    def is_store(self) -> bool:
        with self._guard("read"):
            if not self.fs.exists(self.prefix) or self.fs.exists(f"{self.prefix}/{MARKER}"):
                return True
            return self._names() <= STORE_NAMES

    def info(self) -> dict:
        with self._guard("read"):
            exists = self.fs.exists(self.prefix)
            out = {"root": self.location, "exists": exists, "is_store": self.is_store()}
            for kind in (*KINDS, "tmp"):
                try:
                    found = self.fs.find(f"{self.prefix}/{kind}", detail=True)
                except FileNotFoundError:
                    found = {}
                out[kind] = {"entries": len(found),
                             "bytes": sum(int(i.get("size") or 0) for i in found.values())}
        out["builds"] = self.holders()
        return out

    def clear(self, wait: bool = True, on_wait: Callable[[str], None] | None = None) -> int:
        """Remove every entry, the marker and the local mirror; returns the bytes freed.
        Refuses (StoreError) a prefix that holds things a store does not make."""
        if not self.is_store():
            names = sorted(self._names() - STORE_NAMES)
            raise StoreError(f"{self.location} is not a reportgen artifact store (it holds "
                             f"{', '.join(names[:3])}{', ...' if len(names) > 3 else ''}); "
                             f"not deleting it", fix="pass the store's URL to --cache-dir")
        info = self.info()
        freed = sum(info[k]["bytes"] for k in (*KINDS, "tmp"))
        with self._guard("clear"):
            for name in (*KINDS, "tmp"):
                if self.fs.exists(f"{self.prefix}/{name}"):
                    self.fs.rm(f"{self.prefix}/{name}", recursive=True)
            if self.fs.exists(f"{self.prefix}/{MARKER}"):
                self.fs.rm(f"{self.prefix}/{MARKER}")
        freed += self.mirror.clear(wait=wait, on_wait=on_wait)
        self._known.clear()
        self._recent = RecentArrays()
        self._ready = False
        return freed


def _meta_of(data: bytes) -> dict:
    """The metadata inside an arrays object, as far as it can still be read."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            return json.loads(archive[META].tobytes())
    except Exception:       # the object is damaged: naming it is best effort
        return {}


def _open_filesystem(url: str):
    """(filesystem, path prefix, protocol) of `url`; a missing driver or a malformed URL as one
    StoreError line."""
    import fsspec

    protocol = url.split("://", 1)[0].lower()
    try:
        # no listing cache: entries written by other processes must be seen at once
        fs, prefix = fsspec.core.url_to_fs(url, use_listings_cache=False)
    except ImportError as exc:
        raise StoreError(f"Cannot open the artifact store {url}: the '{protocol}' filesystem "
                         f"needs a package that is not installed",
                         received=" ".join(str(exc).split()),
                         fix="install it (s3fs for s3://, gcsfs for gs://, adlfs for az://)"
                         ) from exc
    except ValueError as exc:
        raise StoreError(f"Cannot open the artifact store {url}", received=str(exc),
                         fix="pass --cache-dir a folder or a URL such as s3://bucket/prefix"
                         ) from exc
    return fs, prefix.rstrip("/"), protocol


def _mtime(info: dict) -> float | None:
    for name in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = info.get(name)
        if value is None:
            continue
        if hasattr(value, "timestamp"):
            return value.timestamp()
        try:
            return float(value)
        except (TypeError, ValueError):
            continue
    return None


def _store_error(url: str, doing: str, exc: BaseException) -> StoreError:
    reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    return StoreError(f"Cannot {doing} the artifact store {url}", received=reason,
                      fix="check the URL, your credentials and the network, or pass "
                          "--cache-dir a local folder")
