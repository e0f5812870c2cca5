"""The MkDocs project around the pages: `mkdocs.yml`, the fallback theme's overrides, writing the
docs folder (only files that changed; stale ones removed) and `build_site`, which runs MkDocs
in-process.

What the configuration guarantees (README, "The site"): the site opens from file://, from a
local server and from GitHub Pages (`use_directory_urls: false`, relative links only) and no
request leaves the machine (Material with `font: false` and no generator link; highlight.js off
in the fallback theme). MkDocs search works over HTTP; from file:// Material's search worker
cannot start, so a small shim of ours (`assets/reportgen/file-search.js`) runs the worker script
in a hidden iframe and `build_site` writes `search/search_index.js` (what the shim loads). With
the fallback "mkdocs" theme, search is hidden on file://.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from markupsafe import escape

from reportgen.errors import ReportgenError
from reportgen.pages import not_found_page
from reportgen.pages.environment import ASSETS_URL

MANIFEST = ".reportgen-pages.json"       # files written last time (dotfiles are not published)
SITE_SCRIPT = f"{ASSETS_URL}/site-data.js"   # the page table for reportgen.js (page_table.py)
THEMES = ("material", "mkdocs")


def theme_available(name: str) -> bool:
    if name == "mkdocs":
        return True
    try:
        from mkdocs.utils import get_theme_names

        return name in get_theme_names()
    except Exception:  # pragma: no cover - a broken theme install counts as absent
        return False


def choose_theme(theme: str | None) -> str:
    """"material" when installed (or asked for), else the built-in "mkdocs"."""
    if theme is None:
        return "material" if theme_available("material") else "mkdocs"
    if theme not in THEMES or not theme_available(theme):
        raise ReportgenError(f"Theme '{theme}' is not available.",
                             expected="'material' (mkdocs-material installed) or 'mkdocs'",
                             received=theme)
    return theme


def mkdocs_config(title: str, docs_dir: Path, project_dir: Path, nav: list, theme: str) -> dict:
    assets = {name: f"{ASSETS_URL}/{name}" for name in
              ("reportgen.js", "reportgen.css", "file-search.js")}
    config: dict = {
        "site_name": str(escape(title)),     # theme templates do not escape it
        "docs_dir": _relative_or_absolute(docs_dir, project_dir),
        "use_directory_urls": False,         # file:// needs real .html links
        "plugins": ["search"],
        "extra_css": [assets["reportgen.css"]],
        # the page table first: reportgen.js reads it when it runs
        "extra_javascript": [SITE_SCRIPT, assets["reportgen.js"]],
        "nav": nav,
        "validation": {"nav": {"omitted_files": "info"}, "links": {"unrecognized_links": "info"}},
    }
    if theme == "material":
        config["theme"] = {
            "name": "material",
            "font": False,                   # no Google Fonts: every request stays local
            "features": ["navigation.sections", "navigation.top"],
            "palette": {"scheme": "default", "primary": "indigo", "accent": "indigo"},
        }
        # generator: no "Made with Material" link; polyfills: loaded before Material's bundle
        config["extra"] = {"generator": False, "polyfills": [assets["file-search.js"]]}
    else:
        config["theme"] = {"name": "mkdocs", "highlightjs": False,   # hljs comes from a CDN
                           "custom_dir": "theme-overrides", "navigation_depth": 3}
        # the search shim before search/main.js
        config["extra_javascript"] = [assets["file-search.js"], SITE_SCRIPT,
                                      assets["reportgen.js"]]
    return config


def _relative_or_absolute(path: Path, start: Path) -> str:
    try:
        return path.resolve().relative_to(start.resolve()).as_posix()
    except ValueError:
        return str(path.resolve())


def write_project(env, project_dir: Path, config: dict, theme: str) -> Path:
    """mkdocs.yml (and, for the fallback theme, its overrides) in `project_dir`."""
    import yaml

    if theme == "mkdocs":
        overrides = project_dir / "theme-overrides"
        overrides.mkdir(exist_ok=True)
        for name in ("main.html", "404.html"):   # copied as they are: MkDocs renders them
            template = env.loader.get_source(env, f"theme/mkdocs/{name}")[0]
            write_if_changed(overrides / name, template)
    config_path = project_dir / "mkdocs.yml"
    text = ("# Written by reportgen (reportgen.pages.render); edits are overwritten.\n"
            + yaml.safe_dump(config, sort_keys=False, allow_unicode=True, width=100))
    write_if_changed(config_path, text)
    return config_path


def write_if_changed(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    if not path.is_file() or path.read_bytes() != data:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)


def write_files(docs_dir: Path, files: dict[str, str]) -> None:
    """Write `files` (docs-relative path -> text) and remove those an earlier render wrote that
    are no longer produced (listed in the manifest; nothing else in docs/ is touched)."""
    manifest = docs_dir / MANIFEST
    try:
        previous = set(json.loads(manifest.read_text("utf-8")))
    except (OSError, ValueError):
        previous = set()
    for rel, text in files.items():
        write_if_changed(docs_dir / rel, text)
    for rel in sorted(previous - set(files)):
        stale = docs_dir / rel
        if stale.is_file():
            stale.unlink()
            try:                              # drop now-empty model folders
                stale.parent.rmdir()
            except OSError:
                pass
    write_if_changed(manifest, json.dumps(sorted(files), indent=0) + "\n")


def _drop_unused_theme_files(staging: Path, config) -> None:
    """Remove what the theme ships that no page of ours loads (2.3 MB of a site): source maps
    of its minified code (for debugging the theme) and, when search is English only, lunr's
    other languages (Thai and Japanese word segmenters among them)."""
    assets = staging / "assets"
    for path in assets.rglob("*.map") if assets.is_dir() else ():
        path.unlink()
    search = next((p for name, p in config.plugins.items() if name.endswith("search")), None)
    langs = list(getattr(search, "config", {}).get("lang") or ["en"]) if search else []
    lunr = assets / "javascripts" / "lunr"
    if config.theme.name == "material" and langs == ["en"] and lunr.is_dir():
        shutil.rmtree(lunr)


def build_site(project_dir: Path, site_dir: Path, *, strict: bool = False,
               marker: dict | None = None) -> Path:
    """Run MkDocs' build in-process: `project_dir/mkdocs.yml` -> `site_dir`, replaced.

    MkDocs writes into a private staging folder beside `site_dir`, which is swapped in only
    once complete (reportgen.pages.site_output): a failed build leaves the previous site as it
    was. `site_dir` must be absent, empty or a site reportgen made holding only its own files;
    the new site holds the marker saying so (every file with its sha256), with `marker`'s
    entries. Afterwards writes `search/search_index.js` (the
    index as a script) so Material's search also works from file://. Returns `site_dir`.
    """
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import MkDocsException

    from reportgen.os_errors import said_in_one_line
    from reportgen.pages import linked_figures
    from reportgen.pages.site_output import staged_site
    from reportgen.pages.site_space import check_room, site_bytes

    project_dir, site_dir = Path(project_dir), Path(site_dir)
    config_file = project_dir / "mkdocs.yml"
    if not config_file.is_file():
        raise ReportgenError("No mkdocs.yml to build.", expected=str(config_file),
                             fix="call render_site() first (`reportgen build` does both)")
    with staged_site(site_dir, marker) as staging:
        try:
            config = load_config(config_file=str(config_file), site_dir=str(staging),
                                 strict=strict)
            needed = site_bytes(Path(config.docs_dir), config.theme.dirs, site_dir.parent)
            check_room(site_dir, needed)
            linked_figures.register(config)     # figure files linked, not copied
            with said_in_one_line(needed, fix="free space on that disk, or choose a "
                                              "--site-dir on another disk"):
                build(config)
        except MkDocsException as exc:
            raise ReportgenError("MkDocs could not build the site.", received=str(exc),
                                 fix="check the templates (a --templates override?) and "
                                     f"{config_file}") from exc
        _drop_unused_theme_files(staging, config)
        not_found_page.make_relative(staging)
        index = staging / "search" / "search_index.json"
        if index.is_file() and config.theme.name == "material":
            data = index.read_text("utf-8")
            write_if_changed(staging / "search" / "search_index.js", f"var __index = {data}\n")
    return site_dir
