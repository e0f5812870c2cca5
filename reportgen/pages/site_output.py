"""The site folder: which folders reportgen may replace, one build per folder at a time, and
replacing it whole.

- reportgen writes a site only into a folder that is absent, empty or marked as its own (the
  MARKER file it writes into every site it makes; it also holds the digest that lets a build
  skip MkDocs when nothing changed). Never into the models folder, the cache, the project
  folder (the current directory or anything containing it) or a folder holding a params.toml.
- A site is built in a private staging folder beside the site folder (same filesystem) and
  swapped in by two renames only once it is complete: rename the old site away, rename the new
  one in, delete the old one. Until the first rename the old site is untouched; a crash between
  the renames leaves the old site (renamed) and the new one (staged), and the next build of
  that folder puts the old one back before it starts (`recover_leftovers`).
- One build per site folder at a time: an exclusive `fcntl.flock` on a lock file beside the
  folder (`.NAME.reportgen-lock`); the kernel releases it when its holder dies, even by kill -9.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import shutil
import socket
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from reportgen import console
from reportgen.errors import ReportgenError
from reportgen.model_folder import PARAMS_FILE

MARKER = ".reportgen-site.json"
GENERATOR = "reportgen"
_LEFTOVER = ".reportgen-"          # .NAME.reportgen-new-XXXX / .NAME.reportgen-old-XXXX
LOCK_SUFFIX = ".reportgen-lock"
# What an earlier reportgen (before the marker) wrote at a site's top level: such a folder is
# recognised as reportgen's own so that upgrading does not lock users out of their site/.
_UNMARKED_SITE_ENTRIES = {"index.html", "404.html", "sitemap.xml", "sitemap.xml.gz", "search",
                          "assets", "artifacts", "models", "compare.html", ".nojekyll"}


# --------------------------------------------------------------------------------------------
# The marker


def read_marker(site_dir: str | Path) -> dict | None:
    """The marker's contents when `site_dir` is a site reportgen made, else None."""
    try:
        data = json.loads((Path(site_dir) / MARKER).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("generator") == GENERATOR else None


def site_files(site_dir: Path) -> list[str]:
    """Every file under `site_dir` but the marker, as sorted POSIX paths relative to it."""
    site = Path(site_dir)
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*")
                  if (p.is_file() or p.is_symlink()) and p.name != MARKER)


def write_marker(site_dir: Path, extra: dict | None = None) -> None:
    """No time or absolute path in it: it is published with the site, and two builds of the
    same pages stay byte-identical. It lists the site's files, so that a file a user adds to
    the site later (a CNAME, notes) is recognised as theirs and never replaced."""
    data = {"generator": GENERATOR, **(extra or {}), "files": site_files(site_dir)}
    (Path(site_dir) / MARKER).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n",
                                         encoding="utf-8")


def _made_before_marker(site: Path) -> bool:
    try:
        names = {p.name for p in site.iterdir()}
    except OSError:
        return False
    return (names <= _UNMARKED_SITE_ENTRIES and "index.html" in names
            and (site / "assets" / "reportgen" / "reportgen.js").is_file())


def is_reportgen_site(site_dir: str | Path) -> bool:
    site = Path(site_dir)
    return read_marker(site) is not None or _made_before_marker(site)


# --------------------------------------------------------------------------------------------
# Which folders may be replaced


def _refuse(site_dir, why: str, fix: str = "choose another --site-dir (e.g. site)") -> None:
    raise ReportgenError(f"Refusing to write the site into '{site_dir}': {why}", fix=fix)


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_replaceable(site_dir: str | Path, label: str | None = None) -> Path:
    """The resolved site folder if reportgen may replace it: absent, empty, or made by
    reportgen, and holding no model (params.toml at its top level or one level down)."""
    label = label or str(site_dir)
    site = Path(site_dir).expanduser().resolve()
    if not site.exists():
        return site
    if not site.is_dir():
        _refuse(label, "it is a file, not a folder")
    try:
        entries = sorted(site.iterdir())
    except OSError as exc:
        _refuse(label, f"it cannot be read ({exc.strerror})")
    for entry in entries:
        holder = entry if entry.name == PARAMS_FILE else entry / PARAMS_FILE
        if (entry.name == PARAMS_FILE or entry.is_dir()) and holder.is_file():
            _refuse(label, f"it holds a model ({holder.relative_to(site)})")
    if entries and not is_reportgen_site(site):
        shown = ", ".join(p.name for p in entries[:3]) + (", ..." if len(entries) > 3 else "")
        _refuse(label, f"it holds files reportgen did not make ({shown})",
                fix=f"choose another --site-dir (e.g. site), or empty '{label}' yourself")
    added = _files_added_since_build(site)
    if added:
        shown = ", ".join(added[:3]) + (", ..." if len(added) > 3 else "")
        _refuse(label, f"files were added to it after reportgen built it ({shown}) and a "
                       f"build replaces the whole folder",
                fix=f"move them out of '{label}' (keep extra site files elsewhere), or choose "
                    f"another --site-dir")
    return site


def _files_added_since_build(site: Path) -> list[str]:
    """Files in a marked site that its marker does not list (none for an unmarked one)."""
    marker = read_marker(site)
    listed = marker.get("files") if marker else None
    if not isinstance(listed, list):
        return []
    return sorted(set(site_files(site)) - set(listed))


def check_site_folder(site_dir: str | Path, *, models_dir: str | Path | None = None,
                      cache_dir: str | Path | None = None,
                      work_dir: str | Path | None = None) -> Path:
    """Everything `check_replaceable` checks, and never the models folder, the cache, reportgen's
    working folder, the project folder (the current directory or a folder containing it) or a
    folder inside another reportgen site."""
    label = str(site_dir)
    site = Path(site_dir).expanduser().resolve()
    cwd = Path.cwd().resolve()
    if _within(cwd, site):
        _refuse(label, "it is the project folder, or contains it")
    for folder, what in ((models_dir, "the models folder"), (cache_dir, "the artifact cache"),
                         (work_dir, "reportgen's working folder")):
        if folder is None:
            continue
        folder = Path(folder).expanduser().resolve()
        if _within(folder, site):
            _refuse(label, f"it {'is' if folder == site else 'contains'} {what}")
        if _within(site, folder):
            _refuse(label, f"it is inside {what} ({folder})")
    for parent in site.parents:       # a build of that site would replace this one with it
        if read_marker(parent) is not None:
            _refuse(label, f"it is inside the site reportgen made in {parent}")
    return check_replaceable(site, label)


# --------------------------------------------------------------------------------------------
# One build per site folder


def _holder(path: Path) -> str:
    """'pid N' (and the host when it is another one) of the lock's holder, as it wrote it."""
    try:
        pid, _, host = path.read_text("utf-8").strip().partition(" ")
    except OSError:
        return "pid ?"
    if not pid:
        return "pid ?"
    return f"pid {pid}" + (f" on {host}" if host and host != socket.gethostname() else "")


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


class SiteLock:
    """An exclusive lock on one site folder, held for a whole build.

    The lock file is removed on release; a waiter that then holds the lock of a removed file
    notices (its inode is no longer the path's) and locks the new file instead.
    """

    def __init__(self, site: Path, *, wait: bool = True, label: str | None = None):
        self.site = Path(site)
        self.path = self.site.parent / f".{self.site.name}{LOCK_SUFFIX}"
        self.wait = wait
        self.label = (label or str(site)).rstrip("/") + "/"
        self._fd: int | None = None

    def __enter__(self) -> "SiteLock":
        told = False
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise ReportgenError(f"Cannot create the lock file {self.path}.",
                                     received=exc.strerror,
                                     fix="check that the site folder's parent is writable, "
                                         "or choose another --site-dir") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not self.wait:
                    os.close(fd)
                    raise ReportgenError(
                        f"Another build is writing {self.label} ({_holder(self.path)}).",
                        fix="wait for it to finish, leave out --no-wait to wait for it, or "
                            "choose another --site-dir") from None
                if not told:
                    console.notice(f"waiting for another build of {self.label} "
                                   f"({_holder(self.path)}) ...")
                    told = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            if _same_file(fd, self.path):
                break
            os.close(fd)          # the previous holder removed that file: lock the new one
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            self.path.unlink(missing_ok=True)   # still holding it: nobody else uses this file
            os.close(self._fd)
            self._fd = None


# --------------------------------------------------------------------------------------------
# Replacing the site whole


def _leftovers(site: Path) -> list[Path]:
    prefix = f".{site.name}{_LEFTOVER}"
    try:
        return sorted(p for p in site.parent.iterdir()
                      if p.name.startswith(prefix) and not p.name.endswith(LOCK_SUFFIX))
    except OSError:
        return []


def recover_leftovers(site_dir: str | Path) -> None:
    """Undo what a killed build of this site left beside it. Call it holding the site's lock
    (then no living build owns any of these folders).

    A kill between the two renames of a swap leaves no site folder and the old site renamed
    away: put the old site back. Staging folders and old sites are then removed.
    """
    site = Path(site_dir).expanduser().resolve()
    leftovers = _leftovers(site)
    if not site.exists() and not site.is_symlink():
        olds = [p for p in leftovers if p.name.startswith(f".{site.name}{_LEFTOVER}old-")]
        if olds:
            os.rename(olds[-1], site)
            console.notice(f"Restored {site} (a build was stopped while replacing it).")
            leftovers.remove(olds[-1])
    for path in leftovers:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


@contextmanager
def staged_site(site_dir: str | Path, marker: dict | None = None,
                label: str | None = None) -> Iterator[Path]:
    """Yields an empty staging folder beside `site_dir`; when the block ends without an error,
    writes the marker into it and swaps it in place of `site_dir`. On an error the staging
    folder is removed and `site_dir` is left as it was."""
    label = label or str(site_dir)
    site = check_replaceable(site_dir, label)
    site.parent.mkdir(parents=True, exist_ok=True)
    token = f"{os.getpid()}-{secrets.token_hex(4)}"
    staging = site.parent / f".{site.name}{_LEFTOVER}new-{token}"
    try:
        staging.mkdir()
    except OSError as exc:
        raise ReportgenError(f"Cannot create a staging folder beside '{label}'.",
                             received=f"{staging}: {exc.strerror}",
                             fix="check that the site folder's parent is writable") from None
    try:
        yield staging
        write_marker(staging, marker)
        check_replaceable(site, label)      # the user may have put files there meanwhile
        _swap(staging, site, token, label)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _swap(staging: Path, site: Path, token: str, label: str) -> None:
    old = site.parent / f".{site.name}{_LEFTOVER}old-{token}"
    moved = False
    try:
        if site.exists():
            os.rename(site, old)
            moved = True
        os.rename(staging, site)
    except OSError as exc:
        if moved and not site.exists():
            os.rename(old, site)            # put the old site back
        why = "it is a mount point" if exc.errno in (errno.EBUSY, errno.EXDEV) else exc.strerror
        raise ReportgenError(f"Cannot replace the site folder '{label}'.", received=why,
                             fix="choose a --site-dir that is an ordinary folder") from None
    if moved:
        shutil.rmtree(old, ignore_errors=True)
