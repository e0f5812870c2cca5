"""Names on the site: model slugs, panel anchors, step file names, relative URLs and the pixel
size of an image (read from its PNG header)."""

from __future__ import annotations

import hashlib
import re
import struct
from pathlib import Path
from urllib.parse import quote

from reportgen.pages.sitedata import Panel


def model_slug(name: str) -> str:
    """A file-name and URL safe folder name for a model (hash-suffixed when characters change)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
    if slug != name or not slug:
        slug = f"{slug or 'model'}-{hashlib.sha1(name.encode()).hexdigest()[:6]}"
    return slug


def unique_slugs(names) -> dict[str, str]:
    """{model name: slug}, distinct even on case-insensitive file systems."""
    slugs: dict[str, str] = {}
    seen: set[str] = set()
    for name in names:
        slug = model_slug(name)
        while slug.lower() in seen:
            slug = f"{slug}-{hashlib.sha1(slug.encode()).hexdigest()[:4]}"
        seen.add(slug.lower())
        slugs[name] = slug
    return slugs


def slug_part(text: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "-", text.lower()).strip("-")


def file_part(text: str) -> str:
    """A file-name safe version of a step name (they are "EPOCH-BATCH": unchanged)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip(".") or "step"


def panel_id(panel: Panel) -> str:
    """The panel's URL anchor: the technique name, plus the variant when there is one."""
    if not panel.variant:
        return panel.technique
    return f"{panel.technique}-{slug_part(panel.variant) or 'variant'}"


def url(path: str) -> str:
    """A docs-relative file path as a relative URL (every unsafe character percent-encoded)."""
    return quote(path.replace("\\", "/"), safe="/")


def step_key(step: str) -> tuple:
    """Sort key for "EPOCH-BATCH" names (non-numeric names sort last, by name)."""
    match = re.fullmatch(r"(\d+)-(\d+)", step)
    return (0, int(match[1]), int(match[2]), "") if match else (1, 0, 0, step)


def png_size(path: Path, cache: dict) -> tuple[int, int]:
    """(width, height) of a PNG from its header; (0, 0) when unknown."""
    key = str(path)
    if key not in cache:
        size = (0, 0)
        try:
            with open(path, "rb") as fh:
                head = fh.read(24)
            if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR":
                size = struct.unpack(">II", head[16:24])
        except OSError:
            pass
        cache[key] = size
    return cache[key]
