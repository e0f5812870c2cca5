"""The store's lock: builds share it, `cache clear` takes it alone.

`fcntl.flock` on one lock file in the store root: the kernel drops the lock of a killed process,
so a killed build never blocks a later clear. A holder also leaves a note under `tmp/` (its pid
and command) so that a waiting clear can say which build it waits for; a killed holder's note is
removed with the other stale working files.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path

from reportgen.cache import workdirs

LOCK_NAME = "store.lock"
HOLDER = "build"    # prefix of a holder's note in tmp/


def acquire(path: Path, exclusive: bool, blocking: bool) -> int | None:
    """An open descriptor holding the lock on `path` (created if missing), or None when
    `blocking` is False and another process holds a conflicting lock.

    A clear deletes the lock file while holding it; a process that opened the old file meanwhile
    would lock a file nobody else sees, so after locking we check the path still names our file
    and start over if not."""
    mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | (0 if blocking else fcntl.LOCK_NB)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except PermissionError:   # another user's lock file: flock needs no write access
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, mode)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        try:
            on_disk = os.stat(path)
            held = os.fstat(fd)
            if (on_disk.st_dev, on_disk.st_ino) == (held.st_dev, held.st_ino):
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def release(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _command_line() -> str:
    argv = sys.argv or [""]
    head = Path(argv[0]).name
    if head in ("reportgen", "__main__.py"):
        head = "reportgen"
    text = " ".join([head, *argv[1:]]).strip()
    return text if len(text) <= 80 else text[:77] + "..."


def write_note(tmp_root: Path) -> Path | None:
    """Leave a note that this process holds the store (best effort: the lock is what counts)."""
    path = tmp_root / (workdirs.private_name(HOLDER) + ".json")
    try:
        tmp_root.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"pid": os.getpid(), "host": workdirs.this_host(),
                                    "command": _command_line(), "since": time.time()}))
    except OSError:
        return None
    return path


def live_holders(tmp_root: Path) -> list[str]:
    """'pid 123: reportgen build ...' for each holder whose note shows a live process (or one
    on another host, which we cannot check)."""
    out = []
    try:
        notes = sorted(tmp_root.glob(f"{HOLDER}{workdirs.SEP}*.json"))
    except OSError:
        return out
    for note in notes:
        writer = workdirs.writer_of(note.name)
        if writer is None or workdirs.writer_alive(note.name) is False:
            continue
        try:
            command = json.loads(note.read_text()).get("command", "")
        except (OSError, ValueError, AttributeError):
            command = ""
        where = f"pid {writer.pid}" + ("" if writer.host == workdirs.this_host()
                                       else f" on {writer.host}")
        out.append(f"{where}: {command}" if command else where)
    return out
