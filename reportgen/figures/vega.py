"""Charts drawn from Vega-Lite specs (Satyanarayan et al. 2017, "Vega-Lite: A Grammar of
Interactive Graphics"): one spec per chart, shown live on the site by vega-embed and turned
into the paper's PNG, SVG and PDF by vl-convert (the same Vega release in both places).

- `paper_files`: the PNG (drawn at PIXEL_RATIO times its layout size), SVG and PDF of a spec,
  deterministic (the PDF's objects renumbered in one order; vl-convert writes its fonts in an
  order that changes from run to run);
- `embed_bundle`: vega, vega-lite and vega-embed as one classic script for the site (no
  network, works from file://), made by vl-convert from the copies it ships and kept in the
  user's cache folder (bundling takes seconds, once per vl-convert version).

Sizes: Vega lays out in pixels; the supplement prints LINE_WIDTH_PX layout pixels across
\\linewidth (reportgen.commands.captions_tex), so a chart at most that wide prints a label of
FONT_PX pixels at 0.72 * FONT_PX pt (7.2 pt for 10 px).
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path

from reportgen.figures.encode import PIXEL_RATIO, palette_png
from reportgen.figures.figure import Figure

FONT_PX = 10          # the smallest text of a chart (tick and legend labels)
TITLE_PX = 12
# the shared look: tick, legend and axis labels never under FONT_PX
CONFIG = {"font": "Liberation Sans, DejaVu Sans, Arial, sans-serif",
          "axis": {"labelFontSize": FONT_PX, "titleFontSize": 11, "titleFontWeight": "normal",
                   "gridColor": "#e5e5e5"},
          "legend": {"labelFontSize": FONT_PX, "titleFontSize": FONT_PX, "orient": "bottom",
                     "direction": "horizontal", "columns": 2, "labelLimit": 400},
          "title": {"fontSize": TITLE_PX, "anchor": "start", "fontWeight": "normal"},
          "view": {"stroke": None}, "background": "white"}


def render_svg(spec: dict) -> str:
    import vl_convert

    return canonical_svg(vl_convert.vegalite_to_svg(spec))


def canonical_svg(svg: str) -> str:
    """The SVG with its element ids numbered from 1 in order of appearance: Vega numbers clip
    paths and gradients by a counter that runs for the whole process (`clip625` after many
    charts), so equal drawings would otherwise differ by how many charts came before."""
    import re

    ids: dict[str, str] = {}
    for name in re.findall(r'\bid="([A-Za-z_-]+\d+)"', svg):
        if name not in ids:
            ids[name] = name.rstrip("0123456789") + str(len(ids) + 1)
    if not ids:
        return svg
    pattern = re.compile(r'(id="|url\(#|href="#)(' + "|".join(map(re.escape, ids)) + r')\b')
    return pattern.sub(lambda m: m.group(1) + ids[m.group(2)], svg)


def paper_files(spec: dict, stem: str, caption: str) -> list[Figure]:
    """PNG, SVG and PDF files of one Vega-Lite spec, with the layout size of its SVG."""
    import vl_convert

    svg = render_svg(spec)
    width, height = svg_size(svg)
    png = palette_png(vl_convert.vegalite_to_png(spec, scale=PIXEL_RATIO))
    pdf = canonical_pdf(vl_convert.vegalite_to_pdf(spec))
    return [Figure(f"{stem}.png", png, "png", caption, width, height),
            Figure(f"{stem}.svg", svg.encode("utf-8"), "svg", caption, width, height),
            Figure(f"{stem}.pdf", pdf, "pdf", caption, width, height)]


def svg_size(svg: str) -> tuple[int, int]:
    """The width and height attributes of an SVG's root element, in pixels."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(svg)
    return (round(float(root.get("width", "0").removesuffix("px"))),
            round(float(root.get("height", "0").removesuffix("px"))))


def canonical_pdf(data: bytes) -> bytes:
    """The same one-page PDF with its objects in one fixed order and a content-derived /ID:
    equal drawings give equal bytes."""
    import pikepdf

    with pikepdf.open(io.BytesIO(data)) as source, pikepdf.new() as out:
        out.pages.append(source.pages[0])
        buffer = io.BytesIO()
        out.save(buffer, deterministic_id=True, linearize=True)
    return buffer.getvalue()


# --------------------------------------------------------------------------------------------
# The site's script


def bundle_version() -> str:
    """Which Vega, Vega-Lite and vega-embed the bundle holds."""
    import vl_convert

    return (f"vega {vl_convert.get_vega_version()}, vega-lite "
            f"{vl_convert.get_vegalite_versions()[-1]}, vega-embed "
            f"{vl_convert.get_vega_embed_version()}")


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "reportgen"


def embed_bundle() -> str:
    """vega-embed with Vega and Vega-Lite as one classic script that sets window.vegaEmbed
    (wrapped in a function: the bundle declares top-level constants a page's other scripts must
    not see)."""
    import hashlib

    import vl_convert

    version = bundle_version()
    name = f"vega-embed-{hashlib.sha256(version.encode()).hexdigest()[:16]}.js"
    cached = _cache_dir() / name
    try:
        return cached.read_text("utf-8")
    except OSError:
        pass
    text = (f"/* {version}, bundled by vl-convert (BSD-3-Clause) */\n(function () {{\n"
            f"{vl_convert.javascript_bundle()}\n}})();\n")
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=cached.parent,
                                         delete=False, suffix=".tmp") as tmp:
            tmp.write(text)
        os.replace(tmp.name, cached)
    except OSError:
        pass                       # a read-only home: bundled again next time
    return text
