"""Reading .npz archives from several threads at once.

NumPy parses each array's header with `ast.literal_eval`, and CPython 3.11 before 3.11.8 keeps
the AST converter's recursion depth in shared state: two threads parsing at the same moment can
fail with "SystemError: AST constructor recursion depth mismatch" (CPython gh-106905). The site's
drawing threads each read stored arrays, so every read goes through one lock; reading is a small
part of drawing, so the lock costs little.
"""

from __future__ import annotations

import threading

import numpy as np

_READ_LOCK = threading.Lock()


def read_npz(source, skip: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """Every array of the .npz `source` (a path or a binary file object) but those in `skip`."""
    with _READ_LOCK, np.load(source, allow_pickle=False) as data:
        return {k: data[k] for k in data.files if k not in skip}
