"""What tells a stored file from the same file damaged since it was written (README, "What
reportgen guarantees": the store verifies what it serves).

Figures: the sha256 of every file is recorded in the entry's meta.json when it is written and
checked each time the entry is read, before a file reaches a site. Measured on the store of a
default MNIST_Demo build (2,430 entries: 1,444 of figures, 35 MB of files; page cache warm),
reading every figures entry took 0.15 s when only the files' presence was checked, 0.26 s with
every sha256, 0.29 s with the structural check below (PNG chunk CRCs walked in Python, JSON
parsed), which still misses a changed byte in an SVG, a PDF or a CSV; a warm build of it takes
3 to 14 s on a shared 2-core machine. So the digest, the stronger check, is also the cheaper.
Figure entries stored before digests were recorded are served when they pass that structural
check (`structural_problem`), not drawn again: their PNGs are checked as well as by a digest
(each chunk's CRC-32 covers all but its length, and a changed length breaks the walk), their
JSON for parsing, their SVG, PDF and CSV only for being complete.

Arrays (arrays.npz) are not hashed again: every member of a .npz carries the CRC-32 of its
bytes, checked whenever numpy loads it, and the member count is checked too
(reportgen.cache.npz): any one byte changed raises instead of giving other numbers. Reading
every array of that store took 0.86 s, 1.05 s with a sha256 on top: a second pass over bytes
already checked.
"""

from __future__ import annotations

import hashlib
import json
import struct
import threading
import zlib
from pathlib import Path
from typing import Callable

from reportgen import console

DIGESTS = "sha256"        # meta.json: {file name: sha256 of its bytes}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def digest_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def figures_problem(meta, read: Callable[[str], bytes]) -> str | None:
    """Why a figures entry cannot be served (None: every file is as stored). `meta` is its
    meta.json, `read(name)` the bytes of one of its files. Each file is compared with its
    recorded sha256, or, in an entry stored without digests, checked for its structure."""
    try:
        names = [fig["name"] for fig in meta["figures"]]
        digests = meta.get(DIGESTS)
    except (KeyError, TypeError, AttributeError):
        return "its meta.json is not a listing of figures"
    if digests is not None and not (isinstance(digests, dict) and set(names) <= set(digests)):
        return "its meta.json lists files without their sha256"
    for name in names:
        if not isinstance(name, str) or Path(name).name != name or name == "meta.json":
            return f"its meta.json lists {name!r}, not a file name"
        try:
            data = read(name)
        except (FileNotFoundError, IsADirectoryError, KeyError):
            return f"{name} is missing"
        except PermissionError:
            raise                   # not ours to read: not damage
        except OSError as exc:      # e.g. EIO: the disk cannot give the bytes back
            return f"{name} cannot be read ({exc.strerror or exc})"
        if digests is None:
            problem = structural_problem(name, data)
            if problem is not None:
                return f"{name} {problem}"
        elif digest_bytes(data) != digests[name]:
            return f"{name} does not match the sha256 recorded when it was stored"
    return None


def structural_problem(name: str, data: bytes) -> str | None:
    """What makes `data` an incomplete or damaged file of its kind (by `name`'s suffix)."""
    suffix = Path(name).suffix.lower()
    if suffix == ".png":
        return png_problem(data)
    if suffix == ".json":
        try:
            json.loads(data)
        except ValueError:
            return "is not valid JSON"
        return None
    if suffix == ".svg":
        return None if data.rstrip().endswith(b"</svg>") else "does not end with </svg>"
    if suffix == ".pdf":
        ok = data.startswith(b"%PDF-") and b"%%EOF" in data[-1024:]
        return None if ok else "is not a complete PDF"
    if suffix == ".csv":
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return "is not UTF-8 text"
    return None


def png_problem(data: bytes) -> str | None:
    """The first damage found walking a PNG's chunks: every chunk's CRC-32 (PNG specification,
    section 5.3) covers its type and data, and the file must end with IEND."""
    if not data.startswith(PNG_SIGNATURE):
        return "is not a PNG"
    at = len(PNG_SIGNATURE)
    while at + 12 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, at)
        end = at + 8 + length
        if end + 4 > len(data):
            return f"is cut short in its {kind!r} chunk"
        (crc,) = struct.unpack_from(">I", data, end)
        if zlib.crc32(data[at + 4:end]) != crc:
            return f"fails the CRC of its {kind!r} chunk"
        if kind == b"IEND":
            return None if end + 4 == len(data) else "has bytes after IEND"
        at = end + 4
    return "is cut short (no IEND chunk)"


class DamageReport:
    """Says once per entry, in one line, that a damaged entry was found and removed and what is
    done instead; `damaged` holds the keys said so far. `say` prints (console.notice), or is
    another store's hook (the fsspec store words its mirror's findings itself)."""

    def __init__(self, where: str, say: Callable[[str], None] | None = None):
        self.where = where
        self.say = say or console.notice
        self.damaged: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, kind: str, key: str, reason: str, about: str | None,
                 action: str) -> None:
        with self._lock:
            if key in self.damaged:
                return
            self.damaged.add(key)
        self.say(damage_line(self.where, kind, key, reason, about, action))


def damage_line(where: str, kind: str, key: str, reason: str, about: str | None,
                action: str) -> str:
    named = f"{about} ({kind} entry {key[:12]})" if about else f"{kind} entry {key[:12]}"
    return f"Damaged in the artifact store {where}: {named}: {reason}; removed, {action}."


def about_arrays(meta: dict) -> str | None:
    """An arrays entry as its metadata names it: 'rpv (MNIST_Demo, step 1-0, test-3)'."""
    if not isinstance(meta, dict) or not meta.get("technique"):
        return None
    parts = [str(meta["model"])] if meta.get("model") else []
    parts += [f"step {meta['step']}"] if meta.get("step") else []
    parts += [str(meta["input"])] if meta.get("input") else []
    return f"{meta['technique']}" + (f" ({', '.join(parts)})" if parts else "")
