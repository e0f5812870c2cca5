"""Which files of a site folder reportgen wrote: the marker's list of them with their sha256, the
files a folder holds that the list does not name, the listed files changed or deleted since,
and removing an old site file by file from its list.

The marker (MARKER, at the site's top level) is `{"generator": "reportgen", "digest": ...,
"files": {"path/relative/to/the/site": "sha256", ...}}`. It holds no time and no absolute path:
it is published with the site, and two builds of the same pages are byte-identical. A marker
without "files" (written by reportgen before the list) proves nothing about the folder's files;
a marker whose "files" is a plain list of paths (before the digests) proves which files are
reportgen's but not that they are intact.

Hashing every file of a site the size of the default one (README, "Site weight": 5,629 files,
56.8 MB; measured on 5,600 files of 57 MB) takes 0.12 s with SHA-256 on the 2-core machine
(hashlib.file_digest, files in the page cache; BLAKE2b 0.14 s, MD5 0.16 s, reading alone
0.06 s), a tenth of a rebuild with nothing to do (1.1 s): so a build checks every file each
time rather than trusting file times, and the digests are the ones `sha256sum` prints.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path, PurePosixPath

MARKER = ".reportgen-site.json"
GENERATOR = "reportgen"
# What a site reportgen builds holds: a file of another kind is most likely a user's, and is
# named first when a message can only show a few (the order of a message, never a decision).
_SITE_SUFFIXES = {".html", ".js", ".css", ".png", ".svg", ".pdf", ".json", ".csv", ".xml",
                  ".gz"}


def read_marker(site_dir: str | Path) -> dict | None:
    """The marker's contents when `site_dir` is a site reportgen made, else None."""
    try:
        data = json.loads((Path(site_dir) / MARKER).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("generator") == GENERATOR else None


def listed_files(marker: dict | None) -> dict[str, str | None] | None:
    """{path: sha256, or None when the marker lists paths only} of the files reportgen wrote;
    None when the marker has no complete list (none, or an older reportgen's)."""
    files = (marker or {}).get("files")
    if isinstance(files, list) and all(isinstance(f, str) for f in files):
        return dict.fromkeys(files)
    if isinstance(files, dict) and all(isinstance(f, str) and isinstance(d, str)
                                       for f, d in files.items()):
        return dict(files)
    return None


def inventory(site: Path) -> tuple[list[str], list[str]]:
    """(files, folders) under `site` as sorted POSIX paths relative to it, the top-level marker
    aside. A symbolic link is a file here, never followed; a folder that cannot be read raises
    OSError (what it holds is unknown, so nothing may be decided about it)."""
    files, folders = [], []

    def fail(exc: OSError) -> None:
        raise exc

    for top, dirs, names in os.walk(site, onerror=fail):
        rel = os.path.relpath(top, site)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        for name in list(dirs):
            if os.path.islink(os.path.join(top, name)):
                dirs.remove(name)
                names.append(name)
            else:
                folders.append(prefix + name)
        files += [prefix + name for name in names if prefix or name != MARKER]
    return sorted(files), sorted(folders)


def _folders_of(paths) -> set[str]:
    """Every folder that holds one of `paths` (at any depth)."""
    return {str(parent) for path in paths for parent in PurePosixPath(path).parents
            if str(parent) != "."}


def unknown_entries(files: list[str], folders: list[str], listed) -> list[str]:
    """What a folder holds that reportgen did not write: files not on the list, and folders
    holding no listed file (named with a trailing slash), likely a user's first."""
    known = set(listed)
    found = [f for f in files if f not in known]
    named = _folders_of(known) | _folders_of(found)     # an unknown file names its folder
    found += [f"{d}/" for d in folders if d not in named]
    return sorted(found, key=_likely_ours)


def _likely_ours(path: str) -> tuple[bool, str]:
    return PurePosixPath(path.rstrip("/")).suffix in _SITE_SUFFIXES, path


def shown(names: list[str], limit: int = 3) -> str:
    """'a, b, c and 12 more': a few names for a one-line message."""
    more = len(names) - limit
    return ", ".join(names[:limit]) + (f" and {more:,} more" if more > 0 else "")


def file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def changed_files(site: Path, listed: dict[str, str | None]) -> list[str]:
    """The listed files that are gone, no longer plain files, or hold other bytes than when
    reportgen wrote them (every one when the list has no digests)."""
    changed = []
    for name, digest in sorted(listed.items()):
        path = site / name
        try:
            same = (digest is not None and not path.is_symlink() and path.is_file()
                    and file_sha256(path) == digest)
        except OSError:
            same = False
        if not same:
            changed.append(name)
    return changed


def remove_empty_folders(root: Path) -> None:
    """Remove the empty folders under `root`, deepest first; a folder holding anything stays."""
    _, folders = inventory(root)
    for folder in sorted(folders, key=lambda d: d.count("/"), reverse=True):
        try:
            os.rmdir(root / folder)
        except OSError:
            pass


def write_marker(site_dir: Path, extra: dict | None = None) -> None:
    """List every file of a finished site with its sha256 (empty folders, which a static site
    does not need, are removed first: a folder then always holds a listed file)."""
    site = Path(site_dir)
    remove_empty_folders(site)
    files, _ = inventory(site)
    data = {"generator": GENERATOR, **(extra or {}),
            "files": {name: file_sha256(site / name) for name in files}}
    (site / MARKER).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n",
                               encoding="utf-8")


def remove_listed(folder: Path) -> None:
    """Remove from `folder` (an old site, renamed away) the files its marker lists, then the
    marker, then the folders left empty, and `folder` itself once empty. Only files found in
    `folder` are touched: a path on the list reaching through a symbolic link, or out of the
    folder, matches none of them. Anything else stays where it is."""
    listed = listed_files(read_marker(folder)) or {}
    files, _ = inventory(folder)
    for name in files:
        if name in listed:
            (folder / name).unlink(missing_ok=True)
    (folder / MARKER).unlink(missing_ok=True)          # last: until then the list is there
    remove_empty_folders(folder)
    try:
        folder.rmdir()
    except OSError:
        pass
