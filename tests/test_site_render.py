"""The site renderer: SiteData -> MkDocs project -> site/ (reportgen.pages.render), plus the
`serve` and `publish` commands. Builds the fixture site of tests/site_fixture.py (2 models x 3
steps x 3 inputs) with Material and with the built-in fallback theme."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest
from click.testing import CliRunner

from reportgen.cli import main
from reportgen.errors import ReportgenError
from reportgen.pages.input_scripts import read_index
from reportgen.pages.render import (build_site, default_templates_dir, model_slug,
                                    render_site)
from site_fixture import (EVIL_CLASS, EVIL_LABEL, EVIL_MODEL, TRAINING, build_fixture_site,
                          make_site)

THEMES = ("material", "mkdocs")
URL_ATTRS = {"href", "src", "srcset", "poster", "action", "formaction", "data", "background",
             "cite", "longdesc", "manifest", "icon"}
REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.I)     # http://, https://, //host
SCHEMES_OK = ("#", "data:", "mailto:", "javascript:void")
EVIL_RAW = ["<script>alert(", "<img src=x onerror", "<b>bird</b>", "<b>failed</b>",
            "<em>not</em>"]


@pytest.fixture(scope="module", params=THEMES)
def built(request, tmp_path_factory):
    """(SiteData, project dir, site dir) for each theme."""
    return build_fixture_site(tmp_path_factory.mktemp(f"site-{request.param}"),
                              theme=request.param)


@pytest.fixture(scope="module")
def material(tmp_path_factory):
    return build_fixture_site(tmp_path_factory.mktemp("site-material-only"), theme="material")


class _Links(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.urls: list[tuple[str, str, str]] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if value is None or name not in URL_ATTRS:
                continue
            if name == "srcset":
                for part in value.split(","):
                    if part.strip():
                        self.urls.append((tag, name, part.split()[0]))
            else:
                self.urls.append((tag, name, value))


def _resolve(site: Path, page: Path, url: str) -> Path:
    path = unquote(urlsplit(url).path)
    target = site / path.lstrip("/") if path.startswith("/") else page.parent / path
    if not path or path.endswith("/"):
        target = target / "index.html"
    return target


# ------------------------------------------------------------------ structure


def test_pages_written_per_model_and_layer(built):
    site_data, project, site = built
    assert (project / "mkdocs.yml").is_file()
    for name in ("index.html", "compare.html", "404.html", "search/search_index.json"):
        assert (site / name).is_file(), name
    demo = site / "models" / "MNIST_Demo"
    for page in ("index", "conv", "primary-caps", "class-caps", "decoder", "filmstrip"):
        assert (demo / f"{page}.html").is_file(), page
    evil = site / "models" / model_slug(EVIL_MODEL)
    assert (evil / "class-caps.html").is_file()
    assert not (evil / "decoder.html").exists(), "a model without decoder panels has no page"
    index = read_index(demo)
    assert index["step_names"] == ["0-0", "1-10", "2-20"]
    assert [i["key"] for i in index["inputs"]] == ["test-0", "test-1", "test-2"]
    assert "conv_kernels" in index["steps"]["1-10"]["checkpoint"]
    assert {"rpv-modified", "rpv-original"} <= set(index["steps"]["0-0"]["inputs"]["test-2"])
    assert (demo / "data.js").read_text("utf-8").startswith("window.reportgenData")


def test_without_js_the_latest_step_and_first_input_are_shown(built):
    _, _, site = built
    html = (site / "models" / "MNIST_Demo" / "conv.html").read_text("utf-8")
    srcs = re.findall(r'<img data-rg="img" src="([^"]+)"', html)
    panel_srcs = [s for s in srcs if "/inputs/" not in s]
    assert panel_srcs and all("/2-20/" in s for s in panel_srcs)
    assert all("/test-0/" in s for s in panel_srcs if "checkpoint" not in s)
    # every panel image has a size and is lazy-loaded; controls are hidden until JS runs
    for tag in re.findall(r'<img data-rg="img"[^>]*>', html):
        assert 'loading="lazy"' in tag and "width=" in tag and "height=" in tag, tag
    assert re.search(r'<div class="rg-controls" data-rg-controls[^>]* hidden>', html)


def test_every_figure_has_caption_and_downloads(built):
    _, _, site = built
    html = (site / "models" / "MNIST_Demo" / "class-caps.html").read_text("utf-8")
    assert html.count('data-rg-panel="rpv-modified"') == 1
    block = html.split('data-rg-panel="rpv-modified"')[1].split("</figure>")[0]
    assert "rpv modified; class" in block          # the caption
    assert re.findall(r'<a href="([^"]+)" download>', block) == [
        "../../artifacts/MNIST_Demo/2-20/test-0/rpv-modified." + ext for ext in
        ("png", "svg", "pdf")]


def test_model_page_has_architecture_curves_confusion_gallery(built):
    _, _, site = built
    html = (site / "models" / "MNIST_Demo" / "index.html").read_text("utf-8")
    assert "PrimaryCaps" in html and "1,407,056" in html            # architecture table
    specs = _chart_specs(html)                                       # loss + accuracy charts
    assert [spec["title"] for spec in specs] == ["Loss over training", "Accuracy over training"]
    # the chosen step (the default: the latest) is marked, the accuracy chart shows chance 1/10
    assert [spec["params"] for spec in specs] == [[{"name": "chosen", "value": "2-20"}]] * 2
    chance = [layer for layer in specs[1]["layer"] if "data" in layer]
    assert [layer["data"]["values"] for layer in chance] == [
        [{"chance": 0.1, "label": "chance 10.0% = 1/10"}]]
    assert html.count('class="rg-step-block" data-rg-step=') == 3    # one matrix per step
    assert len(re.findall(r'data-rg-step="[^"]+" hidden', html)) == 2  # only the latest shown
    assert html.count("data-rg-thumb=") == 3
    assert "rg-wrong" in html                                        # misclassified marked


def _facts(html: str, section: str) -> dict[str, str]:
    """{label: value} of a facts list (dl) of class `section`, tags stripped."""
    block = re.search(rf'<dl class="rg-facts {section}">(.*?)</dl>', html, re.S).group(1)
    return {re.sub(r"<[^>]+>", "", dt).strip(): re.sub(r"<[^>]+>", "", dd).strip()
            for dt, dd in re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", block, re.S)}


def test_model_page_says_how_the_model_was_trained(built):
    """The overview's training run: what the run recorded, "not recorded" for the rest (the
    second model was trained by an older reportgen)."""
    _, _, site = built
    html = (site / "models" / "MNIST_Demo" / "index.html").read_text("utf-8")
    facts = _facts(html, "rg-training-run")
    assert facts == {"Training data": TRAINING["dataset"], "Training images": "400 (--limit 400)",
                     "Epochs": "2 of 3", "Batch size": "20", "Learning rate": "0.001",
                     "Wall time": "1 h 02 min", "Saved every": "10 batches", "Seed": "0"}
    assert "not recorded" not in html
    evil = (site / "models" / model_slug(EVIL_MODEL) / "index.html").read_text("utf-8")
    assert set(_facts(evil, "rg-training-run").values()) == {"not recorded"}
    assert "trained by an older reportgen" in evil


def test_duration_in_words():
    from reportgen.pages.views import duration

    assert [duration(s) for s in (0.4, 45, 200, 3725.4, 36000)] == [
        "0 s", "45 s", "3 min 20 s", "1 h 02 min", "10 h 00 min"]


def _chart_specs(html: str) -> list[dict]:
    """The Vega-Lite specs of a page's live charts, in page order."""
    import json

    return [json.loads(text) for text in re.findall(
        r'<script type="application/json" data-rg-spec>(.*?)</script>', html, re.S)]


def test_compare_page_overlays_the_training_curves(built):
    """Validation accuracy and loss of every model in one chart each, over the images seen:
    one series per model, a row per saved step that has the value, each model's chance a
    dashed line; the charts' scripts are the site's own copies (no network)."""
    site_data, _, site = built
    html = (site / "compare.html").read_text("utf-8")
    specs = _chart_specs(html)
    assert len(specs) == 2
    for spec, key in zip(specs, ("val_accuracy", "loss")):
        rows = spec["data"]["values"]
        names = [m.name for m in site_data.models]
        assert spec["layer"][0]["encoding"]["color"]["scale"]["domain"] == names
        for model in site_data.models:
            wanted = [(r["images_seen"], r[key]) for r in model.history if r[key] is not None]
            assert [(r["x"], r["value"]) for r in rows if r["series"] == model.name] == wanted
    chances = sorted(layer["data"]["values"][0]["chance"] for layer in specs[0]["layer"]
                     if "data" in layer)
    assert chances == sorted({1 / len(m.class_names) for m in site_data.models})
    scripts = re.findall(r'<script src="([^"]+)"', html)
    assert "assets/vendor/vega-embed.js" in scripts and "assets/reportgen/charts.js" in scripts
    assert (site / "assets" / "vendor" / "vega-embed.js").stat().st_size > 100_000


def test_compare_page_lists_the_training_runs(built):
    """The runs' settings side by side, each cell with the value its column sorts by; what an
    older run did not record says so."""
    site_data, _, site = built
    html = (site / "compare.html").read_text("utf-8")
    table = re.search(r'<table class="rg-table rg-runs" data-rg-sortable>(.*?)</table>', html,
                      re.S).group(1)
    headings = re.findall(r'data-rg-sort="\d+">([^<]+)</button>', table)
    assert headings == ["Model", "Data", "Training images", "Epochs", "Batch", "Learning rate",
                        "Seed", "Routing iterations", "Parameters", "Wall time",
                        "Best val. accuracy"]
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1], re.S)
    assert len(rows) == len(site_data.models)
    cells = [re.findall(r'<td class="[^"]*" data-label="([^"]+)" data-rg-value="([^"]*)">'
                        r'(.*?)</td>', row, re.S) for row in rows]
    first = {label: (value, re.sub(r"<[^>]+>", " ", text).split()) for label, value, text
             in cells[0]}
    assert first["Training images"] == ("400", ["400", "--limit", "400"])
    assert first["Epochs"][1] == ["2", "of", "3"] and first["Learning rate"][0] == "0.001"
    assert first["Wall time"] == ("3725.4", ["1", "h", "02", "min"])
    best = site_data.models[0].best_val_accuracy
    assert first["Best val. accuracy"][0] == str(best)
    assert " ".join(first["Best val. accuracy"][1]).endswith("accuracy; chance 10.0%")
    older = {label: text for label, _, text in cells[1]}
    assert older["Seed"] == older["Batch"] == "not recorded"
    assert "sort-table.js" in html


# ------------------------------------------------------------------ links and remote requests


def test_all_local_links_resolve_and_nothing_is_remote(built):
    _, _, site = built
    problems = []
    html_files = sorted(site.rglob("*.html"))
    assert len(html_files) >= 10
    for page in html_files:
        parser = _Links()
        parser.feed(page.read_text("utf-8"))
        for tag, attr, url in parser.urls:
            if url.startswith(SCHEMES_OK):
                continue
            if REMOTE.match(url):
                problems.append(f"{page.relative_to(site)}: remote {tag}[{attr}]={url}")
            elif not _resolve(site, page, url).exists():
                problems.append(f"{page.relative_to(site)}: broken {tag}[{attr}]={url}")
    for css in sorted(site.rglob("*.css")):
        text = css.read_text("utf-8", errors="replace")
        for url in re.findall(r"url\(\s*['\"]?([^'\")]+)", text) + re.findall(
                r"@import\s+['\"]([^'\"]+)", text):
            if url.startswith("data:"):
                continue
            if REMOTE.match(url):
                problems.append(f"{css.relative_to(site)}: remote url({url})")
            elif not _resolve(site, css, url).exists():
                problems.append(f"{css.relative_to(site)}: broken url({url})")
    # reportgen's own scripts, styles and indexes name no remote address at all (the theme's
    # minified scripts hold a few URLs for features this site does not use; the browser test
    # records every request actually made).
    own = list((site / "assets" / "reportgen").glob("*")) + list(site.rglob("data.js")) + \
        list(site.rglob("index.json"))
    for path in own:
        if re.search(r"https?://", path.read_text("utf-8")):
            problems.append(f"{path.relative_to(site)} names a remote URL")
    assert not problems, "\n".join(problems)


def test_no_google_fonts_or_cdn(built):
    _, _, site = built
    for page in site.rglob("*.html"):
        text = page.read_text("utf-8")
        for needle in ("fonts.googleapis", "fonts.gstatic", "cdnjs", "unpkg", "jsdelivr"):
            assert needle not in text, (page, needle)


# ------------------------------------------------------------------ escaping


def test_user_strings_are_escaped_everywhere(built):
    _, _, site = built
    for page in site.rglob("*.html"):
        text = page.read_text("utf-8")
        for raw in EVIL_RAW:
            assert raw not in text, f"{raw!r} unescaped in {page.relative_to(site)}"
    evil_page = (site / "models" / model_slug(EVIL_MODEL) / "index.html").read_text("utf-8")
    assert "&lt;script&gt;alert(" in evil_page
    assert "&lt;b&gt;bird&lt;/b&gt;" in evil_page
    home = (site / "index.html").read_text("utf-8")
    # the model name shows as text (escaped once, not twice) in the table and the navigation
    assert "Evil&lt;script&gt;alert(&#34;model&#34;)&lt;/script&gt;&amp;Co" in home
    assert "&amp;lt;" not in home
    for data_js in site.rglob("data.js"):
        assert "</script" not in data_js.read_text("utf-8")
    index = read_index(site / "models" / model_slug(EVIL_MODEL))
    assert EVIL_CLASS in index["class_names"]
    assert EVIL_LABEL in [i["label"] for i in index["inputs"]]


def test_model_slug_is_safe_and_stable():
    assert model_slug("MNIST_WSharing") == "MNIST_WSharing"
    slug = model_slug(EVIL_MODEL)
    assert re.fullmatch(r"[A-Za-z0-9._-]+", slug) and slug == model_slug(EVIL_MODEL)
    assert model_slug("a b") != model_slug("a-b")


# ------------------------------------------------------------------ templates


def test_user_templates_override_by_file_name(tmp_path):
    user = tmp_path / "my-templates"
    (user / "panels").mkdir(parents=True)
    (user / "assets").mkdir()
    (user / "panels" / "rpv.j2").write_text(
        '{% extends "panels/_default.j2" %}\n'
        '{% block notes %}<p class="my-rpv-note">MY RPV NOTE {{ panel.variant }}</p>'
        "{% endblock %}\n")
    (user / "assets" / "reportgen.css").write_text("/* my stylesheet */\n")
    _, project, site = build_fixture_site(tmp_path, templates_dir=user)
    page = (site / "models" / "MNIST_Demo" / "class-caps.html").read_text("utf-8")
    assert page.count("MY RPV NOTE") == 2 and "MY RPV NOTE modified" in page
    conv = (site / "models" / "MNIST_Demo" / "conv.html").read_text("utf-8")
    assert "MY RPV NOTE" not in conv and "Depends on the training step only" in conv
    assert (site / "assets" / "reportgen" / "reportgen.css").read_text() == "/* my stylesheet */\n"
    assert "function" in (site / "assets" / "reportgen" / "reportgen.js").read_text()


LABELS = {"not_applicable_label": "Not applicable to this model",
          "not_computed_label": "Not computed for this step and input."}


def _card(env, view) -> str:
    """One panel card as the pages render it (pages/_macros.j2 panel_card)."""
    page = env.from_string('{% import "pages/_macros.j2" as m with context %}'
                           "{{ m.panel_card(panel) }}")
    return page.render(panel=view, assets="../../assets/reportgen", **LABELS)


def test_every_technique_renders_with_its_template_or_the_default():
    from reportgen.pages.environment import make_environment
    from reportgen.pages.views import Image, PanelView
    from reportgen.techniques import all_techniques

    env = make_environment()
    panels = default_templates_dir() / "panels"
    own = []
    for tech in [*all_techniques(), None]:
        name = tech.name if tech else "a_new_technique"     # registered or not: a card
        view = PanelView(id=f"{name}-v", technique=name, variant="v", title=f"Title of {name}",
                         layer=tech.layer if tech else "conv", available=True,
                         caption=f"caption {name}", image=Image(f"x/{name}.png", 300, 100),
                         downloads=[{"kind": "PNG", "href": f"x/{name}.png"}],
                         description=f"about {name}")
        html = _card(env, view)
        assert f'data-rg-panel="{name}-v"' in html and f"caption {name}" in html, name
        for hook in ("title", "caption", "downloads", "missing"):
            assert f'data-rg="{hook}"' in html, (name, hook)
        if (panels / f"{name}.j2").is_file():
            own.append(name)
        else:   # no template of its own: exactly the default card
            assert html == env.get_template("panels/_default.j2").render(panel=view, **LABELS), name
            assert f'<img data-rg="img" src="x/{name}.png"' in html
    # the few that need more than the default (a note, the live decoder's and draw panel's apps,
    # the pose space's live chart)
    assert set(own) <= {"activation_maximization", "conv_kernels", "draw_panel",
                        "explanation_localisation", "explanation_quality",
                        "explanation_randomisation", "live_decoder",
                        "pose_space"}
    assert "a_new_technique" not in own


def test_page_table_matches_the_technique_layers():
    from reportgen.pages import page_table
    from reportgen.techniques import all_techniques
    from reportgen.techniques.base import LAYERS

    assert page_table.check_layers(LAYERS) == []
    pages = {p.layer for p in page_table.LAYER_PAGES}
    for tech in all_techniques():
        assert tech.layer in pages | {page_table.BESIDE_EVERY_LAYER}, tech.name
    # a technique layer without a page, and a page without a layer, are both reported
    assert any("'capsule_graph' has no page" in p
               for p in page_table.check_layers((*LAYERS, "capsule_graph")))
    assert any("'Decoder'" in p for p in page_table.check_layers(
        tuple(layer for layer in LAYERS if layer != "decoder")))


def test_reportgen_js_reads_the_page_table(built):
    from reportgen.pages import page_table

    _, _, site = built
    script = (site / "assets" / "reportgen" / "site-data.js").read_text("utf-8")
    table = json.loads(script.split("window.reportgenSite.pages = ", 1)[1].rstrip().rstrip(";"))
    assert table == json.loads(json.dumps(page_table.table()))
    assert [p["stem"] for p in table["layers"]] == ["conv", "primary-caps", "conv-caps",
                                                    "class-caps", "decoder"]
    # reportgen.js draws each kind of the table whose controls choose something, and keeps no
    # list of page kinds of its own
    js = (default_templates_dir() / "assets" / "reportgen.js").read_text("utf-8")
    renderers = js.split("var RENDERERS = {", 1)[1].split("};", 1)[0]
    drawn = set(re.findall(r"^\s*(\w+): render\w+,?$", renderers, re.M))
    assert drawn == {k for k, p in table["kinds"].items() if p["chooses"]}
    assert not re.search(r'(?<![.\w])kind [!=]== "', js)
    # every page loads the table before reportgen.js, and names its kind from the table
    for page in site.rglob("*.html"):
        html = page.read_text("utf-8")
        match = re.search(r'data-rg-page="([^"]+)"', html)
        if match is None:
            continue            # 404 page
        assert match[1] in table["kinds"], page
        scripts = re.findall(r'<script src="([^"]+)"', html)
        names = [s.rsplit("/", 1)[1] for s in scripts]
        assert names.index("site-data.js") < names.index("reportgen.js"), page


def test_not_applicable_techniques_say_why(built):
    _, _, site = built
    evil = site / "models" / model_slug(EVIL_MODEL)
    # a layer page: the techniques of its layer that do not apply, with the reason
    html = (evil / "class-caps.html").read_text("utf-8")
    assert ('<li id="rpv"><b>Routing Path Visualization</b>: Not applicable to this model: the '
            "model has no dynamic routing</li>") in html
    assert 'data-rg-panel="class_capsules"' in html
    # nothing on the Decoder page applies: no page, no nav entry, no link ...
    assert not (evil / "decoder.html").exists()
    overview = (evil / "index.html").read_text("utf-8")
    assert f"{model_slug(EVIL_MODEL)}/decoder.html" not in overview
    assert "MNIST_Demo/decoder.html" in overview          # the other model's, in the nav
    # ... and the overview's technique list says why, page by page
    rows = re.findall(r"<tr[^>]*><td>([^<]+)</td><td>(.*?)</td></tr>",
                      overview.split('id="techniques"', 1)[1].split("</table>", 1)[0])
    listed = {re.sub(r"<[^>]+>", "", cell).split("Not applicable")[0].strip(): (page, cell)
              for page, cell in rows}
    for title in ("Decoder: capsule length", "Decoder: dimension perturbation", "Live decoder"):
        page, cell = listed[title]
        assert page == "Decoder" and "Not applicable to this model: the model has no decoder" \
            in cell and "href" not in cell
    assert listed["Capsule semantics"][0] == "Quantitative analyses"
    assert listed["Routing Path Visualization"][0] == "ClassCaps"
    page, cell = listed["Conv feature maps"]
    assert page == "Conv" and 'href="../../models/' in cell and "conv.html#conv_feature_maps" \
        in cell and "Not applicable" not in cell
    # a dataset-level analysis: on the analyses page
    analyses_html = (evil / "analyses.html").read_text("utf-8")
    assert "<b>Capsule semantics</b>: Not applicable to this model: the model has no decoder" \
        in analyses_html
    # the index carries the reasons (the Compare page's cards read them)
    index = read_index(evil)
    assert index["not_applicable"]["rpv"] == "the model has no dynamic routing"
    # a model everything applies to says nothing of the kind
    demo = site / "models" / "MNIST_Demo"
    assert not any("Not applicable" in p.read_text("utf-8") for p in demo.glob("*.html"))
    assert read_index(demo)["not_applicable"] == {}


def test_missing_templates_dir_is_a_clear_error(tmp_path):
    with pytest.raises(ReportgenError, match="templates folder does not exist"):
        render_site(make_site(tmp_path / "docs"), tmp_path / "docs", tmp_path / "nope")


# ------------------------------------------------------------------ determinism, re-render


def test_two_builds_are_identical_except_sitemap(material, tmp_path):
    site_data, project, site = material
    render_site(site_data, project / "docs", theme="material")   # re-render in place
    second = build_site(project, tmp_path / "site2")
    first_files = {p.relative_to(site) for p in site.rglob("*") if p.is_file()}
    second_files = {p.relative_to(second) for p in second.rglob("*") if p.is_file()}
    assert first_files == second_files
    differ = [str(rel) for rel in sorted(first_files)
              if (site / rel).read_bytes() != (second / rel).read_bytes()]
    assert set(differ) <= {"sitemap.xml", "sitemap.xml.gz"}, differ


def test_stale_pages_are_removed_on_re_render(tmp_path):
    docs = tmp_path / "docs"
    site_data = make_site(docs)
    render_site(site_data, docs)
    evil = docs / "models" / model_slug(EVIL_MODEL)
    assert (evil / "index.md").is_file()
    site_data.models = site_data.models[:1]
    render_site(site_data, docs)
    assert not evil.exists()
    assert (docs / "models" / "MNIST_Demo" / "index.md").is_file()
    assert (docs / "artifacts" / "evil").is_dir(), "artifacts are not the renderer's to delete"


def test_training_curve_specs_are_deterministic_and_print_without_interaction():
    """A chart's spec depends on the numbers alone; the paper figure is the same spec without
    what only a pointer or the slider does (its rule, the chosen step, the zoom)."""
    from reportgen.figures.training_curves import printed, training_curves_spec

    history = [{"step": "0-0", "images_seen": 0, "loss": None, "val_accuracy": 0.1},
               {"step": "1-10", "images_seen": 100, "loss": 0.4, "margin_loss": 0.3,
                "reconstruction_loss": 0.1, "val_accuracy": 0.9}]
    for kind in ("loss", "accuracy"):
        spec = training_curves_spec(history, kind, chosen="1-10")
        assert spec == training_curves_spec(history, kind, chosen="1-10")
        assert [layer.get("name") for layer in spec["layer"]][-2:] == ["hover", "chosen"]
        still = printed(spec)
        assert "params" not in still and not any("params" in layer or layer.get("name")
                                                 for layer in still["layer"])
    loss = training_curves_spec(history, "loss")
    assert {(r["step"], r["series"], r["value"]) for r in loss["data"]["values"]} == {
        ("1-10", "total loss", 0.4), ("1-10", "margin loss", 0.3),
        ("1-10", "reconstruction loss", 0.1)}
    assert training_curves_spec([], "loss") is None


def test_downloadable_training_curves_name_what_the_accuracy_counts(tmp_path):
    """A two-digit model's curves (the download, the paper's figure) say top-2 accuracy in
    legend, axis and caption, as its pages do; a one-digit model's plain accuracy."""
    from reportgen.cache.store import ArtifactStore
    from reportgen.commands.paper_figures import attach
    from reportgen.pages.assemble import Assembler
    from reportgen.pages.sitedata import ModelData

    history = [{"step": "0-0", "images_seen": 0, "val_accuracy": 0.02},
               {"step": "1-10", "images_seen": 100, "loss": 0.4, "val_accuracy": 0.3,
                "train_accuracy": 0.25}]
    assembler = Assembler(ArtifactStore(tmp_path / "cache"), tmp_path / "docs")
    models = [ModelData(name=name, dataset="d", description="", params=0,
                        class_names=[str(k) for k in range(10)], architecture=[],
                        history=history, steps=[], inputs=[], labels_per_image=labels)
              for name, labels in (("One", 1), ("Two", 2))]
    attach(assembler, models)
    for model, named in zip(models, ("accuracy", "top-2 accuracy")):
        svg = next(f for f in model.downloads if f.kind == "svg")
        texts = " ".join(t.strip() for t in ET.parse(svg.source).getroot().itertext())
        assert f"validation {named}" in texts and f"train {named} (running)" in texts
        assert ("top-2" in texts) == (named != "accuracy")
    from reportgen.figures.training_curves import render_training_curves

    caption = render_training_curves(history, "Two", "top-2 accuracy")[0].caption
    assert "validation top-2 accuracy at each saved step" in caption


def test_model_without_steps_inputs_or_history_still_renders(tmp_path):
    from reportgen.pages.sitedata import ModelData, SiteData

    empty = ModelData(name="CIFAR10", dataset="cifar10", description="", params=0,
                      class_names=[], architecture=[], history=[], steps=[], inputs=[])
    site_data = SiteData(title="t", models=[empty], techniques=[{"name": "rpv"}])
    render_site(site_data, tmp_path / "docs")
    site = build_site(tmp_path, tmp_path / "site", strict=True)
    html = (site / "models" / "CIFAR10" / "index.html").read_text("utf-8")
    assert "No built steps." in html and "No training history recorded." in html
    assert not (site / "compare.html").exists()
    assert render_site(SiteData(title="none", models=[], techniques=[]), tmp_path / "d2")


def test_build_without_project_is_a_clear_error(tmp_path):
    with pytest.raises(ReportgenError, match="No mkdocs.yml"):
        build_site(tmp_path, tmp_path / "site")


# ------------------------------------------------------------------ serve and publish


def test_serve_and_publish_help_have_examples():
    runner = CliRunner()
    for name in ("serve", "publish"):
        result = runner.invoke(main, [name, "--help"])
        assert result.exit_code == 0, result.output
        assert "Example" in result.output and f"reportgen {name}" in result.output
    listed = runner.invoke(main, ["--help"]).output
    assert "serve" in listed and "publish" in listed


@pytest.mark.parametrize("name", ["serve", "publish"])
def test_missing_site_says_run_build_first(name, tmp_path):
    result = CliRunner().invoke(main, [name, "--site-dir", str(tmp_path / "site")])
    assert result.exit_code == 2
    assert "run `reportgen build` first" in result.output


def test_serve_serves_the_site(material):
    import threading
    import urllib.request

    from reportgen.commands.serve_cli import make_server

    server = make_server(material[2], "127.0.0.1", 0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=5) as resp:
            assert b"MNIST_Demo" in resp.read()
    finally:
        server.shutdown()
        server.server_close()


def _git(*args, cwd=None):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_publish_pushes_site_to_a_bare_repository(material, tmp_path, monkeypatch):
    site = material[2]
    bare = tmp_path / "remote.git"
    _git("init", "-q", "--bare", str(bare))
    repo = tmp_path / "repo"
    _git("init", "-q", str(repo))
    _git("remote", "add", "origin", str(bare), cwd=repo)
    monkeypatch.chdir(repo)
    runner = CliRunner()
    result = runner.invoke(main, ["publish", "--site-dir", str(site), "-m", "first"])
    assert result.exit_code == 0, result.output
    files = _git("--git-dir", str(bare), "ls-tree", "-r", "--name-only", "gh-pages").split()
    assert "index.html" in files and ".nojekyll" in files
    assert "models/MNIST_Demo/conv.html" in files
    # unchanged site: nothing new is pushed
    result = runner.invoke(main, ["publish", "--site-dir", str(site)])
    assert result.exit_code == 0 and "unchanged" in result.output
    assert _git("--git-dir", str(bare), "log", "--format=%s", "gh-pages").split("\n")[0] == "first"
    # outside any repository, to a URL/path: a new commit on top of the remote branch
    (site / "extra.txt").write_text("more\n")
    try:
        monkeypatch.chdir(tmp_path)
        result = runner.invoke(main, ["publish", "--site-dir", str(site), "--remote-url",
                                      str(bare), "--branch", "gh-pages", "-m", "second"])
        assert result.exit_code == 0, result.output
    finally:
        (site / "extra.txt").unlink()
    log = _git("--git-dir", str(bare), "log", "--format=%s", "gh-pages").split()
    assert log == ["second", "first"]


def test_not_found_page_links_resolve_from_the_site_folder(material):
    """MkDocs writes 404.html with links from the server's root (/assets/...); ours are
    relative to the site folder, and each one names a file the site has."""
    import re

    site = material[2]
    html = (site / "404.html").read_text("utf-8")
    links = re.findall(r'\b(?:href|src)="([^"#?]+)', html)
    assert not [u for u in links if u.startswith("/") and not u.startswith("//")]
    local = [u for u in links if "://" not in u and not u.startswith("//")]
    assert any(u.startswith("assets/") for u in local)
    assert [u for u in local if not (site / u).exists()] == []
    assert '"base": "."' in html and '"/assets' not in html   # Material's config too


@pytest.mark.parametrize("url,root", [
    ("git@github.com:me/capsnets.git", "/capsnets/"),
    ("https://github.com/me/capsnets", "/capsnets/"),
    ("https://github.com/Me/me.github.io.git", "/"),
    ("/srv/git/site.git", None),
])
def test_github_pages_root(url, root, tmp_path):
    from reportgen.pages.not_found_page import github_pages_root

    assert github_pages_root(url, tmp_path) == root
    (tmp_path / "CNAME").write_text("capsules.example.org\n")     # a custom domain: the root
    assert github_pages_root(url, tmp_path) == (None if root is None else "/")


def test_published_not_found_page_resolves_from_the_pages_root(material):
    from urllib.parse import urljoin

    from reportgen.pages.not_found_page import with_base

    html = with_base((material[2] / "404.html").read_text("utf-8"), "/capsnets/")
    base = re.search(r'<base href="([^"]+)">', html).group(1)
    assert html.index("<base ") < html.index("stylesheet")        # before any link it governs
    # served for a missing page three folders deep, the stylesheet still comes from the root
    sheet = re.search(r'href="(assets/stylesheets/[^"]+)"', html).group(1)
    assert urljoin(urljoin("https://me.github.io/capsnets/models/x/y/gone.html", base),
                   sheet) == f"https://me.github.io/capsnets/{sheet}"
    assert '"base": "/capsnets/"' in html


def test_publish_unknown_remote_is_a_clear_error(material, tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    _git("init", "-q", str(repo))
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(main, ["publish", "--site-dir", str(material[2]),
                                       "--remote", "nowhere"])
    assert result.exit_code == 2 and "no remote named 'nowhere'" in result.output


# ------------------------------------------------------------------ dataset-level panels


def _downloads(html: str, marker: str) -> list[str]:
    """The download links of the card marked `marker` (its data-rg="downloads" paragraph)."""
    block = html.split(marker, 1)[1].split('data-rg="downloads">', 1)[1].split("</p>")[0]
    return re.findall(r'<a href="([^"]+)" download>', block)


def test_quantitative_analyses_page(built):
    _, _, site = built
    demo = site / "models" / "MNIST_Demo"
    html = (demo / "analyses.html").read_text("utf-8")
    # the latest step's dataset panels are shown without JS, with every export
    assert _downloads(html, 'data-rg-panel="affine_robustness"') == [
        "../../artifacts/MNIST_Demo/2-20/dataset/affine_robustness." + ext
        for ext in ("png", "svg", "pdf", "json", "csv")]
    # a panel of several figures shows them all and groups its downloads by figure
    semantics = html.split('data-rg-panel="capsule_semantics"', 1)[1].split("About this")[0]
    assert re.findall(r"<figcaption>([^<]+)</figcaption>", semantics) == ["compactness"]
    assert re.findall(r'<span class="rg-download-label">([^<]+)</span>', semantics) == [
        "dimension variance", "compactness", "numbers"]
    assert [u.rsplit("/", 1)[1] for u in _downloads(html, 'data-rg-panel="capsule_semantics"')] \
        == ["capsule_semantics-dimension_variance.png", "capsule_semantics-dimension_variance.svg",
            "capsule_semantics-compactness.png", "capsule_semantics-compactness.svg",
            "capsule_semantics.json", "capsule_semantics.csv"]
    assert re.search(r'<p class="rg-missing-note rg-analyses-missing" data-rg-no-analyses '
                     r'hidden[^>]*>Not computed at this step \(build with --analyses all\)', html)
    # trend panels (static, outside the slider's reach)
    trends = html.split('id="over-training"', 1)[1]
    assert "Affine robustness over training" in trends
    links = _downloads(trends, 'id="trend-affine_robustness"')
    assert [u.rsplit(".", 1)[1] for u in links] == ["png", "svg", "pdf", "json", "csv"]
    # the build draws trends without their numbers: the renderer gathers them from the steps
    numbers = json.loads((site / "numbers" / "MNIST_Demo" / "affine_robustness_trend.json")
                         .read_text("utf-8"))
    assert links[3] == "../../numbers/MNIST_Demo/affine_robustness_trend.json"
    assert [s["step"] for s in numbers["series"]] == ["1-10", "2-20"]
    assert numbers["series"][1]["summary"]["accuracy_clean"] == pytest.approx(0.92)
    csv_text = (site / "numbers" / "MNIST_Demo" / "affine_robustness_trend.csv").read_text()
    assert csv_text.splitlines()[:2] == [
        "step,key,value,low,high,n,method", "1-10,accuracy_clean,0.91,,,,"]
    assert "data-rg-step-panels" not in trends
    # every model page links the analyses page; the model without trends still has one
    assert 'href="../../models/MNIST_Demo/analyses.html"' in (demo / "conv.html").read_text()
    evil = (site / "models" / model_slug(EVIL_MODEL) / "analyses.html").read_text("utf-8")
    assert "Trends need the analyses at two or more steps" in evil
    # the index tells the slider which steps have which dataset panels
    index = read_index(demo)
    assert index["steps"]["0-0"]["dataset"] == {}
    assert set(index["steps"]["1-10"]["dataset"]) == {"affine_robustness"}
    assert set(index["steps"]["2-20"]["dataset"]) == {"affine_robustness", "capsule_semantics"}
    kinds = [f["kind"] for f in index["steps"]["2-20"]["dataset"]["affine_robustness"]["figures"]]
    assert kinds == ["png", "svg", "pdf", "json", "csv"]


def test_compare_page_shows_models_overlaid(built):
    _, _, site = built
    html = (site / "compare.html").read_text("utf-8")
    assert 'id="quantitative"' in html and "Affine robustness across models" in html
    links = _downloads(html, 'id="compare-affine_robustness"')
    assert [u.rsplit(".", 1)[1] for u in links] == ["png", "svg", "pdf", "json", "csv"]
    numbers = json.loads((site / links[3]).read_text("utf-8"))
    assert [s["model"] for s in numbers["series"]] == ["MNIST_Demo (2-20)", f"{EVIL_MODEL} (3-5)"]
    assert 'id="compare-models"' in html and "data-rg-model-card" in html


def test_compare_page_puts_baselines_beside_the_charts(built):
    """Under each chart across models, every score beside its chance level and the untrained
    step's value, in words when this build did not analyse step 0-0."""
    _, _, site = built
    html = (site / "compare.html").read_text("utf-8")
    table = re.search(r'data-rg-baselines="affine_robustness">(.*?)</table>', html, re.S).group(1)
    rows = [[re.sub(r"<[^>]+>", " ", c).split() for c in re.findall(r"<td.*?</td>", r, re.S)]
            for r in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1], re.S)]
    # MNIST_Demo at 2-20 (clean 92%), the second model at 3-5 (clean 92%; 3 classes)
    assert [r[2] for r in rows] == [["92.0%"], ["75.0%"], ["92.0%"], ["75.0%"]]
    assert [r[3] for r in rows] == [["10.0%", "chance", "(1/K)"]] * 2 + \
        [["33.3%", "chance", "(1/K)"]] * 2
    assert all(r[4] == ["not", "analysed"] for r in rows)
    assert "this build did not analyse step 0-0" in html


def test_baseline_rows_read_the_untrained_step():
    from reportgen.pages.sitedata import ModelData, Panel, StepData
    from reportgen.pages.views import baseline_rows

    def panel(numbers):
        return Panel(technique="capsule_semantics", variant="", title="t", layer="model",
                     caption="", figures=[], numbers=numbers)

    from reportgen.results.intervals import BOOTSTRAP_STATISTIC, Interval, attach

    chance = {"compactness_chance_pooled": [0.002, 0.004]}
    trained = attach({**chance}, "compactness_rotation",
                     Interval(0.38, 0.3512, 0.4149, 200, BOOTSTRAP_STATISTIC))
    steps = [StepData(step="0-0", dataset_panels=[panel({"compactness_rotation": 0.69,
                                                          **chance})]),
             StepData(step="1-10", dataset_panels=[panel(trained)])]
    em = ModelData(name="EM", dataset="d", description="", params=1, class_names=["a", "b"],
                   architecture=[], history=[], steps=steps, inputs=[])
    lone = ModelData(name="Lone", dataset="d", description="", params=1, class_names=["a"],
                     architecture=[], history=[], steps=steps[1:], inputs=[])
    rows = baseline_rows([em, lone], steps[1].dataset_panels[0])
    assert [(r["model"], r["step"], r["label"], r["value"], r["baseline"], r["untrained"])
            for r in rows] == [
        ("EM", "1-10", "compactness under rotation", "0.38", "0.004", "0.69"),
        ("Lone", "1-10", "compactness under rotation", "0.38", "0.004", "not analysed")]
    assert rows[0]["baseline_label"] == "random change (95th percentile)"
    # each value with its interval, named by its method
    assert rows[0]["interval"] == "95% CI 0.351–0.415"
    assert rows[0]["method"] == BOOTSTRAP_STATISTIC


def _live_record(path: Path, step: str) -> dict:
    text = path.read_text("utf-8")
    return json.loads(text.split(f'["{step}"] = ', 1)[1].rsplit(";\n})", 1)[0])


def test_numbers_come_from_the_panels_not_the_docs_folder(tmp_path):
    """The trend / comparison numbers and the live decoder's data are the panels' numbers and
    the stored files: whatever the docs folder holds is not read back."""
    from site_fixture import DIMS, SEMANTICS_STEP

    docs = tmp_path / "docs"
    site_data = make_site(docs)
    for path in (docs / "artifacts").rglob("*"):
        if path.suffix in (".json", ".bin", ".js"):      # the downloads: garbage from here on
            path.write_text("not what the pages read")
    render_site(site_data, docs)
    numbers = json.loads((docs / "numbers" / "MNIST_Demo" / "affine_robustness_trend.json")
                         .read_text("utf-8"))
    assert [s["summary"]["accuracy_clean"] for s in numbers["series"]] == \
        pytest.approx([0.91, 0.92])
    demo = docs / "models" / "MNIST_Demo"
    record = _live_record(demo / "live" / f"{SEMANTICS_STEP}.js", SEMANTICS_STEP)
    assert record["std"]["source"] == "evaluation"
    assert record["std"]["values"] == [round(0.02 + 0.01 * d, 3) for d in range(DIMS)]
    assert "over 500 evaluation images" in record["std"]["note"]
    step = site_data.models[0].steps[-1]
    capsules = next(p for p in step.input_panels["test-1"] if p.technique == "class_capsules")
    assert record["inputs"]["test-1"]["capsules"] == capsules.numbers["capsules"]

    # a panel without numbers counts as not computed: no σ over the evaluation set, no input
    semantics = next(p for p in step.dataset_panels if p.technique == "capsule_semantics")
    semantics.numbers = {"images": 500, "dim_variance": [0.01] * DIMS}   # no "dimension_std"
    capsules.numbers = None
    render_site(site_data, docs)
    record = _live_record(demo / "live" / f"{SEMANTICS_STEP}.js", SEMANTICS_STEP)
    assert record["std"]["source"] == "inputs" and "2 chosen inputs" in record["std"]["note"]
    assert set(record["inputs"]) == {"test-0", "test-2"}
    # the decoder's weights without their stored files: no live decoder at that step
    live = next(p for p in step.checkpoint_panels if p.technique == "live_decoder")
    for fig in live.figures:
        fig.source = ""
    render_site(site_data, docs)
    assert not (demo / "live" / f"{SEMANTICS_STEP}.js").exists()
    assert (demo / "live" / "0-0.js").is_file()
    index = read_index(demo)
    assert "live" not in index["steps"][SEMANTICS_STEP] and "live" in index["steps"]["0-0"]


def test_capsule_semantics_summary_exports_the_spread_the_live_decoder_reads():
    from reportgen.pages.live import evaluation_std
    from reportgen.techniques.capsule_semantics.numbers import DIMENSION_STD, IMAGES
    from reportgen.techniques import capsule_semantics

    variance = np.array([0.04, 0.0, 0.09, 0.25])
    summary = capsule_semantics.summarize({
        "dim_variance": variance, "predicted_counts": np.array([3.0, 4.0, 5.0]),
        "compactness": np.full(6, 0.1), "compactness_index": np.arange(7)})
    assert summary[IMAGES] == 12
    assert summary[DIMENSION_STD] == pytest.approx([0.2, 0.0, 0.3, 0.5])
    assert evaluation_std(json.loads(json.dumps(summary)), 4) == pytest.approx(
        [0.2, 0.0, 0.3, 0.5])
    assert evaluation_std(summary, 5) is None                    # not this decoder's dims
    assert evaluation_std({DIMENSION_STD: [0.1, None, 0.1, 0.1]}, 4) is None
    assert evaluation_std({"std": [0.1] * 4}, 4) is None          # one key, by name


def test_live_decoder_files_and_pickers(built):
    _, _, site = built
    demo = site / "models" / "MNIST_Demo"
    html = (demo / "decoder.html").read_text("utf-8")
    assert html.count("data-rg-live-decoder") == 1 and "live-decoder.js" in html
    assert _downloads(html, "data-rg-live-decoder") == [
        "../../artifacts/MNIST_Demo/2-20/checkpoint/live_decoder." + ext
        for ext in ("json", "js")]
    # per step: capsules + Python images; σ over the evaluation set where capsule semantics ran
    for step, source in (("0-0", "inputs"), ("2-20", "evaluation")):
        text = (demo / "live" / f"{step}.js").read_text("utf-8")
        record = json.loads(text.split(f'["{step}"] = ', 1)[1].rsplit(";\n})", 1)[0])
        assert record["std"]["source"] == source and len(record["std"]["values"]) == 16
        assert set(record["inputs"]) == {"test-0", "test-1", "test-2"}
        assert len(record["inputs"]["test-0"]["capsules"]) == 10
    assert read_index(site / "models" / model_slug(EVIL_MODEL))[
        "steps"]["3-5"].get("live") is None
    # the live decoder is not a picture: the filmstrip and compare pickers do not offer it
    for page in (demo / "filmstrip.html", site / "compare.html"):
        assert 'value="live_decoder"' not in page.read_text("utf-8")


def test_figure_files_are_linked_into_the_site_and_theme_files_copied(built):
    """MkDocs would copy every figure (reportgen.pages.linked_figures): the site shares the docs
    folder's files (themselves the store's), while theme and page files are the site's own."""
    _, project, site = built
    docs = project / "docs"
    figures = [p for p in (site / "artifacts").rglob("*") if p.is_file()]
    assert len(figures) > 100
    for path in figures:
        assert os.path.samefile(path, docs / path.relative_to(site)), path
    others = [p for p in site.rglob("*") if p.is_file() and "artifacts" not in p.parts]
    assert others and all(p.stat().st_nlink == 1 for p in others)


def test_an_input_png_is_replaced_not_rewritten(tmp_path):
    """The site may link the docs folder's input images: writing one again makes a new file,
    so a linked copy keeps what it showed."""
    from reportgen.pages.assemble import write_input_png

    path = tmp_path / "inputs" / "test-0.png"
    write_input_png(np.zeros((4, 4, 1)), path)
    os.link(path, tmp_path / "linked.png")
    before = (tmp_path / "linked.png").read_bytes()
    write_input_png(np.ones((4, 4, 1)), path)
    assert (tmp_path / "linked.png").read_bytes() == before
    assert path.read_bytes() != before
    assert sorted(p.name for p in path.parent.iterdir()) == ["test-0.png"]
