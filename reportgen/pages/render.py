"""SiteData -> a MkDocs project (mkdocs.yml, docs/*.md, scripts, JSON indexes) -> site/.

`render_site` writes the pages from the Jinja2 templates (`templates/`, overridable file by file
with a user's folder); `build_site` runs MkDocs. The parts, one job each:

- `page_table`: which pages exist (kinds, one page per technique layer), read by reportgen.js too;
- `environment`: the templates, filters and assets;
- `urls`: slugs, anchors and relative URLs;
- `views`: what the templates see;
- `site_index`: the per-model index the slider and the pickers read;
- `charts`: the training curves (Vega-Lite specs the page draws with vega-embed);
- `analyses` / `live`: the numbers behind the trend and comparison plots, and the live
  decoder's per-step data, both from the panels' numbers (never read back from docs/);
- `mkdocs_project`: mkdocs.yml, writing the docs folder, and the MkDocs build.

What the pages do (README, "The site"): the step slider and the input picker swap images in
place from the per-model index; without JavaScript a page shows the latest step and the first
input. Each model has an overview, a page per technique layer that has results, a
"Quantitative analyses" page (dataset-level analyses at the chosen step, and their trends) and
a training filmstrip; techniques that do not apply to the model say so, with the reason. Every
user-controlled string goes through Jinja2's autoescape; titles handed to MkDocs (whose theme
templates do not escape) are escaped here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path, PurePosixPath

from markupsafe import escape

from reportgen import console
from reportgen.errors import ReportgenError
from reportgen.capsnet.model_words import networks_phrase
from reportgen.pages import analyses, page_table
from reportgen.pages.charts import compare_charts, gu_chart, model_charts
from reportgen.pages.runs import runs_table
from reportgen.pages.environment import (ASSET_FILES, ASSETS_URL, VEGA_BUNDLE, asset_source,
                                         default_templates_dir, make_environment)
from reportgen.pages.gu_comparison import STEM as GU_STEM
from reportgen.pages.gu_comparison import TITLE as GU_TITLE
from reportgen.pages.gu_comparison import comparison
from reportgen.pages.input_scripts import split_index
from reportgen.pages.live import live_step
from reportgen.pages.methods import (METHODS_STEM, METHODS_TITLE, built_list, built_techniques,
                                     families_view, methods_view, not_built_view, thresholds)
from reportgen.pages.live import summary_line as live_summary_line
from reportgen.pages.mkdocs_project import (SITE_SCRIPT, build_site, choose_theme,
                                            mkdocs_config, write_files, write_project)
from reportgen.pages.page_table import ANALYSES_STEM, FILMSTRIP_STEM, KINDS, LayerPage
from reportgen.pages.site_index import index_js, index_json, model_index
from reportgen.pages.sitedata import FigureFile, Panel, SiteData
from reportgen.pages.urls import file_part, model_slug, panel_id, step_key, url
from reportgen.pages.views import (ANALYSES_NOTE, ModelInfo, SiteContext, accuracy_ci,
                                   card_min, held_out_accuracy, common, confusion_view, evaluation_images,
                                   find_dataset_panel, find_panel, input_view, model_choices,
                                   model_info, model_view, pages_for_model, per_class_view,
                                   picture, technique_list, training_view, baseline_rows)

# Imported from here by `reportgen build`, the tests and older code.
__all__ = ["render_site", "build_site", "model_slug", "default_templates_dir",
           "make_environment"]


def render_site(site: SiteData, docs_dir: Path, templates_dir: Path | None = None, *,
                theme: str | None = None) -> Path:
    """Write the MkDocs project for `site`: `docs_dir.parent/mkdocs.yml`, the pages in
    `docs_dir` (home, compare, and per model overview / layer pages / analyses / filmstrip),
    the per-model indexes (`models/SLUG/index.json` and `data.js`), the live decoder's per-step
    scripts, the page table (`assets/reportgen/site-data.js`) and the assets.

    The artifact images are expected inside `docs_dir` already (FigureFile paths are relative to
    it). `templates_dir` overrides any default template or asset by file name. `theme` is
    "material" (default when installed) or "mkdocs" (built-in fallback). Pages written by an
    earlier render that are no longer produced are removed. Returns the mkdocs.yml path.
    """
    _check_page_table()
    docs_dir = Path(docs_dir)
    project_dir = docs_dir.parent
    docs_dir.mkdir(parents=True, exist_ok=True)
    theme = choose_theme(theme)
    env = make_environment(templates_dir)
    ctx = SiteContext(site, docs_dir)
    infos = [model_info(ctx, m) for m in site.models]
    ctx.infos = infos

    files: dict[str, str] = {"index.md": _render_home(env, ctx, infos)}
    nav: list = [{"Home": "index.md"}]
    if any(info.pictures for info in infos) or site.compare_panels or len(site.models) > 1:
        files["compare.md"] = _render_compare(env, ctx, infos, files)
        nav.append({"Compare models": "compare.md"})
    gu = comparison(site.models)
    if gu is not None:
        files[f"{GU_STEM}.md"] = _template(env, "capsules_vs_cnns").render(
            **common(site, "", "capsules_vs_cnns"), gu=gu, charts=gu_chart(gu))
        for table, text in gu["csv"].items():
            files[f"numbers/{GU_STEM}-{table}.csv"] = text
        nav.append({GU_TITLE: f"{GU_STEM}.md"})
    files[f"{METHODS_STEM}.md"] = _template(env, "methods").render(
        **common(site, "", "methods"),
        methods=methods_view(site.techniques, ctx.scope, built_techniques(site)),
        not_built=not_built_view(site), families=families_view(site.models),
        thresholds=thresholds())
    nav.append({METHODS_TITLE: f"{METHODS_STEM}.md"})
    for info in infos:
        files.update(_render_model_pages(env, ctx, info, files))
        nav.append({str(escape(info.model.name)): [
            {title: path} for path, title in pages_for_model(info).items()]})

    files[SITE_SCRIPT] = page_table.site_script()
    if _draws_charts(files):
        from reportgen.figures.vega import embed_bundle

        files[VEGA_BUNDLE] = embed_bundle()
    if _draws_in_page(files):
        from reportgen.techniques.draw_panel.runtime import URL, runtime_script

        script = runtime_script()
        if script is not None:         # else the panel names the missing install step
            files[URL] = script
    for name in ASSET_FILES:
        files[f"{ASSETS_URL}/{name}"] = asset_source(name, templates_dir).read_text("utf-8")
    write_files(docs_dir, files)
    return write_project(env, project_dir, mkdocs_config(site.title, docs_dir, project_dir,
                                                         nav, theme), theme)


def _draws_charts(files: dict[str, str]) -> bool:
    """Whether a page holds a live chart (the pages load vega-embed only then; the pose-space
    chart loads it itself where the page has no other)."""
    return any(path.endswith(".md") and ("data-rg-chart" in text or "data-rg-pose-space" in text)
               for path, text in files.items())


def _draws_in_page(files: dict[str, str]) -> bool:
    """Whether a page holds the draw panel (the site ships onnxruntime-web only then)."""
    return any(path.endswith(".md") and "data-rg-draw-panel" in text
               for path, text in files.items())


def _check_page_table() -> None:
    from reportgen.techniques.base import LAYERS

    problems = page_table.check_layers(LAYERS)
    if problems:
        raise ReportgenError("The site's page table does not match the technique layers.",
                             expected="one page per technique layer (reportgen/pages/"
                                      "page_table.py LAYER_PAGES)", received="; ".join(problems))


def _render_model_pages(env, ctx: SiteContext, info: ModelInfo, files: dict[str, str]) -> dict:
    """The pages, index and live-decoder scripts of one model (docs-relative path -> text)."""
    out: dict[str, str] = {}
    live_steps = [data for data in (live_step(info.model, step)
                                    for step in info.model.steps) if data is not None]
    live_paths = {data.step: f"{info.folder}/live/{file_part(data.step)}.js"
                  for data in live_steps}
    for data in live_steps:
        out[live_paths[data.step]] = data.inputs_script
    if live_steps:
        console.echo(live_summary_line(info.model, live_steps))
    index = model_index(ctx, info, live_paths)
    small, input_files = split_index(index, info.folder)     # pages load one input at a time
    out[f"{info.folder}/index.json"] = index_json(small)      # the rest: input_scripts.read_index
    out[f"{info.folder}/data.js"] = index_js(small)
    out.update(input_files)
    out[f"{info.folder}/index.md"] = _render_model(env, ctx, info)
    for page in info.layers:
        out[f"{info.folder}/{page.stem}.md"] = _render_layer(env, ctx, info, page)
    if info.has_analyses:
        out[f"{info.folder}/{ANALYSES_STEM}.md"] = _render_analyses(env, ctx, info, files)
    if info.pictures:
        out[f"{info.folder}/{FILMSTRIP_STEM}.md"] = _render_filmstrip(env, ctx, info)
    return out


def _template(env, kind: str):
    return env.get_template(KINDS[kind].template)


# --------------------------------------------------------------------------------------------
# Pages


def _render_home(env, ctx: SiteContext, infos: list[ModelInfo]) -> str:
    root = ""
    rows = [{"model": model_view(info, root), "data": info.model,
             "n_steps": len(info.model.steps),
             "latest_step": info.model.steps[-1].step if info.model.steps else None}
            for info in infos]
    present = {page.layer for info in infos for page in info.layers}
    return _template(env, "home").render(
        **common(ctx.site, root, "home"), rows=rows, techniques=built_list(ctx.site),
        networks=networks_phrase(info.model.words for info in infos),
        site_layer_pages=[p.title for p in page_table.LAYER_PAGES if p.layer in present],
        compare_href="compare.html" if any(i.pictures for i in infos)
        or ctx.site.compare_panels or len(infos) > 1 else None)


def _render_model(env, ctx: SiteContext, info: ModelInfo) -> str:
    root = "../../"
    model = info.model
    default = info.default_step
    steps = [{"step": step.step, "accuracy": step.accuracy,
              "confusion": confusion_view(step, model.class_names),
              "per_class": per_class_view(step, model.class_names),
              "images": evaluation_images(step), "default": step is default,
              "ci": accuracy_ci(step.accuracy, evaluation_images(step)),
              "held_out": held_out_accuracy(model, step)}
             for step in model.steps]
    gallery = []
    for inp in model.inputs:
        pred = default.predictions.get(inp.key) if default else None
        gallery.append({"key": inp.key, "label": inp.label, "true_class": inp.true_class,
                        "image": ctx.image(inp.image, root), "prediction": pred})
    selected = default.step if default else None
    curves = model_charts(model, selected)
    return _template(env, "model").render(
        **common(ctx.site, root, "model"), model=model_view(info, root),
        model_choices=model_choices(ctx.infos, info, root, "index"),
        paper_steps=[s.step for s in model.steps if s.downloads],
        architecture=model.architecture, step_views=steps, gallery=gallery, curves=curves,
        training=training_view(model.training, model.labels_per_image),
        history=model.history, techniques=technique_list(ctx, info, root))


def _render_layer(env, ctx: SiteContext, info: ModelInfo, page: LayerPage) -> str:
    root = "../../"
    step, key = info.default_step, info.default_input

    def views(metas):
        return [ctx.panel_view(m, find_panel(step, key, m["id"]), root, anchor=m["id"],
                               missing_note=info.missing_note(m))
                for m in metas]

    return _template(env, "layer").render(
        **common(ctx.site, root, "layer"), model=model_view(info, root),
        model_choices=model_choices(ctx.infos, info, root, page.stem),
        layer=page.layer, layer_title=page.title, input=input_view(ctx, info, root, key),
        model_panels=views(info.panels_of(page_table.BESIDE_EVERY_LAYER)),
        panels=views(info.panels_of(page.layer)),
        not_applicable=info.not_applicable_on(page.layer),
        model_not_applicable=info.not_applicable_on(page_table.BESIDE_EVERY_LAYER))


def _render_filmstrip(env, ctx: SiteContext, info: ModelInfo) -> str:
    root = "../../"
    key = info.default_input
    # Default technique: the first layer-dependent one (the model-level ones are on every page).
    choices = info.pictures
    choice = next((p for p in choices if p["layer"] != page_table.BESIDE_EVERY_LAYER),
                  choices[0])
    cards = [ctx.panel_view(choice, find_panel(step, key, choice["id"]), root, label=step.step,
                            missing_note=info.missing_note(choice))
             for step in info.model.steps]
    return _template(env, "filmstrip").render(
        **common(ctx.site, root, "filmstrip"), model=model_view(info, root),
        model_choices=model_choices(ctx.infos, info, root, FILMSTRIP_STEM),
        choices=choices, choice=choice, cards=cards, card_min=card_min(cards),
        input=input_view(ctx, info, root, key))


def _render_compare(env, ctx: SiteContext, infos: list[ModelInfo], files: dict[str, str]) -> str:
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
    choice = next((m for m in ordered if m["layer"] != page_table.BESIDE_EVERY_LAYER),
                  ordered[0] if ordered else None)
    input_key = next(iter(inputs), None)
    cards = []
    for info in infos:
        step = info.default_step
        panel = find_panel(step, input_key, choice["id"]) if choice else None
        meta = choice or {"id": "", "technique": "", "variant": "", "title": "",
                          "layer": page_table.BESIDE_EVERY_LAYER, "experimental": False,
                          "description": ""}
        model = model_view(info, root)
        reason = next((n["reason"] for n in info.not_applicable
                       if n["technique"] == meta["technique"]), None)
        view = ctx.panel_view(meta, panel, root, label=info.model.name,
                              label_href=model["overview"],
                              note=f"step {step.step}" if step else "no built step",
                              not_applicable=reason or "")
        cards.append({"model": model, "panel": view})
    all_steps = sorted({s.step for info in infos for s in info.model.steps}, key=step_key)
    models = [info.model for info in infos]
    compare = [ctx.panel_view(ctx.meta(p), _numbered(
                   ctx, p, analyses.compare_sources(models, p), "model", "numbers/compare", files),
                   root, anchor=f"compare-{panel_id(p)}", wide=True)
               for p in ctx.site.compare_panels]
    baselines = {view.anchor: baseline_rows(models, p)
                 for view, p in zip(compare, ctx.site.compare_panels)}
    curves = compare_charts(models)
    runs = runs_table([(info.model, f"{root}{url(info.folder)}/index.html") for info in infos])
    return _template(env, "compare").render(
        **common(ctx.site, root, "compare"), curves=curves, runs=runs,
        cards=cards if choice else [],
        choices=ordered,
        choice=choice, card_min=card_min([c["panel"] for c in cards]),
        inputs=[{"key": k, "label": v} for k, v in inputs.items()], input_key=input_key,
        steps=all_steps, compare_panels=compare, baselines=baselines)


def _render_analyses(env, ctx: SiteContext, info: ModelInfo, files: dict[str, str]) -> str:
    """Dataset-level analyses of one model: the chosen step's (switched by the slider; a step
    without them says so) and the trends over training (static; their numbers go into
    `files`)."""
    root = "../../"
    step = info.default_step
    cards = [ctx.panel_view(m, find_dataset_panel(step, m["id"]), root, anchor=m["id"],
                            missing_note=ANALYSES_NOTE, wide=True) for m in info.dataset_panels]
    trends = [ctx.panel_view(ctx.meta(p), _numbered(
                  ctx, p, analyses.trend_sources(info.model, p), "step",
                  f"numbers/{info.slug}", files), root, anchor=f"trend-{panel_id(p)}", wide=True)
              for p in info.model.trend_panels]
    return _template(env, "analyses").render(
        **common(ctx.site, root, "analyses"), model=model_view(info, root),
        model_choices=model_choices(ctx.infos, info, root, ANALYSES_STEM),
        panels=cards, trends=trends, missing_note=ANALYSES_NOTE,
        has_default=bool(step and step.dataset_panels),
        steps_with=[s.step for s in info.model.steps if s.dataset_panels],
        not_applicable=info.not_applicable_on(ANALYSES_STEM))


def _numbered(ctx: SiteContext, panel: Panel, sources, axis: str, folder: str,
              files: dict[str, str]) -> Panel:
    """A trend / comparison panel with the numbers it was drawn from (JSON + CSV, written into
    `folder` under the name of its first figure) when it has none of its own."""
    if any(f.kind == "json" for f in panel.figures):
        return panel
    numbers = analyses.derived_numbers(panel, sources, axis)
    first = picture(panel)
    if numbers is None or first is None:
        return panel
    stem = f"{folder}/{PurePosixPath(first.path).stem}"
    files[f"{stem}.json"], files[f"{stem}.csv"] = numbers
    return dataclasses.replace(panel, figures=[*panel.figures, FigureFile("json", f"{stem}.json"),
                                               FigureFile("csv", f"{stem}.csv")])
