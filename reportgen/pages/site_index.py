"""The per-model index the step slider and the pickers read: every built step x input of one
model, as `models/SLUG/index.json` (for tools) and `models/SLUG/data.js`, a script that
registers itself in `window.reportgenData[SLUG]` (a plain <script> tag works from file://,
where fetch() of local files is blocked). Paths are docs-relative and URL-encoded; a page
prefixes its own root. The site-wide page table is `page_table.site_script`.
"""

from __future__ import annotations

import json

from reportgen.pages import analyses
from reportgen.pages.captions import heading, split_caption
from reportgen.pages.sitedata import Panel
from reportgen.pages.urls import panel_id, url
from reportgen.pages.views import ModelInfo, SiteContext

PANEL_KEYS = ("id", "technique", "variant", "title", "layer", "experimental", "scope", "picture")


def figure_record(ctx: SiteContext, panel: Panel, several: bool = False) -> dict:
    """The index entry of one panel (docs-relative URLs; the page's JS adds its root): its
    plain heading, its caption up front and the rest behind "more" (`more`), its figures.
    `several`: the model shows several variants of the technique (named in the heading)."""
    figures = []
    for fig in panel.figures:
        width, height = fig.width, fig.height
        if not (width and height) and fig.kind == "png":
            width, height = ctx.size(fig.path, fig.source)
        record = {"kind": fig.kind, "src": url(fig.path), "width": width, "height": height,
                  "label": analyses.figure_label(panel, fig)}
        if fig.kind == "js":     # loaded on request (the live decoder's weights): say how big
            record["bytes"] = _size(ctx, fig)
        figures.append(record)
    caption, more = split_caption(panel.caption, panel.variant)
    record = {"title": heading(panel.title, panel.variant, several), "caption": caption,
              "more": more, "figures": figures}
    if panel.failed:                # the card says why instead of "not computed"
        record["failed"] = panel.failed
    if panel.shared is not None:    # the filmstrip's frame on the scale shared by every step
        record["shared"] = {**figure_record(ctx, panel.shared, several),
                            "range": list(panel.shared_range)}
    return record


def _size(ctx: SiteContext, fig) -> int:
    try:
        return ctx.file(fig.path, fig.source).stat().st_size
    except OSError:
        return 0


def model_index(ctx: SiteContext, info: ModelInfo, live: dict[str, str] | None = None) -> dict:
    """Every built step x input of one model: panel figures, predictions, accuracy, the
    dataset-level panels of each step, (`live`: step -> docs-relative path) the live decoder's
    per-step script, and the techniques that do not apply to the model with the reason."""
    model = info.model
    live = live or {}
    several = {p["id"] for p in info.panels + info.dataset_panels if p.get("several")}

    def record(panel):
        pid = panel_id(panel)
        return pid, figure_record(ctx, panel, pid in several)

    steps = {}
    for step in model.steps:
        steps[step.step] = {
            "accuracy": step.accuracy,
            "checkpoint": dict(record(p) for p in step.checkpoint_panels
                               if p.figures or p.failed),
            "dataset": dict(record(p) for p in step.dataset_panels if p.figures or p.failed),
            "inputs": {key: dict(record(p) for p in panels if p.figures or p.failed)
                       for key, panels in step.input_panels.items()},
            "predictions": {key: {"predicted": pred.predicted,
                                  "confidence": round(float(pred.confidence), 4),
                                  "correct": pred.correct}
                            for key, pred in step.predictions.items()},
        }
        if step.step in live:
            steps[step.step]["live"] = url(live[step.step])
    inputs = []
    for inp in model.inputs:
        width, height = ctx.size(inp.image)
        inputs.append({"key": inp.key, "label": inp.label, "true_class": inp.true_class,
                       "image": {"src": url(inp.image), "width": width, "height": height},
                       **({"digest": inp.digest} if inp.digest else {})})
    return {
        "name": model.name,
        "slug": info.slug,
        "page": f"{info.folder}/index.html",
        "class_names": list(model.class_names),
        "step_names": [s.step for s in model.steps],
        "inputs": inputs,
        # each with what its card says at a step without its result ("" = the default note)
        "panels": [{**{k: p[k] for k in PANEL_KEYS}, "missing": info.missing_note(p)}
                   for p in info.panels],
        "dataset_panels": [{k: p[k] for k in ("id", "technique", "variant", "title")}
                           for p in info.dataset_panels],
        "not_applicable": {n["technique"]: n["reason"] for n in info.not_applicable},
        "steps": steps,
    }


def index_json(index: dict) -> str:
    return json.dumps(index, ensure_ascii=False, separators=(",", ":")) + "\n"


def index_js(index: dict) -> str:
    """The index as a script that registers itself (works from file://, unlike fetch())."""
    body = json.dumps(index, ensure_ascii=False, separators=(",", ":"))
    # JSON is valid JavaScript; keep "</script" and U+2028/9 out of the file for old parsers.
    body = body.replace("</", "<\\/").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return ("window.reportgenData = window.reportgenData || {};\n"
            f"window.reportgenData[{json.dumps(index['slug'])}] = {body};\n")
