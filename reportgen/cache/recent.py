"""The arrays a build stored or read last, kept in memory (least recently used first out).

A cold build computes a step's results, stores them, and draws its figures from them a moment
later; the training filmstrip reads them again for its shared colour scale. Keys are content
hashes, so an entry kept here is exactly what the store holds: reading it back from memory
saves a .npz parse (a tenth of a cold build's time per image). The arrays are made read-only,
so no caller can change what the next one reads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

DEFAULT_BUDGET = 256 * 2**20     # bytes; LPcaps' largest per-input result is under 2 MB


class RecentArrays:
    def __init__(self, budget: int = DEFAULT_BUDGET):
        self.budget = budget
        self._entries: OrderedDict[str, tuple[dict[str, np.ndarray], object]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def remember(self, key: str, arrays: dict, stamp: object = None) -> dict[str, np.ndarray]:
        """Keep read-only views of `arrays` (which no one else may change) under `key`;
        returns what is kept. `get` returns them only for the same `stamp` (e.g. the stored
        file's size and time: an entry damaged on disk is not hidden by its copy here)."""
        kept = {}
        for name, value in arrays.items():
            value = np.asarray(value).view()
            value.flags.writeable = False
            kept[name] = value
        size = sum(v.nbytes for v in kept.values())
        if size > self.budget:
            return kept
        with self._lock:
            self._drop(key)
            self._entries[key] = (kept, stamp)
            self._bytes += size
            while self._bytes > self.budget:
                self._drop(next(iter(self._entries)))
        return kept

    def get(self, key: str, stamp: object = None) -> dict[str, np.ndarray] | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None or found[1] != stamp:
                return None
            self._entries.move_to_end(key)
            return dict(found[0])

    def forget(self, key: str) -> None:
        with self._lock:
            self._drop(key)

    def _drop(self, key: str) -> None:
        dropped = self._entries.pop(key, None)
        if dropped is not None:
            self._bytes -= sum(v.nbytes for v in dropped[0].values())
