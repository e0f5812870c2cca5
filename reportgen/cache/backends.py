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


def check_location(store, *, models_dir: str | Path, site_dir: str | Path | None = None) -> None:
    """Refuse (one line, before anything is written) a store folder that would mix its entries
    with the user's files: the models folder or a model's folder (one holding a params.toml),
    or a folder inside one; the site folder or a folder inside it; a folder holding files the
    store did not write. A store in an fsspec URL other than file:// is not a local folder."""
    from reportgen.errors import ReportgenError
    from reportgen.model_folder import PARAMS_FILE

    if isinstance(store, FsspecStore):
        if store.protocol != "file":
            return
        root = Path(store.prefix)
    else:
        root = Path(store.root)
    folder = root.expanduser().resolve()
    label = str(root)

    def refuse(why: str) -> None:
        raise ReportgenError(f"Refusing --cache-dir '{label}': {why}, and the artifact store "
                             f"writes its own folders there",
                             fix="choose a new or empty folder, or one a build made (the "
                                 "default is .reportgen/cache)")

    models = Path(models_dir).expanduser().resolve()
    if folder == models or models in folder.parents:
        refuse(f"it {'is' if folder == models else 'is inside'} the models folder ({models_dir})")
    model = next((p for p in (folder, *folder.parents) if (p / PARAMS_FILE).is_file()), None)
    if model is not None:
        refuse(f"it {'is' if model == folder else 'is inside'} the model folder {model}")
    if site_dir is not None:
        site = Path(site_dir).expanduser().resolve()
        if folder == site or site in folder.parents:
            refuse(f"it {'is' if folder == site else 'is inside'} the site folder ({site_dir})")
    if not store.is_store():
        refuse(f"it holds files the store did not write ({_some_entries(folder)})")


def _some_entries(folder: Path, shown: int = 3) -> str:
    """A few of a folder's entries, for a refusal."""
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        return exc.strerror or "unreadable"
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")
