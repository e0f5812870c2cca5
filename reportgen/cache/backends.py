"""Which artifact store a --cache-dir names: a folder (reportgen.cache.store.ArtifactStore, as
always) or an fsspec URL such as s3://bucket/prefix (reportgen.cache.fsspec_store)."""

from __future__ import annotations

import os
from pathlib import Path

from reportgen.cache.fsspec_store import FsspecStore, is_url
from reportgen.cache.store import DEFAULT_CACHE_DIR, ArtifactStore


def open_store(location: str | Path | None = None):
    """The store at `location` (default: $REPORTGEN_CACHE, else .reportgen/cache)."""
    if location is None:
        location = os.environ.get("REPORTGEN_CACHE") or str(DEFAULT_CACHE_DIR)
    if is_url(str(location)):
        return FsspecStore(str(location))
    return ArtifactStore(location)


def location_of(store) -> str:
    """What another process (a cluster worker) opens the same store with: the URL, or the
    folder's absolute path (a worker's working folder is not the client's)."""
    if isinstance(store, FsspecStore):
        return store.location
    return str(Path(store.root).absolute())


def shared_between_processes(store) -> bool:
    """memory:// lives in one process: cluster workers would each write into their own."""
    return not (isinstance(store, FsspecStore) and store.protocol == "memory")
