"""SiteData -> a MkDocs project (mkdocs.yml, docs/*.md, JS/CSS assets, JSON indexes) -> site/.

`render_site` writes the pages from Jinja2 templates (`templates/` at the top of the repository,
overridable file by file with a user's own folder); `build_site` runs MkDocs in-process.

What the site guarantees (SPEC §1, §3, §5):
- it opens from file://, from a local HTTP server and from GitHub Pages (`use_directory_urls:
  false`, only relative links) and no request leaves the machine (Material with `font: false`,
  no generator link, highlight.js off in the fallback theme);
- the step slider and the input picker swap images in place from a per-model index
  (`models/SLUG/data.js`, loaded with a plain <script> tag so it also works from file://, where
  fetch() of local files is blocked; the same data is written as `index.json` for tools);
  without JavaScript a page shows the latest step and the first input;
- dataset-level analyses (issue 5) have a "Quantitative analyses" page per model
  (`models/SLUG/analyses.html`): the chosen step's panels, switched by the slider (a step without
  them says how to get them), and the trends over training; the Compare page adds the panels
  with the models overlaid. Every such figure links its PNG, SVG/PDF, JSON and CSV files;
- the Decoder page's live decoder (issue 6, `panels/live_decoder.j2` + `assets/live-decoder.js`)
  loads, per step, the weights script the `live_decoder` technique exported and the script
  written here by `reportgen.pages.live` (`models/SLUG/live/STEP.js`: class capsules and Python
  reconstructions of every input), both with plain <script> elements (file://-safe); the bytes
  per step are printed with the build summary;
- MkDocs search works over HTTP; from file:// Material's search worker cannot start, so a small
  shim of ours (`assets/reportgen/file-search.js`) runs the worker script in a hidden iframe and
  `build_site` writes `search/search_index.js` (what Material loads on file://). With the
  fallback "mkdocs" theme, search is hidden on file://.

Every user-controlled string (model, class, input and file names, captions) goes through Jinja2's
autoescape; titles handed to MkDocs (whose theme templates do not escape) are escaped here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from markupsafe import Markup, escape

from reportgen import console
from reportgen.errors import ReportgenError
from reportgen.pages import analyses
from reportgen.pages.analyses import PICTURES
from reportgen.pages.live import live_step
from reportgen.pages.live import summary_line as live_summary_line
from reportgen.pages.sitedata import FigureFile, ModelData, Panel, SiteData, StepData

# (Panel.layer, page title, page file stem) for the layer pages, in page order.
LAYER_PAGES = (
    ("conv", "Conv", "conv"),
    ("primary", "PrimaryCaps", "primary-caps"),
    ("class", "ClassCaps", "class-caps"),
    ("decoder", "Decoder", "decoder"),
)
LAYER_TITLES = {"model": "Model", **{layer: title for layer, title, _ in LAYER_PAGES}}
ANALYSES_TITLE, ANALYSES_STEM = "Quantitative analyses", "analyses"

ASSET_FILES = ("reportgen.js", "reportgen.css", "file-search.js", "live-decoder.js")
ASSETS_URL = "assets/reportgen"          # inside docs/ (kept apart from the theme's assets/)
MANIFEST = ".reportgen-pages.json"       # files written last time (dotfiles are not published)
ANALYSES_NOTE = "Not computed at this step (build with --analyses all)."
MIN_DISPLAY = 160                        # images narrower than this are shown upscaled, pixelated
CARD_WIDTHS = (240, 900)                 # a card's preferred width: its image's, within these


# --------------------------------------------------------------------------------------------
# Templates


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
    env.filters["pct"] = _pct
    env.filters["thousands"] = lambda n: f"{n:,}" if isinstance(n, int) else "—"
    return env


def _pct(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{100 * value:.{digits}f}%"


def _asset_source(name: str, templates_dir: Path | None) -> Path:
    """A user's assets/NAME wins over the default one."""
    if templates_dir is not None and (Path(templates_dir) / "assets" / name).is_file():
        return Path(templates_dir) / "assets" / name
    return default_templates_dir() / "assets" / name


# --------------------------------------------------------------------------------------------
# Names, URLs and image sizes


def model_slug(name: str) -> str:
    """A file-name and URL safe folder name for a model (hash-suffixed when characters change)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
    if slug != name or not slug:
        slug = f"{slug or 'model'}-{hashlib.sha1(name.encode()).hexdigest()[:6]}"
    return slug


def _slug_part(text: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "-", text.lower()).strip("-")


def _file_part(text: str) -> str:
    """A file-name safe version of a step name (they are "EPOCH-BATCH": unchanged)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip(".") or "step"


def panel_id(panel: Panel) -> str:
    """The panel's URL anchor: the technique name, plus the variant when there is one."""
    if not panel.variant:
        return panel.technique
    return f"{panel.technique}-{_slug_part(panel.variant) or 'variant'}"


def _url(path: str) -> str:
    """A docs-relative file path as a relative URL (every unsafe character percent-encoded)."""
    return quote(path.replace("\\", "/"), safe="/")


def _image_size(docs_dir: Path, path: str, cache: dict) -> tuple[int, int]:
    """(width, height) of a PNG from its header; (0, 0) when unknown."""
    if path not in cache:
        size = (0, 0)
        try:
            with open(docs_dir / path, "rb") as fh:
                head = fh.read(24)
            if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR":
                size = struct.unpack(">II", head[16:24])
        except OSError:
            pass
        cache[path] = size
    return cache[path]


def _step_key(step: str) -> tuple:
    """Sort key for "EPOCH-BATCH" names (non-numeric names sort last, by name)."""
    match = re.fullmatch(r"(\d+)-(\d+)", step)
    return (0, int(match[1]), int(match[2]), "") if match else (1, 0, 0, step)


# --------------------------------------------------------------------------------------------
# Views: what the templates see (plain dicts and small dataclasses; strings still unescaped)


@dataclass
class Image:
    src: str                 # URL relative to the page
    width: int = 0
    height: int = 0

    @property
    def small(self) -> bool:
        return 0 < self.width < MIN_DISPLAY

    @property
    def basis(self) -> int:
        """Preferred card width (px): the natural width, so images show unscaled when they fit."""
        low, high = CARD_WIDTHS
        return min(max(self.width or low, low), high)


@dataclass
class PanelView:
    id: str
    technique: str
    variant: str
    title: str
    layer: str
    experimental: bool = False
    description: str = ""
    available: bool = False
    caption: str = ""
    image: Image | None = None
    downloads: list[dict] = field(default_factory=list)   # [{kind, href}]
    anchor: str = ""         # HTML id (layer pages only: ids must be unique on a page)
    label: str = ""          # card heading instead of the title (filmstrip: step; compare: model)
    label_href: str = ""
    note: str = ""           # small text beside the heading (compare: the step shown)
    missing_note: str = ""   # what the card says when the chosen step has no result
    # panels of several figures (dataset analyses): the other figures, and the downloads
    # grouped by figure ([{label, links: [{kind, href}]}]; one group = the flat `downloads`)
    extras: list[dict] = field(default_factory=list)       # [{label, image: Image, href}]
    groups: list[dict] = field(default_factory=list)


class _Context:
    """Everything computed once per render: technique metadata, image sizes, slugs."""

    def __init__(self, site: SiteData, docs_dir: Path):
        self.site = site
        self.docs_dir = docs_dir
        self.sizes: dict = {}
        self.techniques = {t["name"]: t for t in site.techniques}
        self.order = {t["name"]: i for i, t in enumerate(site.techniques)}
        self.slugs: dict[str, str] = {}
        seen: set[str] = set()
        for model in site.models:
            slug = model_slug(model.name)
            while slug.lower() in seen:       # case-insensitive file systems
                slug = f"{slug}-{hashlib.sha1(slug.encode()).hexdigest()[:4]}"
            seen.add(slug.lower())
            self.slugs[model.name] = slug

    def image(self, path: str, root: str, width: int = 0, height: int = 0) -> Image:
        if not (width and height):
            width, height = _image_size(self.docs_dir, path, self.sizes)
        return Image(root + _url(path), width, height)

    def figure_record(self, panel: Panel) -> dict:
        """The index entry of one panel (docs-relative URLs; the page's JS adds its root)."""
        figures = []
        for fig in panel.figures:
            width, height = fig.width, fig.height
            if not (width and height) and fig.kind == "png":
                width, height = _image_size(self.docs_dir, fig.path, self.sizes)
            figures.append({"kind": fig.kind, "src": _url(fig.path),
                            "width": width, "height": height,
                            "label": analyses.figure_label(panel, fig)})
        return {"title": panel.title, "caption": panel.caption, "figures": figures}

    def panel_view(self, meta: dict, panel: Panel | None, root: str, **extra) -> PanelView:
        view = PanelView(id=meta["id"], technique=meta["technique"], variant=meta["variant"],
                         title=meta["title"], layer=meta["layer"],
                         experimental=meta["experimental"], description=meta["description"],
                         **extra)
        if panel is not None and panel.figures:
            view.available = True
            view.title = panel.title
            view.caption = panel.caption
            first: FigureFile | None = picture(panel)
            if first is not None:
                view.image = self.image(first.path, root, first.width, first.height)
            view.downloads = [{"kind": f.kind.upper(), "href": root + _url(f.path)}
                              for f in panel.figures]
            grouped = analyses.groups(panel)
            if len(grouped) > 1:
                view.groups = [{"label": "numbers" if not any(f.kind in PICTURES for f in files)
                                else analyses.humane(label) or "figure",
                                "links": [{"kind": f.kind.upper(), "href": root + _url(f.path)}
                                          for f in files]} for label, files in grouped]
            for label, files in grouped:
                shown = _best_picture(files)
                if shown is not None and shown is not first:
                    view.extras.append({
                        "label": analyses.humane(label),
                        "image": self.image(shown.path, root, shown.width, shown.height),
                        "href": root + _url(shown.path)})
        return view


def _best_picture(files: list[FigureFile]) -> FigureFile | None:
    """A group's picture for the page: its PNG, else its first other picture."""
    return next((f for f in files if f.kind == "png"),
                next((f for f in files if f.kind in PICTURES), None))


def picture(panel: Panel) -> FigureFile | None:
    """The figure a card shows: the first one an <img> can display (PNG first), if any."""
    return next((f for f in panel.figures if f.kind in PICTURES), None)


@dataclass
class _ModelInfo:
    """Derived facts about one model: its slug, panel catalogue and which pages it gets."""

    model: ModelData
    slug: str
    panels: list[dict]                       # union over steps and inputs, in page order
    layers: list[tuple[str, str, str]]       # LAYER_PAGES entries that have panels
    default_step: StepData | None
    default_input: str | None
    dataset_panels: list[dict] = field(default_factory=list)   # union over steps, page order

    @property
    def has_analyses(self) -> bool:
        return bool(self.dataset_panels or self.model.trend_panels)

    @property
    def folder(self) -> str:
        return f"models/{self.slug}"

    def panels_of(self, layer: str) -> list[dict]:
        return [p for p in self.panels if p["layer"] == layer]

    @property
    def pictures(self) -> list[dict]:
        """The panels that are images (the filmstrip and compare pickers offer only these)."""
        return [p for p in self.panels if p["picture"]]


def _model_info(ctx: _Context, model: ModelData) -> _ModelInfo:
    catalogue: dict[str, dict] = {}
    for step in model.steps:
        panels = list(step.checkpoint_panels)
        for key in sorted(step.input_panels):
            panels.extend(step.input_panels[key])
        for panel in panels:
            pid = panel_id(panel)
            if pid in catalogue:
                continue
            tech = ctx.techniques.get(panel.technique, {})
            catalogue[pid] = {
                "id": pid, "technique": panel.technique, "variant": panel.variant,
                "title": panel.title, "layer": panel.layer,
                "experimental": bool(panel.experimental or tech.get("experimental", False)),
                "description": tech.get("description", ""),
                "scope": "checkpoint" if panel in step.checkpoint_panels else "input",
                "picture": picture(panel) is not None,
                "_order": (ctx.order.get(panel.technique, len(ctx.order)), len(catalogue)),
            }
    panels = sorted(catalogue.values(), key=lambda p: p["_order"])
    for p in panels:
        del p["_order"]
    used = {p["layer"] for p in panels}
    layers = [entry for entry in LAYER_PAGES if entry[0] in used]
    return _ModelInfo(model=model, slug=ctx.slugs[model.name], panels=panels, layers=layers,
                      default_step=model.steps[-1] if model.steps else None,
                      default_input=model.inputs[0].key if model.inputs else None,
                      dataset_panels=_dataset_catalogue(ctx, model))


def _dataset_catalogue(ctx: _Context, model: ModelData) -> list[dict]:
    """Every dataset-level panel id of a model (union over steps) in technique order."""
    catalogue: dict[str, dict] = {}
    for step in model.steps:
        for panel in step.dataset_panels:
            pid = panel_id(panel)
            if pid not in catalogue:
                tech = ctx.techniques.get(panel.technique, {})
                catalogue[pid] = {
                    "id": pid, "technique": panel.technique, "variant": panel.variant,
                    "title": panel.title, "layer": panel.layer,
                    "experimental": bool(panel.experimental or tech.get("experimental", False)),
                    "description": tech.get("description", ""), "scope": "dataset",
                    "_order": (ctx.order.get(panel.technique, len(ctx.order)), len(catalogue))}
    panels = sorted(catalogue.values(), key=lambda p: p["_order"])
    for p in panels:
        del p["_order"]
    return panels


def _find_panel(step: StepData | None, input_key: str | None, pid: str) -> Panel | None:
    if step is None:
        return None
    for panel in step.input_panels.get(input_key or "", []):
        if panel_id(panel) == pid:
            return panel
    for panel in step.checkpoint_panels:
        if panel_id(panel) == pid:
            return panel
    return None


def _find_dataset_panel(step: StepData | None, pid: str) -> Panel | None:
    if step is None:
        return None
    return next((p for p in step.dataset_panels if panel_id(p) == pid), None)


# --------------------------------------------------------------------------------------------
# The per-model index (what the slider and the pickers read)


def model_index(ctx: _Context, info: _ModelInfo, live: dict[str, str] | None = None) -> dict:
    """Every built step x input of one model: panel figures, predictions, accuracy, the
    dataset-level panels of each step, and (`live`: step -> docs-relative path) the live
    decoder's per-step script.

    Paths are docs-relative and URL-encoded; a page prefixes its own root.
    """
    model = info.model
    live = live or {}
    steps = {}
    for step in model.steps:
        steps[step.step] = {
            "accuracy": step.accuracy,
            "checkpoint": {panel_id(p): ctx.figure_record(p)
                           for p in step.checkpoint_panels if p.figures},
            "dataset": {panel_id(p): ctx.figure_record(p)
                        for p in step.dataset_panels if p.figures},
            "inputs": {key: {panel_id(p): ctx.figure_record(p) for p in panels if p.figures}
                       for key, panels in step.input_panels.items()},
            "predictions": {key: {"predicted": pred.predicted,
                                  "confidence": round(float(pred.confidence), 4),
                                  "correct": pred.correct}
                            for key, pred in step.predictions.items()},
        }
        if step.step in live:
            steps[step.step]["live"] = _url(live[step.step])
    inputs = []
    for inp in model.inputs:
        width, height = _image_size(ctx.docs_dir, inp.image, ctx.sizes)
        inputs.append({"key": inp.key, "label": inp.label, "true_class": inp.true_class,
                       "image": {"src": _url(inp.image), "width": width, "height": height}})
    return {
        "name": model.name,
        "slug": info.slug,
        "page": f"{info.folder}/index.html",
        "class_names": list(model.class_names),
        "step_names": [s.step for s in model.steps],
        "inputs": inputs,
        "panels": [{k: p[k] for k in ("id", "technique", "variant", "title", "layer",
                                      "experimental", "scope", "picture")} for p in info.panels],
        "dataset_panels": [{k: p[k] for k in ("id", "technique", "variant", "title")}
                           for p in info.dataset_panels],
        "steps": steps,
    }


def _index_js(index: dict) -> str:
    """The index as a script that registers itself (works from file://, unlike fetch())."""
    body = json.dumps(index, ensure_ascii=False, separators=(",", ":"))
    # JSON is valid JavaScript; keep "</script" and U+2028/9 out of the file for old parsers.
    body = body.replace("</", "<\\/").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return ("window.reportgenData = window.reportgenData || {};\n"
            f"window.reportgenData[{json.dumps(index['slug'])}] = {body};\n")


# --------------------------------------------------------------------------------------------
# Training curves (inline SVG drawn here: no JS chart library, deterministic bytes)

CURVE_SERIES = {
    "loss": (("loss", "total loss", "#3f51b5"), ("margin_loss", "margin loss", "#e65100"),
             ("reconstruction_loss", "reconstruction loss", "#2e7d32")),
    "accuracy": (("val_accuracy", "validation accuracy", "#c2185b"),
                 ("train_accuracy", "train accuracy (running)", "#757575")),
}


def _nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks, value = [], start
    while value <= hi + step * 0.5:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _fmt(value: float) -> str:
    text = f"{value:.4g}"
    return text if "e" not in text else f"{value:.1e}"


def training_curves_svg(history: list[dict], kind: str, selected_step: str | None = None,
                        width: int = 560, height: int = 260) -> Markup:
    """One chart ("loss" or "accuracy") of ModelData.history as an inline SVG.

    x = images seen when the history records it, else the record's position; one polyline per
    series, a dot per saved step (hover: step and value), a vertical marker on the chosen step
    (moved by the slider through `data-x`).
    """
    series = [(key, label, colour) for key, label, colour in CURVE_SERIES[kind]
              if any(isinstance(r.get(key), (int, float)) for r in history)]
    if not history or not series:
        return Markup("")
    left, right, top, bottom = 56, 12, 14, 58
    plot_w, plot_h = width - left - right, height - top - bottom
    use_seen = all(isinstance(r.get("images_seen"), (int, float)) for r in history)
    xs_raw = [float(r["images_seen"]) if use_seen else float(i) for i, r in enumerate(history)]
    x_lo, x_hi = min(xs_raw), max(xs_raw)
    x_span = (x_hi - x_lo) or 1.0
    values = [float(r[k]) for r in history for k, _, _ in series
              if isinstance(r.get(k), (int, float)) and math.isfinite(float(r[k]))]
    if kind == "accuracy":
        y_lo, y_hi = min(values + [1.0]), 1.0
        y_lo = max(0.0, math.floor(y_lo * 10) / 10)
        ticks = _nice_ticks(y_lo, y_hi, 5)
    else:
        ticks = _nice_ticks(0.0, max(values) if values else 1.0, 5)
    y_lo, y_hi = ticks[0], ticks[-1]
    y_span = (y_hi - y_lo) or 1.0

    def px(x: float) -> float:
        return round(left + (x - x_lo) / x_span * plot_w, 2)

    def py(y: float) -> float:
        return round(top + (1 - (y - y_lo) / y_span) * plot_h, 2)

    xs = {str(r.get("step", i)): px(x) for i, (r, x) in enumerate(zip(history, xs_raw))}
    out = [f'<svg class="rg-chart" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img" xmlns="http://www.w3.org/2000/svg">',
           f"<title>{escape('Loss' if kind == 'loss' else 'Accuracy')} over training steps"
           "</title>"]
    for tick in ticks:
        y = py(tick)
        label = f"{tick:.0%}" if kind == "accuracy" else _fmt(tick)
        out.append(f'<line class="rg-gridline" x1="{left}" x2="{left + plot_w}" y1="{y}" y2="{y}"/>')
        out.append(f'<text class="rg-tick" x="{left - 6}" y="{y + 4}" '
                   f'text-anchor="end">{escape(label)}</text>')
    # x ticks: at most ~8 step labels, always the first and the last
    n = len(history)
    every = max(1, math.ceil(n / 8))
    shown = sorted(set(range(0, n, every)) | {n - 1})
    for i in shown:
        x = px(xs_raw[i])
        out.append(f'<line class="rg-axis" x1="{x}" x2="{x}" y1="{top + plot_h}" '
                   f'y2="{top + plot_h + 4}"/>')
        out.append(f'<text class="rg-tick" x="{x}" y="{top + plot_h + 16}" '
                   f'text-anchor="middle">{escape(str(history[i].get("step", i)))}</text>')
    out.append(f'<line class="rg-axis" x1="{left}" x2="{left + plot_w}" y1="{top + plot_h}" '
               f'y2="{top + plot_h}"/>')
    out.append(f'<line class="rg-axis" x1="{left}" x2="{left}" y1="{top}" '
               f'y2="{top + plot_h}"/>')
    out.append(f'<text class="rg-axis-label" x="{left + plot_w / 2}" y="{top + plot_h + 32}" '
               f'text-anchor="middle">training step (EPOCH-BATCH)'
               f'{", spaced by images seen" if use_seen else ""}</text>')
    marker_x = xs.get(selected_step or "", xs[list(xs)[-1]])
    out.append(f'<line class="rg-step-marker" data-rg-marker="" x1="{marker_x}" '
               f'x2="{marker_x}" y1="{top}" y2="{top + plot_h}" '
               f"data-x='{escape(json.dumps(xs))}'/>")
    legend_x = left
    for key, label, colour in series:
        points = [(px(x), py(float(r[key]))) for r, x in zip(history, xs_raw)
                  if isinstance(r.get(key), (int, float)) and math.isfinite(float(r[key]))]
        if not points:
            continue
        coords = " ".join(f"{x},{y}" for x, y in points)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
                   f'points="{coords}"/>')
        for r, x in zip(history, xs_raw):
            value = r.get(key)
            if isinstance(value, (int, float)) and math.isfinite(float(value)):
                shown_value = f"{value:.2%}" if kind == "accuracy" else _fmt(float(value))
                out.append(f'<circle cx="{px(x)}" cy="{py(float(value))}" r="3" '
                           f'fill="{colour}"><title>{escape(label)} at step '
                           f'{escape(str(r.get("step", "")))}: {escape(shown_value)}'
                           "</title></circle>")
        y = height - 10
        out.append(f'<rect x="{legend_x}" y="{y - 8}" width="14" height="4" '
                   f'fill="{colour}"/>')
        out.append(f'<text class="rg-legend" x="{legend_x + 18}" y="{y - 3}">'
                   f"{escape(label)}</text>")
        legend_x += 34 + 7 * len(label)
    out.append("</svg>")
    return Markup("\n".join(out))


# --------------------------------------------------------------------------------------------
# Confusion matrix view


def _confusion_view(step: StepData, class_names: list[str]) -> dict | None:
    """Rows with per-cell shading (fraction of the true class), plus per-class accuracy."""
    matrix = step.confusion_matrix
    if not matrix:
        return None
    per_class = step.per_class_accuracy or []
    rows = []
    for i, row in enumerate(matrix):
        total = sum(row) or 1
        cells = []
        for j, count in enumerate(row):
            share = count / total
            hue = "33, 150, 243" if i == j else "229, 57, 53"
            alpha = round(0.08 + 0.85 * share, 3) if count else 0
            cells.append({"count": count, "share": share, "diagonal": i == j,
                          "style": f"background-color: rgba({hue}, {alpha})" if count else "",
                          "dark": share > 0.55})
        acc = per_class[i] if i < len(per_class) else (row[i] / total if i < len(row) else None)
        rows.append({"name": class_names[i] if i < len(class_names) else str(i),
                     "cells": cells, "total": sum(row), "accuracy": acc,
                     "bar": round(100 * acc, 1) if acc is not None else 0})
    return {"rows": rows, "images": sum(sum(r) for r in matrix),
            "columns": [class_names[j] if j < len(class_names) else str(j)
                        for j in range(len(matrix[0]) if matrix else 0)]}


# --------------------------------------------------------------------------------------------
# Pages


def _selection_state(info: _ModelInfo) -> dict:
    return {"step": info.default_step.step if info.default_step else "",
            "input": info.default_input or ""}


def _input_view(ctx: _Context, info: _ModelInfo, root: str, key: str | None) -> dict | None:
    inp = next((i for i in info.model.inputs if i.key == key), None)
    if inp is None:
        return None
    pred = info.default_step.predictions.get(inp.key) if info.default_step else None
    return {"key": inp.key, "label": inp.label, "true_class": inp.true_class,
            "image": ctx.image(inp.image, root), "prediction": pred}


def _pages_for_model(ctx: _Context, info: _ModelInfo) -> dict[str, str]:
    """{docs-relative .md path: nav title} of one model, in nav order."""
    pages = {f"{info.folder}/index.md": "Overview"}
    for layer, title, stem in info.layers:
        pages[f"{info.folder}/{stem}.md"] = title
    if info.has_analyses:
        pages[f"{info.folder}/{ANALYSES_STEM}.md"] = ANALYSES_TITLE
    if info.pictures:
        pages[f"{info.folder}/filmstrip.md"] = "Training filmstrip"
    return pages


def _model_links(info: _ModelInfo, root: str) -> list[dict]:
    links = [{"title": title, "href": f"{root}{_url(info.folder)}/{stem}.html", "layer": layer}
             for layer, title, stem in info.layers]
    if info.has_analyses:
        links.append({"title": ANALYSES_TITLE, "layer": "analyses",
                      "href": f"{root}{_url(info.folder)}/{ANALYSES_STEM}.html"})
    if info.pictures:
        links.append({"title": "Filmstrip", "href": f"{root}{_url(info.folder)}/filmstrip.html",
                      "layer": "filmstrip"})
    return links


def _common(site: SiteData, root: str, kind: str) -> dict:
    return {"site": site, "root": root, "page_kind": kind, "assets": root + ASSETS_URL,
            "layer_titles": LAYER_TITLES}


def _model_view(ctx: _Context, info: _ModelInfo, root: str) -> dict:
    model = info.model
    steps = [s.step for s in model.steps]
    return {"name": model.name, "slug": info.slug, "data": model, "steps": steps,
            "inputs": model.inputs, "state": _selection_state(info),
            "data_js": f"{root}{_url(info.folder)}/data.js",
            "overview": f"{root}{_url(info.folder)}/index.html",
            "links": _model_links(info, root),
            "latest_step": steps[-1] if steps else None}


def _render_home(env, ctx: _Context, infos: list[_ModelInfo]) -> str:
    root = ""
    rows = []
    for info in infos:
        model = info.model
        rows.append({"model": _model_view(ctx, info, root), "data": model,
                     "n_steps": len(model.steps),
                     "latest_step": model.steps[-1].step if model.steps else None})
    return env.get_template("pages/home.md.j2").render(
        **_common(ctx.site, root, "home"), rows=rows,
        compare_href="compare.html" if any(i.pictures for i in infos)
        or ctx.site.compare_panels else None)


def _render_model(env, ctx: _Context, info: _ModelInfo) -> str:
    root = "../../"
    model = info.model
    default = info.default_step
    steps = []
    for step in model.steps:
        steps.append({"step": step.step, "accuracy": step.accuracy,
                      "confusion": _confusion_view(step, model.class_names),
                      "default": step is default})
    gallery = []
    for inp in model.inputs:
        pred = default.predictions.get(inp.key) if default else None
        gallery.append({"key": inp.key, "label": inp.label, "true_class": inp.true_class,
                        "image": ctx.image(inp.image, root), "prediction": pred})
    selected = default.step if default else None
    curves = [c for c in (training_curves_svg(model.history, "loss", selected),
                          training_curves_svg(model.history, "accuracy", selected)) if c]
    return env.get_template("pages/model.md.j2").render(
        **_common(ctx.site, root, "model"), model=_model_view(ctx, info, root),
        architecture=model.architecture, step_views=steps, gallery=gallery, curves=curves,
        history=model.history)


def _render_layer(env, ctx: _Context, info: _ModelInfo, layer: str, title: str) -> str:
    root = "../../"
    step, key = info.default_step, info.default_input

    def views(metas):
        return [ctx.panel_view(m, _find_panel(step, key, m["id"]), root, anchor=m["id"])
                for m in metas]

    return env.get_template("pages/layer.md.j2").render(
        **_common(ctx.site, root, "layer"), model=_model_view(ctx, info, root),
        layer=layer, layer_title=title, input=_input_view(ctx, info, root, key),
        model_panels=views(info.panels_of("model")), panels=views(info.panels_of(layer)))


def _card_min(views: list[PanelView]) -> int:
    """Minimum card width (px) on the filmstrip / compare grids: the image's own width, so
    images are shown at their natural size when the screen allows, within 240 ... 480 px
    (two cards side by side on a laptop screen)."""
    width = next((v.image.width for v in views if v.image and v.image.width), 0)
    return min(max(width, 240), 480)


def _render_filmstrip(env, ctx: _Context, info: _ModelInfo) -> str:
    root = "../../"
    key = info.default_input
    # Default technique: the first layer-dependent one (the model-level ones are on every page).
    choices = info.pictures
    choice = next((p for p in choices if p["layer"] != "model"), choices[0])
    cards = [ctx.panel_view(choice, _find_panel(step, key, choice["id"]), root, label=step.step)
             for step in info.model.steps]
    return env.get_template("pages/filmstrip.md.j2").render(
        **_common(ctx.site, root, "filmstrip"), model=_model_view(ctx, info, root),
        choices=choices, choice=choice, cards=cards, card_min=_card_min(cards),
        input=_input_view(ctx, info, root, key))


def _render_compare(env, ctx: _Context, infos: list[_ModelInfo], files: dict[str, str]) -> str:
    """The Compare page; the numbers behind the overlaid plots go into `files`."""
    root = ""
    choices: dict[str, dict] = {}
    inputs: dict[str, str] = {}
    for info in infos:
        for meta in info.pictures:
            choices.setdefault(meta["id"], meta)
        for inp in info.model.inputs:
            inputs.setdefault(inp.key, inp.label)
    ordered = sorted(choices.values(), key=lambda m: (ctx.order.get(m["technique"], 999),))
    choice = next((m for m in ordered if m["layer"] != "model"), ordered[0] if ordered else None)
    input_key = next(iter(inputs), None)
    cards = []
    for info in infos:
        step = info.default_step
        panel = _find_panel(step, input_key, choice["id"]) if choice else None
        meta = choice or {"id": "", "technique": "", "variant": "", "title": "",
                          "layer": "model", "experimental": False, "description": ""}
        model = _model_view(ctx, info, root)
        view = ctx.panel_view(meta, panel, root, label=info.model.name,
                              label_href=model["overview"],
                              note=f"step {step.step}" if step else "no built step")
        cards.append({"model": model, "panel": view})
    all_steps = sorted({s.step for info in infos for s in info.model.steps}, key=_step_key)
    models = [info.model for info in infos]
    compare = [ctx.panel_view(_derived_meta(ctx, p), _numbered(
                   ctx, p, analyses.compare_sources(models, p), "model", "numbers/compare", files),
                   root, anchor=f"compare-{panel_id(p)}")
               for p in ctx.site.compare_panels]
    return env.get_template("pages/compare_models.md.j2").render(
        **_common(ctx.site, root, "compare"), cards=cards if choice else [], choices=ordered,
        choice=choice, card_min=_card_min([c["panel"] for c in cards]),
        inputs=[{"key": k, "label": v} for k, v in inputs.items()], input_key=input_key,
        steps=all_steps, compare_panels=compare)


def _numbered(ctx: _Context, panel: Panel, sources, axis: str, folder: str,
              files: dict[str, str]) -> Panel:
    """A trend / comparison panel with the numbers it was drawn from (JSON + CSV, written into
    `folder` under the name of its first figure) when it has none of its own."""
    if any(f.kind == "json" for f in panel.figures):
        return panel
    numbers = analyses.derived_numbers(ctx.docs_dir, panel, sources, axis)
    first = picture(panel)
    if numbers is None or first is None:
        return panel
    stem = f"{folder}/{PurePosixPath(first.path).stem}"
    files[f"{stem}.json"], files[f"{stem}.csv"] = numbers
    return dataclasses.replace(panel, figures=[*panel.figures, FigureFile("json", f"{stem}.json"),
                                               FigureFile("csv", f"{stem}.csv")])


def _derived_meta(ctx: _Context, panel: Panel) -> dict:
    """Card metadata of a panel drawn across steps or models (trends, comparisons)."""
    tech = ctx.techniques.get(panel.technique, {})
    return {"id": panel_id(panel), "technique": panel.technique, "variant": panel.variant,
            "title": panel.title, "layer": panel.layer,
            "experimental": bool(panel.experimental or tech.get("experimental", False)),
            "description": tech.get("description", "")}


def _render_analyses(env, ctx: _Context, info: _ModelInfo, files: dict[str, str]) -> str:
    """Dataset-level analyses of one model: the chosen step's (switched by the slider; a step
    without them says so) and the trends over training (static; their numbers go into
    `files`)."""
    root = "../../"
    step = info.default_step
    cards = [ctx.panel_view(m, _find_dataset_panel(step, m["id"]), root, anchor=m["id"],
                            missing_note=ANALYSES_NOTE) for m in info.dataset_panels]
    trends = [ctx.panel_view(_derived_meta(ctx, p), _numbered(
                  ctx, p, analyses.trend_sources(info.model, p), "step",
                  f"numbers/{info.slug}", files), root, anchor=f"trend-{panel_id(p)}")
              for p in info.model.trend_panels]
    return env.get_template("pages/analyses.md.j2").render(
        **_common(ctx.site, root, "analyses"), model=_model_view(ctx, info, root),
        panels=cards, trends=trends, missing_note=ANALYSES_NOTE,
        has_default=bool(step and step.dataset_panels),
        steps_with=[s.step for s in info.model.steps if s.dataset_panels])


# --------------------------------------------------------------------------------------------
# mkdocs.yml


def _theme_available(name: str) -> bool:
    if name == "mkdocs":
        return True
    try:
        from mkdocs.utils import get_theme_names

        return name in get_theme_names()
    except Exception:  # pragma: no cover - a broken theme install counts as absent
        return False


def _mkdocs_config(site: SiteData, docs_dir: Path, project_dir: Path, nav: list,
                   theme: str) -> dict:
    assets = [f"{ASSETS_URL}/{name}" for name in ASSET_FILES]
    config: dict = {
        "site_name": str(escape(site.title)),
        "docs_dir": _relative_or_absolute(docs_dir, project_dir),
        "use_directory_urls": False,        # file:// needs real .html links
        "plugins": ["search"],
        "extra_css": [assets[1]],
        "extra_javascript": [assets[0]],
        "nav": nav,
        "validation": {"nav": {"omitted_files": "info"}, "links": {"unrecognized_links": "info"}},
    }
    if theme == "material":
        config["theme"] = {
            "name": "material",
            "font": False,                  # no Google Fonts: every request stays local
            "features": ["navigation.sections", "navigation.top"],
            "palette": {"scheme": "default", "primary": "indigo", "accent": "indigo"},
        }
        # generator: no "Made with Material" link; polyfills: loaded before Material's bundle
        config["extra"] = {"generator": False, "polyfills": [assets[2]]}
    else:
        config["theme"] = {"name": "mkdocs", "highlightjs": False,  # hljs comes from a CDN
                           "custom_dir": "theme-overrides", "navigation_depth": 3}
        config["extra_javascript"] = [assets[2], assets[0]]   # before search/main.js
    return config


def _relative_or_absolute(path: Path, start: Path) -> str:
    try:
        return path.resolve().relative_to(start.resolve()).as_posix()
    except ValueError:
        return str(path.resolve())


# --------------------------------------------------------------------------------------------
# Public API


def render_site(site: SiteData, docs_dir: Path, templates_dir: Path | None = None, *,
                theme: str | None = None) -> Path:
    """Write the MkDocs project for `site`: `docs_dir.parent/mkdocs.yml`, the pages in
    `docs_dir` (home, compare, and per model overview / layer pages / filmstrip), the per-model
    indexes (`models/SLUG/index.json` and `data.js`) and the assets (`assets/reportgen/`).

    The artifact images are expected inside `docs_dir` already (FigureFile paths are relative to
    it). `templates_dir` overrides any default template or asset by file name. `theme` is
    "material" (default when installed) or "mkdocs" (built-in fallback). Pages written by an
    earlier render that are no longer produced are removed. Returns the mkdocs.yml path.
    """
    import yaml

    docs_dir = Path(docs_dir)
    project_dir = docs_dir.parent
    docs_dir.mkdir(parents=True, exist_ok=True)
    if theme is None:
        theme = "material" if _theme_available("material") else "mkdocs"
    elif theme not in ("material", "mkdocs") or not _theme_available(theme):
        raise ReportgenError(f"Theme '{theme}' is not available.",
                             expected="'material' (mkdocs-material installed) or 'mkdocs'",
                             received=theme)
    env = make_environment(templates_dir)
    ctx = _Context(site, docs_dir)
    infos = [_model_info(ctx, m) for m in site.models]

    files: dict[str, str] = {"index.md": _render_home(env, ctx, infos)}
    nav: list = [{"Home": "index.md"}]
    if any(info.pictures for info in infos) or site.compare_panels:
        files["compare.md"] = _render_compare(env, ctx, infos, files)
        nav.append({"Compare models": "compare.md"})
    for info in infos:
        live_steps = [data for data in (live_step(docs_dir, info.model, step)
                                        for step in info.model.steps) if data is not None]
        live_paths = {data.step: f"{info.folder}/live/{_file_part(data.step)}.js"
                      for data in live_steps}
        for data in live_steps:
            files[live_paths[data.step]] = data.inputs_script
        if live_steps:
            console.echo(live_summary_line(info.model, live_steps))
        index = model_index(ctx, info, live_paths)
        files[f"{info.folder}/index.json"] = json.dumps(index, ensure_ascii=False,
                                                        separators=(",", ":")) + "\n"
        files[f"{info.folder}/data.js"] = _index_js(index)
        files[f"{info.folder}/index.md"] = _render_model(env, ctx, info)
        for layer, title, stem in info.layers:
            files[f"{info.folder}/{stem}.md"] = _render_layer(env, ctx, info, layer, title)
        if info.has_analyses:
            files[f"{info.folder}/{ANALYSES_STEM}.md"] = _render_analyses(env, ctx, info, files)
        if info.pictures:
            files[f"{info.folder}/filmstrip.md"] = _render_filmstrip(env, ctx, info)
        nav.append({str(escape(info.model.name)): [
            {title: path} for path, title in _pages_for_model(ctx, info).items()]})

    for name in ASSET_FILES:
        files[f"{ASSETS_URL}/{name}"] = _asset_source(name, templates_dir).read_text("utf-8")

    _write_files(docs_dir, files)

    if theme == "mkdocs":
        overrides = project_dir / "theme-overrides"
        overrides.mkdir(exist_ok=True)
        for name in ("main.html", "404.html"):   # copied as they are: MkDocs renders them
            template = env.loader.get_source(env, f"theme/mkdocs/{name}")[0]
            _write_if_changed(overrides / name, template)

    config = _mkdocs_config(site, docs_dir, project_dir, nav, theme)
    config_path = project_dir / "mkdocs.yml"
    text = ("# Written by reportgen (reportgen.pages.render); edits are overwritten.\n"
            + yaml.safe_dump(config, sort_keys=False, allow_unicode=True, width=100))
    _write_if_changed(config_path, text)
    return config_path


def _write_if_changed(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    if not path.is_file() or path.read_bytes() != data:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)


def _write_files(docs_dir: Path, files: dict[str, str]) -> None:
    manifest = docs_dir / MANIFEST
    try:
        previous = set(json.loads(manifest.read_text("utf-8")))
    except (OSError, ValueError):
        previous = set()
    for rel, text in files.items():
        _write_if_changed(docs_dir / rel, text)
    for rel in sorted(previous - set(files)):
        stale = docs_dir / rel
        if stale.is_file():
            stale.unlink()
            try:                              # drop now-empty model folders
                stale.parent.rmdir()
            except OSError:
                pass
    _write_if_changed(manifest, json.dumps(sorted(files), indent=0) + "\n")


def build_site(project_dir: Path, site_dir: Path, *, strict: bool = False,
               marker: dict | None = None) -> Path:
    """Run MkDocs' build in-process: `project_dir/mkdocs.yml` -> `site_dir`, replaced whole.

    MkDocs writes into a private staging folder beside `site_dir`, which is swapped in only
    once complete (reportgen.pages.site_output): a failed build leaves the previous site as it
    was. `site_dir` must be absent, empty or a site reportgen made; the new site holds the
    marker saying so, with `marker`'s entries. Afterwards writes `search/search_index.js` (the
    index as a script) so Material's search also works from file://. Returns `site_dir`.
    """
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import MkDocsException

    from reportgen.pages.site_output import staged_site

    project_dir, site_dir = Path(project_dir), Path(site_dir)
    config_file = project_dir / "mkdocs.yml"
    if not config_file.is_file():
        raise ReportgenError("No mkdocs.yml to build.", expected=str(config_file),
                             fix="call render_site() first (`reportgen build` does both)")
    with staged_site(site_dir, marker) as staging:
        try:
            config = load_config(config_file=str(config_file), site_dir=str(staging),
                                 strict=strict)
            build(config)
        except MkDocsException as exc:
            raise ReportgenError("MkDocs could not build the site.", received=str(exc),
                                 fix="check the templates (a --templates override?) and "
                                     f"{config_file}") from exc
        index = staging / "search" / "search_index.json"
        if index.is_file() and config.theme.name == "material":
            data = index.read_text("utf-8")
            _write_if_changed(staging / "search" / "search_index.js",
                              f"var __index = {data}\n")
    return site_dir
