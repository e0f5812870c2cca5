"""A build's private working folder (its MkDocs project) under `.reportgen/builds/`.

Each build gets its own folder `ID/`, so builds started in the same project folder never share
or delete each other's files. Beside it, `ID.lock` is created first and held with an exclusive
`filelock.FileLock` (an `flock`) for the build's life (it records "pid host" for people); the
kernel drops the lock when the process dies, even by kill -9. Every build first removes the
folders whose lock nobody holds: the leftovers of killed builds. The folder is removed when the
build ends, on failure too.

`.reportgen/file-digests.json` (DIGESTS_FILE) remembers the weights files' digests between
builds, so that a rebuild does not read every weights file again; `.reportgen/build-times.json`
(CALIBRATION_FILE) what builds measured per kind of work, for the next build's time estimate
(reportgen.commands.build_time).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
from pathlib import Path

from filelock import FileLock, Timeout

from reportgen.errors import StoreError

WORK_ROOT = Path(".reportgen/builds")
# The weights files' digests, remembered between builds (reportgen.engine.digests); beside the
# working folders, not in the artifact store: they describe the models folder, not results.
DIGESTS_FILE = WORK_ROOT.parent / "file-digests.json"
CALIBRATION_FILE = WORK_ROOT.parent / "build-times.json"    # measured per machine, likewise


def _lock(path: Path, **options) -> FileLock:
    # no fallback to a marker file on a file system without flock: a kill -9 would leave it
    return FileLock(path, mode=0o644, fallback_to_soft=False, **options)


def _write_holder(fd: int) -> None:
    os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())


def remove_abandoned(root: Path, keep: str | None = None) -> list[str]:
    """Remove the working folders whose owner is gone; returns their names."""
    removed = []
    if not root.is_dir():
        return removed
    for path in sorted(root.glob("*.lock")):
        name = path.name[:-len(".lock")]
        if name == keep:
            continue
        lock = _lock(path)
        try:
            lock.acquire(blocking=False)
        except Timeout:
            continue                          # its build is running
        except OSError:
            continue
        try:
            shutil.rmtree(root / name, ignore_errors=True)
            path.unlink(missing_ok=True)      # while held: a waiter then locks a new file
            removed.append(name)
        finally:
            lock.release()
    # A folder is made after its lock file and removed before it: one without a lock file
    # belongs to a build killed while removing it.
    for folder in sorted(root.iterdir()):
        if folder.is_dir() and folder.name != keep and not (root / f"{folder.name}.lock").exists():
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder.name)
    return removed


class WorkFolder:
    """`with WorkFolder() as path:` a fresh private folder, removed at the end."""

    def __init__(self, root: str | Path = WORK_ROOT):
        self.root = Path(root)
        self.name: str | None = None
        self.path: Path | None = None
        self._lock: FileLock | None = None

    def __enter__(self) -> Path:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            while True:
                name = f"{os.getpid()}-{secrets.token_hex(4)}"
                path = self.root / f"{name}.lock"
                if not path.exists():
                    break
            # waits only while a cleaner looks at it; filelock locks a new file if it removed it
            self._lock = _lock(path, on_acquired=_write_holder)
            self._lock.acquire()
            self.name = name
            remove_abandoned(self.root, keep=name)
            self.path = self.root / name
            self.path.mkdir()
        except OSError as exc:
            self.__exit__()
            raise StoreError(f"Cannot create a working folder in {self.root}.",
                             received=f"{exc.strerror}: {exc.filename or self.root}",
                             fix="check that the project folder is writable and not full"
                             ) from None
        return self.path

    def __exit__(self, *exc) -> None:
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path = None
        if self._lock is not None:
            if self._lock.is_locked:
                (self.root / f"{self.name}.lock").unlink(missing_ok=True)
                self._lock.release()
            self._lock = None
