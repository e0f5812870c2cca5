"""The templates: where they are, the Jinja2 environment (autoescape, filters) and the assets
copied into every site. A user's `--templates DIR` overrides any of them by file name.

Panels: `templates/panels/<technique>.j2` when it exists, else `templates/panels/_default.j2`
(the include in `pages/_macros.j2`), so a technique needs a template of its own only when the
default card does not fit.
"""

from __future__ import annotations

import math
from pathlib import Path

from reportgen.errors import ReportgenError

ASSET_FILES = ("reportgen.js", "reportgen.css", "file-search.js", "live-decoder.js",
               "smoothing.js", "charts.js", "sort-table.js", "live-training.js",
               "draw-panel.js", "pose-space.js")
ASSETS_URL = "assets/reportgen"          # inside docs/ (kept apart from the theme's assets/)
# scripts reportgen did not write (vega-embed with Vega and Vega-Lite, reportgen.figures.vega)
VEGA_BUNDLE = "assets/vendor/vega-embed.js"


def default_templates_dir() -> Path:
    """The templates shipped with reportgen (`templates/` next to the package)."""
    path = Path(__file__).resolve().parents[2] / "templates"
    if not (path / "pages" / "home.md.j2").is_file():
        raise ReportgenError("reportgen's default templates folder is missing.",
                             expected=str(path),
                             fix="install reportgen from a source checkout (pip install -e .)")
    return path


def make_environment(templates_dir: Path | str | None = None):
    """A Jinja2 environment: autoescape on, a user's folder first, then the default templates."""
    import jinja2

    loaders = []
    if templates_dir is not None:
        user = Path(templates_dir)
        if not user.is_dir():
            raise ReportgenError("The templates folder does not exist.",
                                 expected="a folder holding pages/*.md.j2, panels/*.j2 or "
                                          "assets/* files to override",
                                 received=str(user), fix="check the --templates path")
        loaders.append(jinja2.FileSystemLoader(str(user)))
    loaders.append(jinja2.FileSystemLoader(str(default_templates_dir())))
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        autoescape=True,                 # pages are HTML inside Markdown: escape everything
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        # compiled templates keyed by their source's checksum: warm builds skip compiling
        bytecode_cache=jinja2.FileSystemBytecodeCache(),
    )
    env.filters["pct"] = pct
    env.filters["thousands"] = lambda n: f"{n:,}" if isinstance(n, int) else "—"
    return env


def pct(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{100 * value:.{digits}f}%"


def asset_source(name: str, templates_dir: Path | None) -> Path:
    """A user's assets/NAME wins over the default one."""
    if templates_dir is not None and (Path(templates_dir) / "assets" / name).is_file():
        return Path(templates_dir) / "assets" / name
    return default_templates_dir() / "assets" / name
