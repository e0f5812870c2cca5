"""The site's pages, in one table that the renderer, the templates and reportgen.js all read.

Two parts:
- `PAGE_KINDS`: every kind of page (the `data-rg-page` attribute of its root element), its
  template, whether there is one per model (and so reads that model's index, `data.js`) and
  what its controls choose. reportgen.js gets this table through `site-data.js` (see
  `site_script`) and dispatches on it instead of keeping its own list.
- `LAYER_PAGES`: one page per technique layer (`Technique.layer`, reportgen/techniques/base.py
  `LAYERS`), in nav order. The techniques of the layer "model" (`BESIDE_EVERY_LAYER`) are shown
  beside every layer page instead of on a page of their own. `check_layers` says whether the two
  tables agree; the renderer calls it, and tests/test_site_render.py fails when they do not.

A layer page is written for a model only when at least one of its techniques has a result for
that model. A layer whose techniques all do not apply (a CNN's PrimaryCaps, a model without a
decoder) gets no page and no nav entry; the model's overview lists those techniques with the
reason ("Not applicable to this model: …").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

BESIDE_EVERY_LAYER = "model"   # Technique.layer of the results shown beside every layer page
NOT_APPLICABLE = "Not applicable to this model"   # before the reason (ModelData.not_applicable)
NOT_COMPUTED = "Not computed for this step and input."   # a card without its result at a step
FAILED = "Failed at this step"                             # before a failed technique's reason


@dataclass(frozen=True)
class PageKind:
    kind: str            # data-rg-page value
    template: str        # under templates/
    per_model: bool      # one page per model, reading the model's index (models/SLUG/data.js)
    chooses: tuple[str, ...]   # what the page's controls choose: "step", "input", "panel"
    publishes: bool = False    # announces the shown (model, step, input) to other scripts


PAGE_KINDS = (
    PageKind("home", "pages/home.md.j2", per_model=False, chooses=()),
    PageKind("compare", "pages/compare_models.md.j2", per_model=False,
             chooses=("step", "input", "panel")),
    PageKind("capsules_vs_cnns", "pages/capsules_vs_cnns.md.j2", per_model=False, chooses=()),
    PageKind("model", "pages/model.md.j2", per_model=True, chooses=("step", "input")),
    PageKind("layer", "pages/layer.md.j2", per_model=True, chooses=("step", "input"),
             publishes=True),
    PageKind("analyses", "pages/analyses.md.j2", per_model=True, chooses=("step",),
             publishes=True),
    PageKind("filmstrip", "pages/filmstrip.md.j2", per_model=True, chooses=("input", "panel")),
    PageKind("methods", "pages/methods.md.j2", per_model=False, chooses=()),
)
KINDS = {page.kind: page for page in PAGE_KINDS}


@dataclass(frozen=True)
class LayerPage:
    layer: str           # Technique.layer
    title: str           # nav and heading
    stem: str            # file name: models/SLUG/<stem>.md -> .html


LAYER_PAGES = (
    LayerPage("conv", "Conv", "conv"),
    LayerPage("primary", "PrimaryCaps", "primary-caps"),
    LayerPage("convcaps", "ConvCaps", "conv-caps"),
    LayerPage("class", "ClassCaps", "class-caps"),
    LayerPage("decoder", "Decoder", "decoder"),
)
LAYER_TITLES = {BESIDE_EVERY_LAYER: "Model", **{p.layer: p.title for p in LAYER_PAGES}}

# The per-model pages that are not layer pages: (kind, nav title, file stem).
ANALYSES_TITLE, ANALYSES_STEM = "Quantitative analyses", "analyses"
FILMSTRIP_TITLE, FILMSTRIP_STEM = "Training filmstrip", "filmstrip"


def check_layers(layers) -> list[str]:
    """What is wrong between the technique layers (`LAYERS`) and the layer pages: a layer
    without a page, a page for no layer, a stem or title used twice. [] when they agree."""
    problems = []
    pages = [p.layer for p in LAYER_PAGES]
    for layer in layers:
        if layer != BESIDE_EVERY_LAYER and layer not in pages:
            problems.append(f"technique layer '{layer}' has no page in LAYER_PAGES")
    for page in LAYER_PAGES:
        if page.layer not in layers or page.layer == BESIDE_EVERY_LAYER:
            problems.append(f"page '{page.title}' shows layer '{page.layer}', which is not a "
                            f"technique layer of {tuple(layers)}")
    for field in ("layer", "title", "stem"):
        values = [getattr(p, field) for p in LAYER_PAGES]
        problems += [f"two layer pages have the {field} '{v}'" for v in sorted(set(values))
                     if values.count(v) > 1]
    reserved = {"index", ANALYSES_STEM, FILMSTRIP_STEM, "data", "live"}
    problems += [f"layer page stem '{p.stem}' is taken by another page" for p in LAYER_PAGES
                 if p.stem in reserved]
    return problems


def table() -> dict:
    """The page table as JSON-ready data (what site-data.js carries to reportgen.js)."""
    return {"kinds": {p.kind: {**asdict(p), "chooses": list(p.chooses)} for p in PAGE_KINDS},
            "layers": [asdict(p) for p in LAYER_PAGES],
            "beside_every_layer": BESIDE_EVERY_LAYER,
            "labels": {"not_applicable": NOT_APPLICABLE, "not_computed": NOT_COMPUTED,
                       "failed": FAILED}}


def site_script() -> str:
    """`site-data.js`: the page table, registered as `window.reportgenSite.pages` (a plain
    script, so it also loads from file://)."""
    body = json.dumps(table(), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return ("/* reportgen: the site's pages (reportgen/pages/page_table.py). */\n"
            "window.reportgenSite = window.reportgenSite || {};\n"
            f"window.reportgenSite.pages = {body};\n")
