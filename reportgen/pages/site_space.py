"""How much disk a site takes, checked before MkDocs writes a byte of it: the new site is
staged beside the old one, which stays until the swap (reportgen.pages.site_output), so the
whole new site must fit in what the disk has free."""

from __future__ import annotations

import os
from pathlib import Path

from reportgen.errors import ReportgenError
from reportgen.pages.linked_figures import PREFIX as LINKED
from reportgen.sizes import free_space, size_text

# templates and code are not copied as files, nor hidden folders (Material's 10 MB of .icons)
_THEME_CODE = (".html", ".py", ".pyc", ".yml")


def site_bytes(docs: Path, theme_dirs, site_parent: Path) -> int:
    """About the bytes MkDocs writes for the site: every file of the docs folder (the figure
    files under artifacts/ are hard links on the same disk: nothing), the theme's static files
    (copied before the unused ones are dropped), and as much again as the pages for the search
    index."""
    docs = Path(docs)
    linked = _device(docs) == _device(site_parent)
    pages = files = 0
    for path in docs.rglob("*"):
        if not path.is_file():
            continue
        if path.suffix == ".md":
            pages += path.stat().st_size
        elif not (linked and path.relative_to(docs).as_posix().startswith(LINKED)):
            files += path.stat().st_size
    theme = sum(path.stat().st_size for folder in theme_dirs for path in Path(folder).rglob("*")
                if path.is_file() and path.suffix not in _THEME_CODE
                and not any(part.startswith(".") for part in path.relative_to(folder).parts))
    return 3 * pages + files + theme          # a page's HTML, its share of the search index


def check_room(site_dir: Path, needed: int) -> None:
    """Refuse in one line, before writing, a site that does not fit on its disk."""
    free = free_space(Path(site_dir).parent)
    if free is not None and free < needed:
        raise ReportgenError(
            f"No space for the site {site_dir} on its disk (about {size_text(needed)} "
            f"needed, {size_text(free)} free); the previous site, if any, is left as it was",
            fix="free space on that disk, or choose a --site-dir on another disk")


def _device(path: Path) -> int | None:
    for folder in (Path(path).absolute(), *Path(path).absolute().parents):
        try:
            return os.stat(folder).st_dev
        except OSError:
            continue
    return None
