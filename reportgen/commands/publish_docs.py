"""Which folder `reportgen publish --docs-dir` accepts: one that `mkdocs build` wrote, holding
nothing a MkDocs build does not write, and never the analysis site.

The rule, file by file (every file under the folder, at any depth):
- It must hold what every MkDocs build writes (MkDocs' "site_dir": index.html, sitemap.xml
  and, with the built-in search plugin, search/search_index.json).
- No path may have a part starting with "." (.env, .git/, .DS_Store, .reportgen-site.json):
  MkDocs skips dot-files of the docs folder and writes none itself.
- No symbolic link (git would publish the link, naming a path of this machine).
- Every file must be a kind a MkDocs site consists of: pages (.html, .htm), stylesheets and
  scripts with their source maps (.css, .js, .mjs, .map), images (.png, .jpg, .jpeg, .gif,
  .svg, .webp, .avif, .ico), fonts (.woff, .woff2, .ttf, .otf, .eot), sitemaps and feeds
  (.xml, and sitemap.xml.gz), the search index (.json, only under search/) and mkdocstrings'
  inventory (objects.inv). Anything else (secrets.env, notes.txt, a .py or .toml copied from
  the docs sources, a backup.tar.gz) is refused: a build of these docs does not write it, so
  it was put there by someone else, and the branch is public.
- The analysis site (reportgen's site marker, or the --site-dir folder itself) is refused: it
  is published at the branch's root already.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from reportgen.errors import ReportgenError
from reportgen.pages.site_files import MARKER, inventory, shown

REQUIRED = ("index.html", "sitemap.xml", "search/search_index.json")
SUFFIXES = frozenset({
    ".html", ".htm", ".css", ".js", ".mjs", ".map",
    ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".avif", ".ico",
    ".woff", ".woff2", ".ttf", ".otf", ".eot", ".xml"})
NAMES = frozenset({"sitemap.xml.gz", "objects.inv"})


def foreign_files(docs: Path, files: list[str]) -> list[str]:
    """The files of `docs` (paths relative to it) a MkDocs build does not write."""
    found = []
    for name in files:
        path = PurePosixPath(name)
        if any(part.startswith(".") for part in path.parts) or (docs / name).is_symlink():
            found.append(name)
        elif not (path.suffix.lower() in SUFFIXES or path.name in NAMES
                  or (path.suffix.lower() == ".json" and path.parts[0] == "search")):
            found.append(name)
    return found


def check_docs_dir(docs_dir: str | Path, site: Path) -> tuple[Path, list[str]]:
    """(the folder, its files) when `docs_dir` is a MkDocs build to publish under docs/."""
    docs = Path(docs_dir)
    if docs.resolve() == site.resolve() or (docs / MARKER).exists():
        raise ReportgenError(f"'{docs}' is the analysis site, not built documentation.",
                             expected="the folder `mkdocs build` wrote (docs-site/)",
                             fix="pass --docs-dir docs-site after `mkdocs build`; the site is "
                                 "published at the branch's root already")
    missing = [name for name in REQUIRED if not (docs / name).is_file()]
    if missing:
        raise ReportgenError(f"No MkDocs build in '{docs}'.",
                             expected="the files every `mkdocs build` writes: "
                                      + ", ".join(REQUIRED),
                             received="missing folder" if not docs.exists()
                             else "no " + ", ".join(missing),
                             fix="run `mkdocs build` in reportgen's repository first (it writes "
                                 "docs-site/), or pass --docs-dir with the folder it wrote")
    try:
        files, _ = inventory(docs)
    except OSError as exc:
        raise ReportgenError(f"Cannot read the docs folder '{docs}'.",
                             received=f"{exc.strerror}: {exc.filename}",
                             fix="check its permissions") from None
    foreign = foreign_files(docs, files)
    if foreign:
        raise ReportgenError(f"'{docs}' holds {len(foreign)} file(s) a MkDocs build does not "
                             f"write: {shown(foreign)}.",
                             expected="only pages, styles, scripts, images, fonts, sitemaps "
                                      "and the search index, no dot-files or links",
                             fix="remove them from the folder (or run `mkdocs build` into an "
                                 "empty folder) before publishing it")
    return docs.resolve(), files


def described(docs: Path, files: list[str]) -> str:
    """'42 files: 404.html, assets/, index.html, search/ and 3 more' for the console."""
    top = sorted({name.split("/", 1)[0] + ("/" if "/" in name else "") for name in files})
    return f"{len(files):,} files: {shown(top, limit=6)}"
