"""What the templates see: view models built from SiteData (plain dicts and small dataclasses;
strings still unescaped, the templates autoescape them).

- `SiteContext`: computed once per render (technique metadata, model slugs, image sizes);
- `ModelInfo` / `model_info`: one model's panel catalogue and which of its pages exist;
- `PanelView`: one card (panels/_default.j2 documents its fields);
- the smaller views of the pages: model links, the input card, the confusion matrix, the
  technique list with what does not apply to the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from reportgen.capsnet.model_words import word
from reportgen.pages import analyses
from reportgen.pages.analyses import PICTURES
from reportgen.pages.author_notes import notes_html
from reportgen.pages.captions import heading, split_caption
from reportgen.pages.environment import ASSETS_URL, VEGA_BUNDLE
from reportgen.pages.page_table import (ANALYSES_STEM, ANALYSES_TITLE, BESIDE_EVERY_LAYER,
                                        FILMSTRIP_STEM, FILMSTRIP_TITLE, KINDS, LAYER_PAGES,
                                        FAILED, LAYER_TITLES, NOT_APPLICABLE, NOT_COMPUTED,
                                        LayerPage)
from reportgen.pages.sitedata import FigureFile, ModelData, Panel, SiteData, StepData
from reportgen.pages.urls import panel_id, png_size, unique_slugs, url
from reportgen.data.held_out import VALIDATION_LIMIT
from reportgen.results.findings import (UNTRAINED, Scored, accuracy_name, chance_of, findings,
                                        scored_accuracy, untrained_pair_verdict,
                                        untrained_verdict)

MIN_DISPLAY = 160                        # images narrower than this are shown upscaled, pixelated
CARD_WIDTHS = (240, 900)                 # a card's preferred width: its image's, within these
ANALYSES_NOTE = "Not computed at this step (build with --analyses all)."


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
    caption: str = ""        # at most CAPTION_WORDS words (reportgen/pages/captions.py)
    caption_more: str = ""   # the rest of the caption and the option ids, behind "more"
    image: Image | None = None
    downloads: list[dict] = field(default_factory=list)   # [{kind, href}]
    anchor: str = ""         # HTML id (layer pages only: ids must be unique on a page)
    label: str = ""          # card heading instead of the title (filmstrip: step; compare: model)
    label_href: str = ""
    note: str = ""           # small text beside the heading (compare: the step shown)
    missing_note: str = ""   # what the card says when the chosen step has no result
    not_applicable: str = ""  # why the technique does not apply to the card's model, if so
    failed: str = ""         # why the technique failed at the shown step, if it did
    # panels of several figures (dataset analyses): the other figures, and the downloads
    # grouped by figure ([{label, links: [{kind, href}]}]; one group = the flat `downloads`)
    extras: list[dict] = field(default_factory=list)       # [{label, image: Image, href}]
    groups: list[dict] = field(default_factory=list)
    wide: bool = False       # takes a whole row (dataset analyses: several plots)


def picture(panel: Panel) -> FigureFile | None:
    """The figure a card shows: the first one an <img> can display (PNG first), if any."""
    return next((f for f in panel.figures if f.kind in PICTURES), None)


def best_picture(files: list[FigureFile]) -> FigureFile | None:
    """A group's picture for the page: its PNG, else its first other picture."""
    return next((f for f in files if f.kind == "png"),
                next((f for f in files if f.kind in PICTURES), None))


class SiteContext:
    """Everything computed once per render: technique metadata, image sizes, slugs."""

    def __init__(self, site: SiteData, docs_dir: Path):
        self.site = site
        self.docs_dir = docs_dir
        self.sizes: dict = {}
        self.techniques = {t["name"]: t for t in site.techniques}
        self.order = {t["name"]: i for i, t in enumerate(site.techniques)}
        self.slugs = unique_slugs(m.name for m in site.models)
        self.infos: list[ModelInfo] = []     # every model's, once render_site has made them

    def file(self, path: str, source: str = "") -> Path:
        """Where a figure's bytes are: the stored file when known, else the docs copy."""
        return Path(source) if source else self.docs_dir / path

    def size(self, path: str, source: str = "") -> tuple[int, int]:
        """A PNG's size from its header."""
        return png_size(self.file(path, source), self.sizes)

    def image(self, path: str, root: str, width: int = 0, height: int = 0,
              source: str = "") -> Image:
        if not (width and height):
            width, height = self.size(path, source)
        return Image(root + url(path), width, height)

    def figure_image(self, fig: FigureFile, root: str) -> Image:
        return self.image(fig.path, root, fig.width, fig.height, fig.source)

    def scope(self, technique: str) -> str:
        """A technique's scope ("input", "checkpoint", "dataset"): from the site's technique list
        when it says, else from the registry; "input" for names neither knows."""
        scope = self.techniques.get(technique, {}).get("scope")
        if scope:
            return scope
        registered = _registered(technique)
        return registered.scope if registered is not None else "input"

    def panel_view(self, meta: dict, panel: Panel | None, root: str, **extra) -> PanelView:
        several = bool(meta.get("several"))
        view = PanelView(id=meta["id"], technique=meta["technique"], variant=meta["variant"],
                         title=heading(meta["title"], meta["variant"], several),
                         layer=meta["layer"], experimental=meta["experimental"],
                         description=meta["description"], **extra)
        if panel is not None and panel.failed:
            view.failed = panel.failed
        if panel is not None and panel.figures:
            view.available = True
            view.title = heading(panel.title, panel.variant, several)
            view.caption, view.caption_more = split_caption(panel.caption, panel.variant)
            first = picture(panel)
            if first is not None:
                view.image = self.figure_image(first, root)
            view.downloads = [{"kind": f.kind.upper(), "href": root + url(f.path)}
                              for f in panel.figures]
            grouped = analyses.groups(panel)
            if len(grouped) > 1:
                view.groups = [{"label": "numbers" if not any(f.kind in PICTURES for f in files)
                                else analyses.humane(label) or "figure",
                                "links": [{"kind": f.kind.upper(), "href": root + url(f.path)}
                                          for f in files]} for label, files in grouped]
            for label, files in grouped:
                shown = best_picture(files)
                if shown is not None and shown is not first:
                    view.extras.append({"label": analyses.humane(label),
                                        "image": self.figure_image(shown, root),
                                        "href": root + url(shown.path)})
        return view

    def meta(self, panel: Panel, scope: str = "") -> dict:
        """A panel's card metadata (what does not change from step to step)."""
        tech = self.techniques.get(panel.technique, {})
        return {"id": panel_id(panel), "technique": panel.technique, "variant": panel.variant,
                "title": panel.title, "layer": panel.layer,
                "experimental": bool(panel.experimental or tech.get("experimental", False)),
                "description": tech.get("description", ""), "scope": scope,
                "picture": picture(panel) is not None}


# --------------------------------------------------------------------------------------------
# One model


@dataclass
class ModelInfo:
    """Derived facts about one model: its slug, panel catalogue and which pages it gets."""

    model: ModelData
    slug: str
    panels: list[dict]                       # union over steps and inputs, in page order
    layers: list[LayerPage]                  # the layer pages that have panels
    default_step: StepData | None
    default_input: str | None
    dataset_panels: list[dict] = field(default_factory=list)   # union over steps, page order
    # ModelData.not_applicable, each with its "scope" and "page" (the title of the page it
    # would be on), in technique order
    not_applicable: list[dict] = field(default_factory=list)

    @property
    def has_analyses(self) -> bool:
        return bool(self.dataset_panels or self.model.trend_panels)

    @property
    def references(self) -> list[str]:
        """The papers its family declares (ModelData.citations), as plain-text references."""
        from reportgen.bibtex import unique
        from reportgen.pages.methods import reference

        return [reference(e) for e in unique(self.model.citations)]

    @property
    def folder(self) -> str:
        return f"models/{self.slug}"

    def panels_of(self, layer: str) -> list[dict]:
        return [p for p in self.panels if p["layer"] == layer]

    def not_applicable_on(self, page: str) -> list[dict]:
        """What does not apply on one page: a layer's ("conv", …), beside every layer ("model")
        or the analyses page ("analyses")."""
        if page == ANALYSES_STEM:
            return [n for n in self.not_applicable if n["scope"] == "dataset"]
        return [n for n in self.not_applicable if n["scope"] != "dataset" and n["layer"] == page]

    @property
    def pictures(self) -> list[dict]:
        """The panels that are images (the filmstrip and compare pickers offer only these)."""
        return [p for p in self.panels if p["picture"]]

    def missing_note(self, meta: dict) -> str:
        """What a card of `meta` says at a step without its result: for a technique drawn only
        at the steps with dataset analyses, which steps those are; else "" (the default)."""
        if last_step_only(meta["technique"]):
            last = self.model.steps[-1].step if self.model.steps else ""
            return (f"Drawn only at the last step built ({last}), which keeps the site light: "
                    f"move the step slider there.")
        if not analysed_steps_only(meta["technique"]):
            return ""
        steps = [s.step for s in self.model.steps if s.dataset_panels]
        if not steps:
            return ("Drawn only at the steps with dataset analyses, which keeps the site light; "
                    "this build has none (it was built with --analyses none).")
        return (f"Drawn only at the steps with dataset analyses ({', '.join(steps)}), which "
                f"keeps the site light: move the step slider to one of them.")


def _registered(technique: str):
    """The registry's Technique of that name; None for names it does not know (a site's
    data may name techniques of another version)."""
    from reportgen.techniques import get_technique, technique_names

    return get_technique(technique) if technique in technique_names() else None


def last_step_only(technique: str) -> bool:
    """Whether a registered technique is computed only at the last step built."""
    registered = _registered(technique)
    return registered is not None and registered.last_step_only


def analysed_steps_only(technique: str) -> bool:
    """Whether a registered technique is computed only at the steps with dataset analyses."""
    registered = _registered(technique)
    return registered is not None and registered.analysed_steps_only


def _catalogue(ctx: SiteContext, groups) -> list[dict]:
    """Every panel id of (scope, panels) groups (union over steps), in technique order."""
    catalogue: dict[str, dict] = {}
    for scope, panels in groups:
        for panel in panels:
            pid = panel_id(panel)
            if pid not in catalogue:
                catalogue[pid] = {**ctx.meta(panel, scope),
                                  "_order": (ctx.order.get(panel.technique, len(ctx.order)),
                                             len(catalogue))}
    ordered = sorted(catalogue.values(), key=lambda p: p["_order"])
    counts: dict[str, int] = {}
    for p in ordered:
        del p["_order"]
        counts[p["technique"]] = counts.get(p["technique"], 0) + 1
    for p in ordered:       # plain headings; variants of one technique told apart in words
        p["several"] = counts[p["technique"]] > 1
        p["title"] = heading(p["title"], p["variant"], p["several"])
    return ordered


def model_info(ctx: SiteContext, model: ModelData) -> ModelInfo:
    def per_step():
        for step in model.steps:
            yield "checkpoint", step.checkpoint_panels
            for key in sorted(step.input_panels):
                yield "input", step.input_panels[key]

    panels = _catalogue(ctx, per_step())
    dataset = _catalogue(ctx, (("dataset", s.dataset_panels) for s in model.steps))
    shown = {p["technique"] for p in panels + dataset}
    used = {p["layer"] for p in panels}
    not_applicable = sorted(
        ({**entry, "scope": ctx.scope(entry.get("technique", "")),
          "title": entry.get("title") or entry.get("technique", ""),
          "layer": entry.get("layer", BESIDE_EVERY_LAYER), "reason": entry.get("reason", "")}
         for entry in model.not_applicable if entry.get("technique") not in shown),
        key=lambda n: ctx.order.get(n["technique"], len(ctx.order)))
    for entry in not_applicable:
        entry["page"] = (ANALYSES_TITLE if entry["scope"] == "dataset"
                         else LAYER_TITLES.get(entry["layer"], entry["layer"]))
    return ModelInfo(model=model, slug=ctx.slugs[model.name], panels=panels,
                     layers=[p for p in LAYER_PAGES if p.layer in used],
                     default_step=model.steps[-1] if model.steps else None,
                     default_input=model.inputs[0].key if model.inputs else None,
                     dataset_panels=dataset, not_applicable=not_applicable)


def find_panel(step: StepData | None, input_key: str | None, pid: str) -> Panel | None:
    if step is None:
        return None
    for panel in step.input_panels.get(input_key or "", []):
        if panel_id(panel) == pid:
            return panel
    for panel in step.checkpoint_panels:
        if panel_id(panel) == pid:
            return panel
    return None


def find_dataset_panel(step: StepData | None, pid: str) -> Panel | None:
    if step is None:
        return None
    return next((p for p in step.dataset_panels if panel_id(p) == pid), None)


# --------------------------------------------------------------------------------------------
# Page parts


def pages_for_model(info: ModelInfo) -> dict[str, str]:
    """{docs-relative .md path: nav title} of one model, in nav order."""
    pages = {f"{info.folder}/index.md": "Overview"}
    for page in info.layers:
        pages[f"{info.folder}/{page.stem}.md"] = page.title
    if info.has_analyses:
        pages[f"{info.folder}/{ANALYSES_STEM}.md"] = ANALYSES_TITLE
    if info.pictures:
        pages[f"{info.folder}/{FILMSTRIP_STEM}.md"] = FILMSTRIP_TITLE
    return pages


def model_choices(infos: list[ModelInfo], current: ModelInfo, root: str,
                  stem: str) -> list[dict]:
    """The model picker of a model's pages: every model [{name, href, current, same}], `href`
    its page of the same stem ("index", a layer page's, "analyses", "filmstrip") when it has
    one (`same`), else its overview; [] for a site of one model."""
    if len(infos) < 2:
        return []
    out = []
    for info in infos:
        pages = {PurePosixPath(path).stem for path in pages_for_model(info)}
        same = stem in pages
        out.append({"name": info.model.name, "current": info is current, "same": same,
                    "href": f"{root}{url(info.folder)}/{stem if same else 'index'}.html"})
    return out


def model_links(info: ModelInfo, root: str) -> list[dict]:
    """The links between a model's pages; `layer` is what the page links mark as current."""
    folder = f"{root}{url(info.folder)}"
    links = [{"title": p.title, "href": f"{folder}/{p.stem}.html", "layer": p.layer}
             for p in info.layers]
    if info.has_analyses:
        links.append({"title": ANALYSES_TITLE, "layer": ANALYSES_STEM,
                      "href": f"{folder}/{ANALYSES_STEM}.html"})
    if info.pictures:
        links.append({"title": "Filmstrip", "href": f"{folder}/{FILMSTRIP_STEM}.html",
                      "layer": FILMSTRIP_STEM})
    return links


def common(site: SiteData, root: str, kind: str) -> dict:
    """What every page template gets."""
    return {"site": site, "root": root, "page_kind": KINDS[kind].kind,
            "assets": root + ASSETS_URL, "vega_bundle": root + VEGA_BUNDLE,
            "layer_titles": LAYER_TITLES, "layer_pages": LAYER_PAGES,
            "not_applicable_label": NOT_APPLICABLE, "not_computed_label": NOT_COMPUTED,
            "failed_label": FAILED}


def selection_state(info: ModelInfo) -> dict:
    return {"step": info.default_step.step if info.default_step else "",
            "input": info.default_input or ""}


def model_view(info: ModelInfo, root: str) -> dict:
    model = info.model
    steps = [s.step for s in model.steps]
    return {"name": model.name, "slug": info.slug, "data": model, "steps": steps,
            "inputs": model.inputs, "state": selection_state(info),
            "data_js": f"{root}{url(info.folder)}/data.js",
            "overview": f"{root}{url(info.folder)}/index.html",
            "links": model_links(info, root),
            "latest_step": steps[-1] if steps else None,
            "findings": model_findings(info, root), "findings_step": findings_step(info),
            "untrained_banners": untrained_banners(info), "accuracy": accuracy_label(model),
            # the headline accuracy, the held-out split's, with its interval and images
            "latest_held_out": held_out_words(model, None),
            "best_held_out": held_out_words(model),
            "references": info.references,
            # what the predicted class's score is ("length", "probability"), on input cards
            "score_word": word(model.words, "score"),
            "notes_html": notes_html(model.notes)}


def accuracy_label(model: ModelData) -> dict:
    """What the pages call the model's accuracy: {"name", "chance"}. Images of two digits are
    scored by top-2 accuracy, whose chance is 1/C(K, 2) (2.2% = 1/45 for ten digits), said
    beside every such number; one class per image: plain "accuracy", no chance said."""
    if model.labels_per_image != 2:
        return {"name": accuracy_name(1), "chance": ""}
    chance, fraction = chance_of(len(model.class_names), 2)
    return {"name": accuracy_name(2), "chance": f"{100 * chance:.1f}% = {fraction}"}


NOT_RECORDED = "not recorded"          # a training fact an older run did not record


def duration(seconds: float) -> str:
    """A wall time in words: "45 s", "3 min 20 s", "2 h 05 min"."""
    total = int(round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def training_view(training: dict, labels_per_image: int = 1) -> list[dict]:
    """The overview's "Training run" facts [{label, value, recorded}] from ModelData.training
    (reportgen/training/run_info.py), each "not recorded" when the run did not record it.
    `labels_per_image` 2: the training images are pairs of overlapping digits (MultiMNIST)."""
    t = training or {}

    def fact(label, value, text=None):
        recorded = value is not None
        return {"label": label, "value": (text if text is not None else str(value))
                if recorded else NOT_RECORDED, "recorded": recorded}

    images = t.get("training_images")
    limit = f" (--limit {t['limit']:,})" if t.get("limit") else ""
    epochs, trained = t.get("epochs"), t.get("epochs_trained")
    rate = t.get("learning_rate")
    wall = t.get("wall_seconds")
    until = t.get("until_accuracy")
    # only when given: older runs did not record whether they had a target
    stop = [fact("Trained until", until, f"validation accuracy ≥ {100 * until:g}% "
                 "(--until-accuracy)")] if isinstance(until, (int, float)) else []
    # only when recorded: runs before [training] optimizer existed trained with Adam
    optimizer = [fact("Optimizer", t["optimizer"], optimizer_text(t))] \
        if isinstance(t.get("optimizer"), str) else []
    return [
        fact("Training data", t.get("dataset") or t.get("data")),
        fact("Training images" if labels_per_image == 1 else "Training pairs (images of two "
             "overlapping digits)", images, f"{images:,}{limit}" if images is not None
             else None),
        fact("Epochs", epochs, f"{trained} of {epochs}" if epochs is not None and trained
             is not None and trained != epochs else None),
        fact("Batch size", t.get("batch_size")),
        fact("Learning rate", rate, f"{rate:g}" if isinstance(rate, (int, float)) else None),
        *optimizer,
        fact("Wall time", wall, duration(wall) if isinstance(wall, (int, float)) else None),
        fact("Saved every", t.get("save_every"),
             f"{t['save_every']} batches" if t.get("save_every") is not None else None),
        fact("Seed", t.get("seed")),
        *stop,
    ]


def optimizer_text(training: dict) -> str:
    """A run's optimizer in words ("Adam", "SGD, momentum 0.9, weight decay 0.0005 (L2, in
    the gradient)") from its recorded facts (reportgen/training/run_info.py)."""
    name = training.get("optimizer")
    words = [{"adam": "Adam", "sgd": "SGD"}.get(name, str(name))]
    momentum, decay = training.get("momentum"), training.get("weight_decay")
    if isinstance(momentum, (int, float)) and not isinstance(momentum, bool):
        words.append(f"momentum {momentum:g}")
    if isinstance(decay, (int, float)) and not isinstance(decay, bool) and decay:
        words.append(f"weight decay {decay:g} (L2, in the gradient)")
    return ", ".join(words)


NOT_ANALYSED = "not analysed"          # the untrained step's analyses were not built


def score_text(key: str, value: float | None) -> str:
    """An accuracy as a percentage, any other score to 3 significant digits; a score below
    0.0005 in size reads "0.000" (as the findings print it), never "-9e-06"."""
    if value is None:
        return "—"
    if key.endswith("accuracy") or "accuracy_" in key:
        text = f"{100 * value:.1f}"
        return f"{'0.0' if float(text) == 0 else text}%"
    return "0.000" if abs(value) < 5e-4 else f"{value:.3g}"


def interval_text(key: str, interval) -> str:
    """"95% CI 95.4–97.7%" of a score as `score_text` prints it ("" without an interval)."""
    from reportgen.results.intervals import ci_text

    if interval is None:
        return ""
    if key.endswith("accuracy") or "accuracy_" in key:
        return ci_text(interval, 100, 1, "%")
    digits = 4 if max(abs(interval.low), abs(interval.high)) < 0.01 else 3
    return ci_text(interval, 1, digits)


def baseline_rows(models: list[ModelData], panel: Panel) -> list[dict]:
    """The Compare page's table beside an analysis drawn across models: each model's headline
    scores (reportgen/results/baselines.py) at its last step with the analysis (the step the
    chart shows), each beside its baseline and the untrained step's value ("not analysed" when
    this build did not analyse step 0-0)."""
    from reportgen.results.baselines import scores

    rows = []
    for model in models:
        step = next((s for s in reversed(model.steps) if any(
            p.technique == panel.technique for p in s.dataset_panels)), None)
        if step is None:
            continue
        numbers = next(p.numbers for p in step.dataset_panels if p.technique == panel.technique)
        zero = next((s for s in model.steps if s.step == UNTRAINED and s.dataset_panels), None)
        before = next((p.numbers for p in zero.dataset_panels
                       if p.technique == panel.technique), None) if zero else None
        for score in scores(panel.technique, numbers, before, len(model.class_names)):
            untrained = (score_text(score["key"], score["untrained"]) if zero is not None
                         else NOT_ANALYSED)
            rows.append({"model": model.name, "step": step.step, "label": score["label"],
                         "value": score_text(score["key"], score["value"]),
                         "interval": interval_text(score["key"], score["interval"]),
                         "method": score["interval"].method if score["interval"] else "",
                         "baseline": score_text(score["key"], score["baseline"])
                         if score["baseline_label"] else "",
                         "baseline_label": score["baseline_label"], "untrained": untrained})
    return rows


def input_view(ctx: SiteContext, info: ModelInfo, root: str, key: str | None) -> dict | None:
    inp = next((i for i in info.model.inputs if i.key == key), None)
    if inp is None:
        return None
    pred = info.default_step.predictions.get(inp.key) if info.default_step else None
    return {"key": inp.key, "label": inp.label, "true_class": inp.true_class,
            "image": ctx.image(inp.image, root), "prediction": pred}


def technique_list(ctx: SiteContext, info: ModelInfo, root: str) -> list[dict]:
    """The overview's list of techniques, page by page: [{page, href, technique, title,
    experimental, reason}] (`href` to the technique's card; `reason` when it does not apply)."""
    folder = f"{root}{url(info.folder)}"
    pages = {p.layer: p for p in info.layers}
    rows = []

    def add(page_title, page_href, metas, na):
        seen = set()
        for meta in metas:
            if meta["technique"] in seen:
                continue
            seen.add(meta["technique"])
            rows.append({"page": page_title, "href": f"{page_href}#{meta['id']}"
                         if page_href else "", "technique": meta["technique"],
                         "title": ctx.techniques.get(meta["technique"], {}).get("title")
                         or meta["title"], "experimental": meta["experimental"],
                         "reason": None})
        rows.extend({"page": page_title, "href": "", "technique": n["technique"],
                     "title": n["title"], "experimental": False, "reason": n["reason"]}
                    for n in na)

    first = info.layers[0] if info.layers else None
    add("Beside every layer page", f"{folder}/{first.stem}.html" if first else "",
        info.panels_of(BESIDE_EVERY_LAYER), info.not_applicable_on(BESIDE_EVERY_LAYER))
    for page in LAYER_PAGES:
        found = pages.get(page.layer)
        add(page.title, f"{folder}/{page.stem}.html" if found else "",
            info.panels_of(page.layer), info.not_applicable_on(page.layer))
    add(ANALYSES_TITLE, f"{folder}/{ANALYSES_STEM}.html" if info.has_analyses else "",
        info.dataset_panels, info.not_applicable_on(ANALYSES_STEM))
    return rows


# --------------------------------------------------------------------------------------------
# Findings: sentences from the numbers, each linked to its figure


def summaries_at(step: StepData | None) -> dict[str, dict]:
    """{technique: numbers} of a step's dataset panels (the first variant of each)."""
    out: dict[str, dict] = {}
    for panel in (step.dataset_panels if step else []):
        if panel.numbers and panel.technique not in out:
            out[panel.technique] = panel.numbers
    return out


def analysed_step(model: ModelData) -> StepData | None:
    """The latest built step with dataset analyses (else the latest built step)."""
    return next((s for s in reversed(model.steps) if s.dataset_panels),
                model.steps[-1] if model.steps else None)


def untrained_step(model: ModelData, analysed: StepData | None) -> StepData | None:
    """The untrained step (0-0) when it was built and is not the analysed step itself."""
    return next((s for s in model.steps if s.step == UNTRAINED and s is not analysed), None)


def model_findings(info: ModelInfo, root: str) -> list[dict]:
    """The model's findings as [{text, href, untrained, topic}] (reportgen/results/findings.py),
    each linked to the card of the analysis that shows it on the analyses page (the accuracy
    to the overview's confusion matrix)."""
    from reportgen.results.capsules_vs_cnns import TABLE1_REFERENCE

    model = info.model
    step = analysed_step(model)
    if step is None:
        return []
    before = untrained_step(model, step)
    kind = getattr(model, "kind", "") or ""
    reference = (kind, *TABLE1_REFERENCE[kind]) if kind in TABLE1_REFERENCE else None
    best, first = step_accuracy(model, step), step_accuracy(model, before)
    found = findings(summaries_at(step), len(model.class_names),
                     accuracy=best.accuracy if best else None,
                     images=best.images if best else None,
                     accuracy_counted=best.over if best else "evaluation images",
                     untrained=summaries_at(before) or None,
                     untrained_accuracy=first.accuracy if first else None,
                     reference=reference, predicts_nothing=step_verdict(model, step),
                     labels_per_image=model.labels_per_image,
                     words=getattr(model, "words", None))
    folder = f"{root}{url(info.folder)}"
    anchors = {}
    for meta in info.dataset_panels:
        anchors.setdefault(meta["technique"], meta["id"])
    out = []
    for f in found:
        if not f.technique:
            href = f"{folder}/index.html#evaluation"
        elif f.technique in anchors:
            href = f"{folder}/{ANALYSES_STEM}.html#{anchors[f.technique]}"
        else:
            href = ""
        out.append({"topic": f.topic, "text": f.text, "href": href, "untrained": f.untrained,
                    "threshold": f.threshold})
    return out


def evaluation_images(step: StepData) -> int | None:
    """How many images a step's evaluation counted (None: not evaluated)."""
    if step.confusion_matrix:
        return sum(sum(row) for row in step.confusion_matrix)
    return (step.predicted_pair or {}).get("images")


def held_out_accuracy(model: ModelData, step: StepData | None) -> Scored | None:
    """The step's validation accuracy from training (history.json) and the held-out images it
    counted (runs that did not record the count validated on up to VALIDATION_LIMIT of the
    test split); None when training did not validate that step (an imported one)."""
    record = next((r for r in model.history if step is not None and r.get("step") == step.step
                   and isinstance(r.get("val_accuracy"), (int, float))), None)
    if record is None:
        return None
    images = record.get("val_images") or min(VALIDATION_LIMIT, model.test_images)
    return Scored(float(record["val_accuracy"]), int(images), "held-out images") \
        if images else None


def accuracy_ci(accuracy: float | None, images: int | None) -> str:
    """"95% CI 95.4–97.7%" of an accuracy over `images` images (Wilson); "" without both."""
    from reportgen.results.findings import accuracy_interval
    from reportgen.results.intervals import ci_text

    if accuracy is None or not images:
        return ""
    return ci_text(accuracy_interval(accuracy, int(images)), 100, 1, "%")


def held_out_words(model: ModelData, record_of=max) -> str:
    """The held-out accuracy training measured, as the overview's facts say it: "95% CI
    95.4–97.7% over 1,000 held-out images at step 3-0", of the latest record with one
    (`record_of` = max: the best one's instead)."""
    records = [r for r in model.history if isinstance(r.get("val_accuracy"), (int, float))]
    if not records:
        return ""
    record = records[-1] if record_of is None else record_of(
        records, key=lambda r: r["val_accuracy"])
    images = record.get("val_images") or min(VALIDATION_LIMIT, model.test_images or 0)
    ci = accuracy_ci(float(record["val_accuracy"]), images)
    return (f"{ci}, {int(images):,} held-out images, step {record.get('step')}" if ci
            else f"step {record.get('step')}")


def step_accuracy(model: ModelData, step: StepData | None) -> Scored | None:
    """A step's accuracy over the most images scored: the held-out images training validated
    it on, or this build's evaluation set."""
    if step is None:
        return None
    images = evaluation_images(step)
    return scored_accuracy(held_out_accuracy(model, step),
                           Scored(step.accuracy, images, "evaluation images")
                           if step.accuracy is not None and images else None)


def step_verdict(model: ModelData, step: StepData):
    """Whether a step's predictions say its network is untrained (an UntrainedVerdict, its
    kind UNCLEAR when too few images were scored to tell, or None): from its confusion matrix,
    or for images of two digits its top-2 accuracy and most often predicted pair (and its
    MultiMNIST analysis' top-2 accuracy), and its held-out accuracy from training."""
    held, available = held_out_accuracy(model, step), model.test_images or None
    if step.predicted_pair is not None:
        return untrained_pair_verdict(step.accuracy, step.predicted_pair, model.class_names,
                                      summaries_at(step).get("multimnist_segmentation"),
                                      held, available)
    return untrained_verdict(step.confusion_matrix, model.class_names, held, available)


def untrained_banners(info: ModelInfo) -> list[dict]:
    """[{step, headline, details, shown}] of the built steps whose predictions over the
    evaluation set are one class or at chance (reportgen.results.findings.untrained_verdict):
    every page of the model shows the chosen step's banner, `shown` the default step's (the one
    a page shows without JavaScript)."""
    default = info.default_step.step if info.default_step else ""
    out = []
    for step in info.model.steps:
        verdict = step_verdict(info.model, step)
        if verdict is not None:
            out.append({"step": step.step, "headline": verdict.headline,
                        "named": verdict.of_step(step.step),
                        "details": verdict.details, "kind": verdict.kind,
                        "shown": step.step == default})
    return out


def findings_step(info: ModelInfo) -> str:
    step = analysed_step(info.model)
    return step.step if step else ""


def per_class_view(step: StepData, class_names: list[str]) -> list[dict]:
    """Images of two digits (no confusion matrix): per class, the share of its images whose
    top-2 holds it, as [{name, accuracy, bar}]."""
    return [{"name": class_names[i] if i < len(class_names) else str(i), "accuracy": share,
             "bar": round(100 * share, 1)}
            for i, share in enumerate(step.per_class_accuracy or [])] \
        if step.predicted_pair is not None else []


def confusion_view(step: StepData, class_names: list[str]) -> dict | None:
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


def card_min(views: list[PanelView]) -> int:
    """Minimum card width (px) on the filmstrip / compare grids: the image's own width, so
    images are shown at their natural size when the screen allows, within 240 ... 480 px
    (two cards side by side on a laptop screen)."""
    width = next((v.image.width for v in views if v.image and v.image.width), 0)
    return min(max(width, 240), 480)
