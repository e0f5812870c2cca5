"""What `reportgen publish` keeps on the branch: the new site goes over the branch's tree, and
only the files reportgen published there before are replaced or removed.

Every publish records the paths it put on the branch in PUBLISHED_MARKER, at the top of the
published tree: `{"generator": "reportgen", "files": ["path", ...]}` (sorted, no time, so an
unchanged site gives the same tree). The next publish reads that list from the branch's tip,
whoever made the tip (GitHub's "Create CNAME" commit on top of a publish still carries it):
the listed paths the new site no longer produces are removed, every other file of the branch
is kept as it is (a CNAME, a README, the user's own pages). A branch published by a reportgen
without the list is read through the site marker it published (reportgen.pages.site_files).

A file of the new site that would overwrite (with other bytes), or need the place of, a file
reportgen did not publish is a conflict: the publish is refused, naming the files, unless
`--replace PATH` allows the site to take that path (a file, or a folder and all it holds).
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath

from reportgen.errors import ReportgenError
from reportgen.pages.site_files import GENERATOR, MARKER, listed_files, shown

PUBLISHED_MARKER = ".reportgen-published.json"
_ENCODING = ("utf-8", "surrogateescape")      # git paths are bytes: kept byte for byte


def tree_entries(git, tree: str) -> dict[str, str]:
    """{path: "mode type object"} of every file (blob, link or submodule) of `tree`."""
    out = git.run("ls-tree", "-r", "-z", "--full-tree", tree).stdout.decode(*_ENCODING)
    entries = {}
    for line in out.split("\0"):
        if line:
            meta, path = line.split("\t", 1)
            entries[path] = meta
    return entries


def _blob_text(git, meta: str) -> str | None:
    mode, kind, obj = meta.split()
    if kind != "blob":
        return None
    result = git.run("cat-file", "blob", obj, check=False)
    return result.stdout.decode("utf-8", "replace") if result.returncode == 0 else None


def published_before(git, entries: dict[str, str]) -> set[str]:
    """The paths of the branch's tree that reportgen published there (the list of its last
    publish; for an older publish without the list, its site marker's files with the marker
    and .nojekyll). A branch reportgen never published to: none."""
    text = _blob_text(git, entries[PUBLISHED_MARKER]) if PUBLISHED_MARKER in entries else None
    if text is not None:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        files = data.get("files") if isinstance(data, dict) \
            and data.get("generator") == GENERATOR else None
        if isinstance(files, list) and all(isinstance(f, str) for f in files):
            return set(files) | {PUBLISHED_MARKER}
    text = _blob_text(git, entries[MARKER]) if MARKER in entries else None
    if text is not None:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict) and data.get("generator") == GENERATOR:
            return set(listed_files(data) or {}) | {MARKER, ".nojekyll"}
    return set()


def _folders_of(path: str) -> set[str]:
    return {str(p) for p in PurePosixPath(path).parents if str(p) != "."}


def _covered(path: str, replace: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r + "/") for r in replace)


def merged_entries(new: dict[str, str], old: dict[str, str], ours_before: set[str],
                   replace: tuple[str, ...] = (), branch: str = "gh-pages") -> dict[str, str]:
    """The branch's files to keep beside `new` (the site's files): every file of `old` (the
    branch's tip) that reportgen did not publish. Raises when one of them would be overwritten
    by a file of the site or would need its place (a file where the site has a folder, or
    inside a path the site writes as a file), unless `replace` names it."""
    replace = tuple(r.strip("/") for r in replace if r.strip("/"))
    foreign = {p: m for p, m in old.items() if p not in ours_before and p != PUBLISHED_MARKER}
    new_folders = set().union(*map(_folders_of, new)) if new else set()
    # a file the site holds byte for byte (an empty .nojekyll of the user's) loses nothing
    conflicts = sorted(p for p in foreign if (p in new and new[p] != foreign[p])
                       or p in new_folders or _folders_of(p) & new.keys())
    foreign = {p: m for p, m in foreign.items() if new.get(p) != m}
    refused = [p for p in conflicts if not _covered(p, replace)]
    if refused:
        raise ReportgenError(
            f"Publishing would overwrite {len(refused)} file(s) on the branch '{branch}' that "
            f"reportgen did not publish: {shown(refused)}.",
            fix="move or rename them on the branch, or pass --replace PATH for each one the "
                "site may take (e.g. --replace " + refused[0] + ")")
    return {p: m for p, m in foreign.items() if p not in conflicts}


def marker_bytes(paths) -> bytes:
    """PUBLISHED_MARKER's contents listing `paths`."""
    data = {"generator": GENERATOR, "files": sorted(set(paths) - {PUBLISHED_MARKER})}
    return (json.dumps(data, indent=1) + "\n").encode("utf-8")


def index_info(entries: dict[str, str]) -> bytes:
    """`entries` as `git update-index -z --index-info` reads them (ls-tree's format)."""
    return b"".join(f"{meta}\t{path}".encode(*_ENCODING) + b"\0"
                    for path, meta in sorted(entries.items()))
