"""A build's private working folder (its MkDocs project) under `.reportgen/builds/`.

Each build gets its own folder `ID/`, so builds started in the same project folder never share
or delete each other's files. Beside it, `ID.lock` is created first and held with an exclusive
`fcntl.flock` for the build's life (it records "pid host" for people); the kernel drops the
lock when the process dies, even by kill -9. Every build first removes the folders whose lock
nobody holds: the leftovers of killed builds. The folder is removed when the build ends, on
failure too.

`.reportgen/file-digests.json` (DIGESTS_FILE) remembers the weights files' digests between
builds, so that a rebuild does not read every weights file again; `.reportgen/build-times.json`
(CALIBRATION_FILE) what builds measured per kind of work, for the next build's time estimate
(reportgen.commands.build_time).
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import socket
from pathlib import Path

from reportgen.errors import StoreError

WORK_ROOT = Path(".reportgen/builds")
# The weights files' digests, remembered between builds (reportgen.engine.digests); beside the
# working folders, not in the artifact store: they describe the models folder, not results.
DIGESTS_FILE = WORK_ROOT.parent / "file-digests.json"
CALIBRATION_FILE = WORK_ROOT.parent / "build-times.json"    # measured per machine, likewise


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def remove_abandoned(root: Path, keep: str | None = None) -> list[str]:
    """Remove the working folders whose owner is gone; returns their names."""
    removed = []
    if not root.is_dir():
        return removed
    for lock in sorted(root.glob("*.lock")):
        name = lock.name[:-len(".lock")]
        if name == keep:
            continue
        try:
            fd = os.open(lock, os.O_RDWR)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue                      # its build is running
            if not _same_file(fd, lock):
                continue                      # another build cleaned it up meanwhile
            shutil.rmtree(root / name, ignore_errors=True)
            lock.unlink(missing_ok=True)
            removed.append(name)
        finally:
            os.close(fd)
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
        self._fd: int | None = None

    def __enter__(self) -> Path:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            while True:
                name = f"{os.getpid()}-{secrets.token_hex(4)}"
                lock = self.root / f"{name}.lock"
                try:
                    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
                except FileExistsError:
                    continue
                fcntl.flock(fd, fcntl.LOCK_EX)   # waits only while a cleaner looks at it
                if _same_file(fd, lock):
                    break
                os.close(fd)                     # a cleaner took it for abandoned: new name
            os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
            self._fd, self.name = fd, name
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
        if self._fd is not None:
            (self.root / f"{self.name}.lock").unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = None
