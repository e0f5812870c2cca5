"""Reading .npz archives: whole and as written, from several threads at once.

A .npz is a zip whose every member carries the CRC-32 of its bytes (the array's header and
data); zipfile checks it when a member is read to its end, which numpy does for every array it
loads. What the CRC-32s do not cover is the archive's listing: a damaged central directory can
hide a member, so the number of members found is checked against the end record's count. Any
one byte changed anywhere in an archive then either raises or leaves every array as written
(tests/test_cache.py changes each byte in turn).

NumPy parses each array's header with `ast.literal_eval`, and CPython 3.11 before 3.11.8 keeps
the AST converter's recursion depth in shared state: two threads parsing at the same moment can
fail with "SystemError: AST constructor recursion depth mismatch" (CPython gh-106905). The site's
drawing threads each read stored arrays, so every read goes through one lock; reading is a small
part of drawing, so the lock costs little.
"""

from __future__ import annotations

import io
import struct
import threading
import zipfile

import numpy as np

_READ_LOCK = threading.Lock()
_END_RECORD = b"PK\x05\x06"      # np.savez writes no archive comment: it is the last 22 bytes


def read_npz(source) -> dict[str, np.ndarray]:
    """Every array of the .npz `source` (a seekable binary file object). A damaged archive
    raises zipfile.BadZipFile (or ValueError, OSError, EOFError, KeyError) instead of giving
    wrong or missing arrays."""
    with _READ_LOCK:
        end = source.seek(0, io.SEEK_END)
        source.seek(max(end - 22, 0))
        tail = source.read(22)
        source.seek(0)
        try:
            with np.load(source, allow_pickle=False) as data:
                if tail[:4] == _END_RECORD:
                    (total,) = struct.unpack_from("<H", tail, 10)
                    if total != len(data.zip.infolist()):
                        raise zipfile.BadZipFile(f"the archive lists {len(data.files)} of "
                                                 f"its {total} members")
                return {k: data[k] for k in data.files}
        except NotImplementedError as exc:    # a damaged version, flag or method field
            raise zipfile.BadZipFile(str(exc)) from exc
