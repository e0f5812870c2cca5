"""Kernel `flock` locks where the `filelock` package cannot keep our guarantees.

The site folder's lock and the build working folders' locks are `filelock.FileLock`s
(reportgen.pages.site_output, reportgen.commands.work_folder). Two locks stay here, as raw
`fcntl.flock` calls, because filelock offers neither:
- a shared (read) lock on a plain file: the artifact store's lock, which builds share and
  `cache clear` takes alone. filelock's `ReadWriteLock` is an SQLite database (it writes journal
  files into the store and needs write access to it; `clear` deletes the lock file while holding
  it) and its `SoftReadWriteLock` is a marker with heartbeats that a kill -9 leaves behind;
- a lock on a folder itself: the training lock is on the model folder, so no lock file ever
  appears in it (filelock always locks a file it opens for writing, creating it if missing).
Like filelock's native lock, the kernel releases these when their holder dies, even by kill -9.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def try_lock(fd: int, *, exclusive: bool = True, blocking: bool = False) -> bool:
    """Lock an open descriptor (a file or a folder); False if `blocking` is False and another
    open file holds a conflicting lock."""
    mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | (0 if blocking else fcntl.LOCK_NB)
    try:
        fcntl.flock(fd, mode)
    except BlockingIOError:
        return False
    return True


def same_file(fd: int, path: Path) -> bool:
    """Whether `path` still names the file open as `fd` (not removed, not replaced)."""
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (on_disk.st_dev, on_disk.st_ino) == (held.st_dev, held.st_ino)


def acquire(path: Path, exclusive: bool, blocking: bool) -> int | None:
    """An open descriptor holding the lock on the file `path` (created if missing), or None
    when `blocking` is False and another process holds a conflicting lock.

    A holder may delete the lock file while holding it (`cache clear` does); a process that
    opened the old file meanwhile would lock a file nobody else sees, so after locking we check
    the path still names our file and start over if not."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except PermissionError:   # another user's lock file: flock needs no write access
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            locked = try_lock(fd, exclusive=exclusive, blocking=blocking)
        except BaseException:
            os.close(fd)
            raise
        if not locked:
            os.close(fd)
            return None
        if same_file(fd, path):
            return fd
        os.close(fd)


def release(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
