"""sha256 of weights files (and other facts of a file's content: whether its weights are
numbers), remembered between builds.

A rebuild must not read hundreds of MB of weights again to learn that nothing changed
(README, "A second identical build computes nothing"). The digest of each file is kept in a
small JSON file together with what identifies that version of the file: its size, modification
and status-change times, inode and device. Training replaces a weights file by a rename (a new
inode); writing a file in place changes its status-change time, which no user tool can set
back, even when the modification time is restored. Either way the identity no longer matches
and the file is hashed again.

As in git's index ("racy clean" entries), a digest is not remembered for a file changed in the
last few seconds: a second change within the file system's timestamp granularity could
otherwise keep the same identity.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import threading
import time
from pathlib import Path

from reportgen.errors import ReportgenError

FORMAT = 1
RACY_SECONDS = 2.0


def _identity(stat: os.stat_result) -> list[int]:
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev]


def hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class DigestMemo:
    """`memo.digest(path)`: the file's sha256, read from the memo file when the file is the
    version that was hashed; `save()` writes what was learned (best effort: a memo that cannot
    be written only costs hashing again next time)."""

    def __init__(self, memo_file: str | Path | None):
        self.path = None if memo_file is None else Path(memo_file)
        self._entries: dict[str, dict] = {}
        self._changed = False
        self._lock = threading.Lock()
        if self.path is not None:
            self._entries = self._read()

    def _read(self) -> dict[str, dict]:
        try:
            data = json.loads(self.path.read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return {}
        files = data.get("files")
        return files if isinstance(files, dict) else {}

    def digest(self, path: str | Path) -> str:
        """The file's sha256; a file that cannot be read (a folder in its place, no
        permission) is a one-line ReportgenError naming it."""
        return self.fact(path, "sha256", hash_file)

    def fact(self, path: str | Path, name: str, compute):
        """`compute(path)` (a JSON value: the sha256, whether its weights are numbers),
        remembered for this version of the file under `name` and `compute.version` (if it has
        one: a stricter rule is not answered by what a former one found); a file that cannot
        be read is a one-line ReportgenError naming it."""
        version = getattr(compute, "version", None)
        if version is not None:
            name = f"{name}@{version}"
        try:
            return self._fact(Path(path), name, compute)
        except OSError as exc:
            raise ReportgenError(f"Cannot read {path}: {exc.strerror or exc}",
                                 fix=f"make {path} a readable file (the file training saved), "
                                     f"or leave its step out of --steps") from None

    def _fact(self, path: Path, name: str, compute):
        key = os.path.abspath(path)
        before = os.stat(path)
        with self._lock:
            entry = self._entries.get(key)
        known = isinstance(entry, dict) and entry.get("id") == _identity(before)
        if known and name in entry:
            return entry[name]
        value = compute(path)
        after = os.stat(path)
        changed_at = max(after.st_mtime_ns, after.st_ctime_ns) / 1e9
        if _identity(after) == _identity(before) and time.time() - changed_at > RACY_SECONDS:
            with self._lock:
                entry = self._entries.get(key)
                kept = entry if isinstance(entry, dict) and entry.get("id") == _identity(after) \
                    else {"id": _identity(after)}
                self._entries[key] = {**kept, name: value}
                self._changed = True
        return value

    def save(self) -> None:
        if self.path is None or not self._changed:
            return
        with self._lock:
            # keep what other builds learned meanwhile; drop files that are gone
            merged = {**self._read(), **self._entries}
            merged = {k: v for k, v in merged.items() if os.path.exists(k)}
            self._changed = False
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}-{secrets.token_hex(4)}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"format": FORMAT, "files": merged}, sort_keys=True),
                           "utf-8")
            os.replace(tmp, self.path)
        except OSError:
            try:
                tmp.unlink(missing_ok=True)
            except OSError:     # its folder is a file or unreadable: nothing was written there
                pass
