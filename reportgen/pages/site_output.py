"""The site folder: which folders reportgen may replace, one build per folder at a time, and
replacing it.

- reportgen writes a site only into a folder that is absent, empty or a site it made holding
  only the files it wrote: the marker (reportgen.pages.site_files) lists them, with their
  digests, and every file or folder found at any depth must be on that list. A folder with
  anything else, or whose marker lists nothing (an older reportgen's), is refused: reportgen
  cannot tell its files from a user's. Never the models folder, the cache, the project folder
  (the current directory or anything containing it) or a folder holding a params.toml.
- A site is built in a private staging folder beside the site folder (same filesystem) and
  swapped in by two renames only once it is complete: rename the old site away, rename the new
  one in, then remove the old one file by file from its list (never a recursive delete; what
  is not on the list, a file a user added during the build, is put back into the new site).
  Until the first rename the old site is untouched; a crash between the renames leaves the old
  site (renamed) and the new one (staged), and the next build of that folder puts the old one
  back before anything else, even when it is then refused (`recover_leftovers`).
- One build per site folder at a time: an exclusive `filelock.FileLock` (an `flock`) on a lock
  file beside the folder (`.NAME.reportgen-lock`); the kernel releases it when its holder dies,
  even by kill -9.
  A site folder's missing parent folders are created first (as `mkdocs build --site-dir` does),
  and removed again when the build writes no site.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import socket
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from filelock import FileLock, Timeout

from reportgen import console
from reportgen.errors import ReportgenError
from reportgen.model_folder import PARAMS_FILE
from reportgen.pages.site_files import (inventory, listed_files, read_marker, remove_listed, shown,
                                        unknown_entries, write_marker)

_LEFTOVER = ".reportgen-"          # .NAME.reportgen-new-XXXX / .NAME.reportgen-old-XXXX
LOCK_SUFFIX = ".reportgen-lock"


def _made_by_reportgen(site: Path) -> bool:
    """Whether a folder without a file list looks like a site reportgen made (its home page and
    script): then a refusal says an older reportgen made it, not that it is no site at all."""
    return (site / "index.html").is_file() and (site / "assets" / "reportgen" /
                                                "reportgen.js").is_file()


# --------------------------------------------------------------------------------------------
# Which folders may be replaced


def _refuse(site_dir, why: str, fix: str = "choose another --site-dir (e.g. site)") -> None:
    raise ReportgenError(f"Refusing to write the site into '{site_dir}': {why}", fix=fix)


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_replaceable(site_dir: str | Path, label: str | None = None) -> Path:
    """The resolved site folder if reportgen may replace it: absent, empty, or a site reportgen
    made holding only the files its marker lists (at any depth), and no model."""
    label = label or str(site_dir)
    site = Path(site_dir).expanduser().resolve()
    if not site.exists():
        return site
    if not site.is_dir():
        _refuse(label, "it is a file, not a folder")
    try:
        files, folders = inventory(site)
    except OSError as exc:
        _refuse(label, f"{exc.filename} cannot be read ({exc.strerror})")
    model = next((f for f in files if Path(f).name == PARAMS_FILE), None)
    if model is not None:
        _refuse(label, f"it holds a model ({model})")
    marker = read_marker(site)
    if marker is None and not files and not folders:
        return site
    listed = listed_files(marker)
    elsewhere = ("choose another --site-dir (a new folder, e.g. "
                 f"{'site' if site.name != 'site' else 'site-new'})")
    if listed is None and marker is None and not _made_by_reportgen(site):
        _refuse(label, f"it holds files reportgen did not make "
                       f"({shown(unknown_entries(files, folders, {}))})",
                fix=f"{elsewhere}, or empty '{label}' yourself")
    if listed is None:
        _refuse(label, f"an older reportgen made it without listing the files it wrote, so "
                       f"they cannot be told from files you added "
                       f"({shown(unknown_entries(files, folders, {}))})",
                fix=f"{elsewhere}, or move '{label}' away (delete it once you have kept your "
                    f"files) and build again")
    unknown = unknown_entries(files, folders, listed)
    if unknown:
        _refuse(label, f"it holds files reportgen did not write ({shown(unknown)}) and a "
                       f"build replaces the folder",
                fix=f"move them out of '{label}' (keep extra site files elsewhere), or "
                    f"{elsewhere}")
    return site


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


def _write_holder(fd: int) -> None:
    """Record "pid host" in the lock file for people (the lock itself is what counts)."""
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())


def _make_folders(folder: Path, label: str) -> list[Path]:
    """Create `folder` and its missing parents; returns those created, outermost first."""
    missing = []
    while not folder.exists() and not folder.is_symlink():
        missing.append(folder)
        folder = folder.parent
    missing.reverse()
    for path in missing:
        try:
            path.mkdir(exist_ok=True)
        except OSError as exc:
            raise ReportgenError(f"Cannot create the folder {path} for the site '{label}'",
                                 received=exc.strerror,
                                 fix="check --site-dir for a typo, or choose one in a folder "
                                     "you may write to") from None
    return missing


class SiteLock:
    """An exclusive lock on one site folder, held for a whole build (a `filelock.FileLock`).

    The lock file is removed on release while still held; a waiter that then holds the lock of
    the removed file notices (filelock checks the inode is still linked) and locks the new file
    instead. The parent folders it had to create are removed again on release when nothing was
    written into them.
    """

    def __init__(self, site: Path, *, wait: bool = True, label: str | None = None):
        self.site = Path(site)
        self.path = self.site.parent / f".{self.site.name}{LOCK_SUFFIX}"
        self.wait = wait
        self.label = (label or str(site)).rstrip("/") + "/"
        self._lock: FileLock | None = None
        self._created: list[Path] = []

    def __enter__(self) -> "SiteLock":
        self._created = _make_folders(self.path.parent, self.label.rstrip("/"))
        try:
            self._lock = self._acquire()
        except BaseException:
            self._remove_created()
            raise
        return self

    def _acquire(self) -> FileLock:
        # a file system without flock fails here rather than falling back to a marker file
        # that a kill -9 would leave behind
        lock = FileLock(self.path, mode=0o644, fallback_to_soft=False, on_acquired=_write_holder)
        try:
            try:
                lock.acquire(blocking=False)
            except Timeout:
                if not self.wait:
                    raise ReportgenError(
                        f"Another build is writing {self.label} ({_holder(self.path)}).",
                        fix="wait for it to finish, leave out --no-wait to wait for it, or "
                            "choose another --site-dir") from None
                console.notice(f"waiting for another build of {self.label} "
                               f"({_holder(self.path)}) ...")
                lock.acquire()
        except OSError as exc:
            parent = self.path.parent
            raise ReportgenError(
                f"Cannot write the lock file {self.path} beside the site folder "
                f"{self.label}", expected=f"a folder you may write to at {parent}",
                received=exc.strerror if parent.is_dir() else f"{parent} is not a folder",
                fix="choose a --site-dir in a folder you may write to") from None
        return lock

    def __exit__(self, *exc) -> None:
        if self._lock is not None:
            self.path.unlink(missing_ok=True)   # still holding it: nobody else uses this file
            self._lock.release()
            self._lock = None
        self._remove_created()

    def _remove_created(self) -> None:
        for folder in reversed(self._created):  # empty unless a site was written there
            try:
                folder.rmdir()
            except OSError:
                break
        self._created = []


# --------------------------------------------------------------------------------------------
# Replacing the site


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
    away: put the old site back. Staging folders are then removed (a staging folder is this
    process's or a dead build's private folder, named by reportgen, hidden, never a user's);
    old sites are removed file by file from their lists (`_remove_old_site`).
    """
    site = Path(site_dir).expanduser().resolve()
    leftovers = _leftovers(site)
    olds = [p for p in leftovers if p.name.startswith(f".{site.name}{_LEFTOVER}old-")]
    if olds and not site.exists() and not site.is_symlink():
        os.rename(olds[-1], site)
        console.notice(f"Restored {site} (a build was stopped while replacing it).")
        leftovers.remove(olds[-1])
        olds.pop()
    for path in leftovers:
        if path in olds and site.is_dir():
            _remove_old_site(path, site)
        elif path.is_dir() and not path.is_symlink() and path not in olds:
            shutil.rmtree(path, ignore_errors=True)
        elif not path.is_dir():
            path.unlink(missing_ok=True)


def recover_unless_busy(site_dir: str | Path) -> None:
    """`recover_leftovers` now, unless another build holds the site folder (then it owns them).
    A build calls it first, so that a site a killed build had moved away comes back even when
    this build is then refused (a typo in an option, no model matching --models)."""
    site = Path(site_dir).expanduser().resolve()
    if not _leftovers(site):
        return
    try:
        with SiteLock(site, wait=False):
            recover_leftovers(site)
    except ReportgenError:
        pass          # busy: the other build recovers them; unwritable: the build will say so


@contextmanager
def staged_site(site_dir: str | Path, marker: dict | None = None,
                label: str | None = None) -> Iterator[Path]:
    """Yields an empty staging folder beside `site_dir`; when the block ends without an error,
    writes the marker (every file with its digest) into it and swaps it in place of `site_dir`.
    On an error the staging folder is removed and `site_dir` is left as it was."""
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
        _remove_old_site(old, site)


def _remove_old_site(old: Path, site: Path) -> None:
    """Remove an old site renamed away, file by file from its marker's list. What is not on the
    list (a file a user added while this build ran, after its last check) goes back to the same
    place in the new site, where the next build names it; what cannot (the new site has a file
    of that name) stays in a visible folder beside the site."""
    try:
        remove_listed(old)
        if old.exists():
            _move_into(old, site)
            old.rmdir()
        return
    except OSError as exc:
        why = exc.strerror
    kept = site.parent / f"{site.name}.kept-{old.name.rsplit('-', 1)[-1]}"
    try:
        os.rename(old, kept)
    except OSError:
        kept = old
    console.notice(f"Files of the old {site.name}/ that reportgen did not write, or could not "
                   f"remove, are kept in {kept} ({why}).")


def _move_into(source: Path, target: Path) -> None:
    """Move what `source` holds to the same places in `target`, never over an existing path."""
    for entry in sorted(source.iterdir()):
        destination = target / entry.name
        if not os.path.lexists(destination):
            os.rename(entry, destination)
            console.notice(f"{destination} was added while the site was being replaced; it is "
                           f"kept there (move it out of the site before the next build).")
        elif entry.is_dir() and not entry.is_symlink() and destination.is_dir() \
                and not destination.is_symlink():
            _move_into(entry, destination)
            entry.rmdir()
