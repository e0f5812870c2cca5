"""Whether a site folder already shows what a build would make (README: "A second identical
build computes nothing, and skips MkDocs when no page changed").

The pages are a function of the site data, the input images, the figure files, the templates
(bundled and the user's), the page-rendering code and the versions of MkDocs and its theme.
`site_digest` hashes all of that without rendering anything, by content only (never a path of
the cache or the working folder, an inode or a time, so identical pages built from two caches
get the same digest): the site data as JSON (each figure's store file named by its entry's key
and file name), each input image's pixels, each figure entry of the artifact store by its key
(sha256 over what the figures are drawn from and the drawing code's version: an entry is never
changed in place) and its listing, and the bytes of the templates and of reportgen.pages'
modules. The digest is kept in the site's marker (reportgen.pages.site_files) beside every
file's sha256; when it matches and every file is as written, a build renders nothing, links no
file and leaves the site as it is. A file deleted or edited since is a site to build again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields, is_dataclass
from pathlib import Path

from reportgen import console
from reportgen.pages import site_files
from reportgen.pages.sitedata import RECORDED, FigureFile

FORMAT = 1
_RENDERING = ("mkdocs", "mkdocs-material", "jinja2", "markdown", "pymdown-extensions")


def site_digest(site, assembler, templates_dir: str | Path | None) -> str:
    """The digest of everything the pages of `site` are made from."""
    digest = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        digest.update(f"{label}\0{len(data)}\0".encode())
        digest.update(data)

    add("format", str(FORMAT).encode())
    add("site", json.dumps(site, sort_keys=True, default=_content).encode())
    for path, image in assembler.input_images():
        add(f"input:{path}:{image.shape}:{image.dtype}", image.tobytes())
    add("figures", json.dumps(sorted(assembler.entries.items())).encode())
    add("rendering", json.dumps(_versions(_RENDERING)).encode())
    for label, path in _renderer_files(templates_dir):
        add(label, path.read_bytes())
    return digest.hexdigest()


def _plain(value):
    """A dataclass as the dict of its fields (dataclasses.asdict deep-copies: slower)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in fields(value)
                if f.metadata.get(RECORDED, True)}
    return str(value)


def _content(value):
    """`_plain`, but a figure's store file as its entry's key and name: where the cache is
    does not change the pages."""
    if isinstance(value, FigureFile) and value.source:
        return {**_plain(value), "source": "/".join(Path(value.source).parts[-2:])}
    return _plain(value)


def is_up_to_date(site_dir: str | Path, digest: str) -> bool:
    """Whether `site_dir` is a site built from what `digest` covers with every file as it was
    written; says which files were deleted or changed since, when that is why not."""
    site = Path(site_dir)
    marker = site_files.read_marker(site) or {}
    listed = site_files.listed_files(marker)
    if marker.get("digest") != digest or not listed or "index.html" not in listed:
        return False
    changed = site_files.changed_files(site, listed)
    if changed and all(d is not None for d in listed.values()):
        one = len(changed) == 1
        console.notice(f"{site_dir}/: {len(changed):,} file{'' if one else 's'} reportgen wrote "
                       f"{'was' if one else 'were'} deleted or changed since it was built "
                       f"({site_files.shown(changed)}); building it again.")
    return not changed


def marker_entries(digest: str, models: dict | None = None) -> dict:
    """What the built site's marker records: the digest (see `is_up_to_date`) and the record
    of its models (reportgen.commands.site_models.record), which the next build keeps."""
    return {"digest": digest, **({"models": models} if models is not None else {})}


def _renderer_files(templates_dir) -> list[tuple[str, Path]]:
    """(label, path) of the user's templates, the bundled ones, and the code of reportgen.pages,
    of reportgen.results (the findings and references the pages write out) and of the
    techniques' numbers modules (reportgen/techniques/<name>/numbers.py: summary keys and labels
    the pages read too)."""
    import reportgen.pages
    import reportgen.results
    import reportgen.techniques
    from reportgen.pages.environment import default_templates_dir

    found = []
    roots = [("user", templates_dir)] if templates_dir is not None else []
    roots += [("bundled", default_templates_dir()),
              ("code", Path(reportgen.pages.__file__).parent),
              ("results", Path(reportgen.results.__file__).parent),
              ("numbers", Path(reportgen.techniques.__file__).parent),
              # a family's own techniques (reportgen/families/<family>/<technique>/numbers.py)
              ("family-numbers", Path(reportgen.techniques.__file__).parents[1] / "families")]
    for label, root in roots:
        root = Path(root)
        files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        if label in ("code", "results"):
            files = [p for p in files if p.suffix == ".py"]
        elif label in ("numbers", "family-numbers"):
            files = [p for p in files if p.name == "numbers.py"]
        found += [(f"{label}:{p.relative_to(root).as_posix()}", p) for p in files]
    return found


def _versions(packages) -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in packages:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out
