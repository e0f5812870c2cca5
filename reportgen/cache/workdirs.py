"""Private working folders under a store's `tmp/`, named after the process that writes them.

A name is `PREFIX@HOST@PID@RANDOM`, so the folders a killed build left behind can be told from
those of a build still running: on this host, a folder is stale once its writer process no
longer exists; from another host (a store on a network drive) or with a name we did not make,
only once it is older than `STALE_AFTER`. Nothing outside the given `tmp/` is ever touched.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SEP = "@"
STALE_AFTER = 24 * 3600.0   # generous: a folder of a live writer on another host is kept a day
TRASH = "trash"             # prefix of a folder renamed aside to be deleted


@lru_cache(maxsize=1)
def this_host() -> str:
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()) or "unknown-host"
    return host[:64]


def private_name(prefix: str) -> str:
    return SEP.join([prefix, this_host(), str(os.getpid()), secrets.token_hex(4)])


def make_private_dir(tmp_root: Path, prefix: str, parent_exists: bool = False) -> Path:
    """A new empty folder `tmp_root/PREFIX@HOST@PID@RANDOM` (tmp_root is created if missing;
    with `parent_exists`, only if the first attempt finds it missing)."""
    if not parent_exists:
        tmp_root.mkdir(parents=True, exist_ok=True)
    while True:
        path = tmp_root / private_name(prefix)
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
        except FileNotFoundError:
            if parent_exists:          # removed meanwhile: make it once more
                tmp_root.mkdir(parents=True, exist_ok=True)
                parent_exists = False
                continue
            raise


@dataclass(frozen=True)
class Writer:
    prefix: str
    host: str
    pid: int


def writer_of(name: str) -> Writer | None:
    """Who made `name` (a private_name), or None for a name we did not make."""
    if name.endswith(".json"):
        name = name[:-len(".json")]
    parts = name.split(SEP)
    if len(parts) != 4 or not parts[2].isdigit():
        return None
    return Writer(prefix=parts[0], host=parts[1], pid=int(parts[2]))


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists on this host (a zombie, killed but not yet reaped, is dead)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:      # EPERM: it exists, owned by someone else
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def writer_alive(name: str) -> bool | None:
    """True / False for a writer on this host; None when it cannot be told (other host, or a
    name we did not make)."""
    writer = writer_of(name)
    if writer is None or writer.host != this_host():
        return None
    return writer.pid == os.getpid() or pid_alive(writer.pid)


def is_stale(path: Path, now: float | None = None) -> bool:
    alive = writer_alive(path.name)
    if alive is not None:
        return not alive
    now = time.time() if now is None else now
    return now - path.lstat().st_mtime > STALE_AFTER


def remove(path: Path, tmp_root: Path) -> bool:
    """Delete one child of `tmp_root`: first renamed aside under our own name (atomic, so two
    cleaners never share the work and a cleaner killed half-way leaves a folder the next one
    recognises), then removed. A symbolic link is unlinked, never followed. False if already
    gone."""
    if path.is_symlink() or not path.is_dir():
        try:
            path.unlink()
            return True
        except FileNotFoundError:
            return False
    aside = tmp_root / private_name(TRASH)
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return False
    shutil.rmtree(aside, ignore_errors=True)
    return True


def remove_stale(tmp_root: Path) -> int:
    """Remove the children of `tmp_root` whose writer is gone; returns how many."""
    if tmp_root.is_symlink() or not tmp_root.is_dir():
        return 0
    removed = 0
    now = time.time()
    try:
        children = list(tmp_root.iterdir())
    except OSError:
        return 0
    for child in children:
        try:
            if is_stale(child, now) and remove(child, tmp_root):
                removed += 1
        except OSError:   # vanished meanwhile, or not ours to delete: leave it
            continue
    return removed
