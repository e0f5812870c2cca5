"""Sizes in bytes as a person reads them, and how much a disk has free."""

from __future__ import annotations

import shutil
from pathlib import Path


def size_text(n: int | float) -> str:
    """1.2 GB, 720 TB: decimal units, as a person reads sizes."""
    for unit, size in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{int(n)} bytes"


def free_space(path: str | Path) -> int | None:
    """Bytes free to this user on the disk that holds `path` (or would: its nearest existing
    parent folder); None when it cannot be read."""
    path = Path(path).absolute()
    for folder in (path, *path.parents):
        try:
            if folder.exists():
                return shutil.disk_usage(folder).free
        except OSError:
            return None
    return None
