"""The store's lock: builds share it, `cache clear` takes it alone.

A shared `flock` on one lock file in the store root (reportgen.file_locks says why not
filelock): the kernel drops the lock of a killed process, so a killed build never blocks a later
clear. A holder also leaves a note under `tmp/` (its pid and command) so that a waiting clear
can say which build it waits for; a killed holder's note is removed with the other stale working
files.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from reportgen.cache import workdirs

LOCK_NAME = "store.lock"
HOLDER = "build"    # prefix of a holder's note in tmp/


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
