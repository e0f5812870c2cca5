"""Words on the pages (reportgen/pages/captions.py): plain headings without option ids, captions
of at most 40 words with the rest behind "more", formulas with Unicode sub- and superscripts;
on the rendered cards and in the per-model index the step slider reads."""

from __future__ import annotations

import json
import re

import pytest

from reportgen.pages.captions import CAPTION_WORDS, heading, readable, split_caption
from reportgen.pages.input_scripts import read_index
from site_fixture import make_site

LONG = ("Explanation fidelity, MNIST_Demo step 5-40: mean target class-capsule length (bands: "
        "± one standard error over images) as patches are deleted (left; a faithful map drops "
        "fast: higher AOPC, AOPC = mean over k = 0 … P of f(x_0) - f(x_k)) or inserted (right; "
        "a faithful map rises fast: higher AUC). Maps: RPV modified (l_i c_ij l_j) and original "
        "(l_i (c_ij l_j)^2) on the 6x6 primary grid.")


def test_formulas_read_with_unicode_sub_and_superscripts():
    assert readable("m = l_i (c_ij l_j)^2") == "m = lᵢ (cᵢⱼ lⱼ)²"
    assert readable("H_i = -Σ_j c_ij log c_ij, argmax_j") == "Hᵢ = -Σⱼ cᵢⱼ log cᵢⱼ, argmaxⱼ"
    assert readable("votes u_hat[j|i] = W_ij u_i; f(x_0)") == "votes û(j|i) = Wᵢⱼ uᵢ; f(x₀)"
    assert readable("cos(v_j, û_j|i), length |û_j|i|, |v|") == \
        "cos(vⱼ, û(j|i)), length |û(j|i)|, |v|"
    # identifiers are not formulas: layer names, factors, keys stay as written
    for name in ("primary_conv", "shear_x", "test_0", "p_d", "translation_y", "RdBu_r"):
        assert readable(name) == name


def test_headings_lose_option_ids_and_name_variants_in_words():
    assert heading("Primary-capsule heatmaps (per_layer)", "per_layer") == \
        "Primary-capsule heatmaps"
    assert heading("Explanation fidelity (true-conv1-blur) over training", "true-conv1-blur") == \
        "Explanation fidelity over training"
    assert heading("Grad-CAM++ (conv1)", "conv1", several=True) == "Grad-CAM++: layer conv1"
    modified = heading("Routing Path Visualization (modified)", "modified", several=True)
    assert modified == "Routing Path Visualization: modified method"
    assert heading(modified, "modified", several=True) == modified          # idempotent
    assert heading("Predictions", "") == "Predictions"


def test_captions_keep_at_most_40_words_up_front_and_lose_nothing():
    short, more = split_caption(LONG, "true-conv1-blur")
    assert len(short.split()) <= CAPTION_WORDS and short.endswith("…")
    assert more.startswith("Options: true-conv1-blur. …")
    # every word of the caption is in one of the two parts (formulas made readable; the
    # punctuation at the cut gives way to "…")
    def words(text):
        return [w.rstrip(",;:") for w in text.split()]

    assert words(short[:-1] + more.split(". ", 1)[1][1:]) == words(readable(LONG))
    assert "(lᵢ (cᵢⱼ lⱼ)²)" in more
    # whole sentences are kept when they fit; "Details:" marks where a caption splits
    assert split_caption("One. Two three.") == ("One. Two three.", "")
    assert split_caption("Lead sentence here. Details: the rest.") == ("Lead sentence here.",
                                                                       "the rest.")
    second = " ".join(["More"] + ["more"] * 29) + "."
    first, rest = split_caption(" ".join(["word"] * 30) + ". " + second)
    assert first == " ".join(["word"] * 30) + "." and rest == second


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    from reportgen.pages.render import render_site

    docs = tmp_path_factory.mktemp("words") / "docs"
    site = make_site(docs)
    model = site.models[0]
    for step in model.steps:            # one long caption, to be split on the card
        for panels in step.input_panels.values():
            for panel in panels:
                if panel.technique == "rpv" and panel.variant == "modified":
                    panel.caption = LONG
    render_site(site, docs, theme="mkdocs")
    return docs


def test_cards_show_plain_headings_short_captions_and_more(rendered):
    page = (rendered / "models" / "MNIST_Demo" / "class-caps.md").read_text()
    card = page.split('data-rg-panel="rpv-modified"')[1].split("</figure>")[0]
    title = re.search(r'<h3 class="rg-panel-title" data-rg="title">([^<]*)</h3>', card)[1]
    assert title == "Routing Path Visualization: modified method"
    caption = re.search(r'data-rg="caption">([^<]*)</figcaption>', card)[1]
    assert len(caption.split()) <= CAPTION_WORDS
    more = re.search(r'<details class="rg-caption-more" data-rg="caption-more">'
                     r'<summary>more</summary><p data-rg="caption-more-text">([^<]*)</p>', card)
    assert more and more[1].startswith("Options: modified.") and "lᵢ (cᵢⱼ lⱼ)²" in more[1]
    # a short caption has its "more" hidden; no heading anywhere keeps an option id
    primary = (rendered / "models" / "MNIST_Demo" / "primary-caps.md").read_text()
    assert 'data-rg="caption-more" hidden data-search-exclude>' in primary
    for text in (page, primary):
        assert not re.search(r'rg-panel-title[^>]*>[^<]*\((modified|original|per_layer)\)', text)


def test_index_records_carry_heading_caption_and_more(rendered):
    index = read_index(rendered / "models" / "MNIST_Demo")
    record = index["steps"]["2-20"]["inputs"]["test-0"]["rpv-modified"]
    assert record["title"] == "Routing Path Visualization: modified method"
    assert len(record["caption"].split()) <= CAPTION_WORDS
    assert record["more"].startswith("Options: modified.")
    titles = {p["id"]: p["title"] for p in index["panels"]}
    assert titles["rpv-original"] == "Routing Path Visualization: original method"


# ------------------------------------------------------------------ the built site (Material)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The fixture site with routing entropy at the first model's analysed step and at 0-0
    (so it has findings) and one long caption, built with Material."""
    from reportgen.pages.render import build_site, render_site
    from test_findings import _analysed

    root = tmp_path_factory.mktemp("words-built")
    docs = root / "project" / "docs"
    site = make_site(docs)
    _analysed(site)
    for panels in site.models[0].steps[-1].input_panels.values():
        for panel in panels:
            if panel.technique == "rpv" and panel.variant == "modified":
                panel.caption = LONG
    render_site(site, docs, theme="material")
    return site, build_site(root / "project", root / "site", strict=True)


def test_search_indexes_visible_text_only(built):
    _, site = built
    docs = json.loads((site / "search" / "search_index.json").read_text())["docs"]
    text = "\n".join(d["title"] + " " + d["text"] for d in docs)
    for hidden in ("Not computed for this step and input", "Not computed at this step",
                   "0 more figures", "Training step", "EPOCH-BATCH)", "PNGSVG",
                   "Loss over training steps", "predicted&nbsp;"):
        assert hidden not in text, hidden
    # what a reader sees is found: findings, captions, the methods' references
    assert "Routing stays within" in text and "Routing Path Visualization" in text
    assert "Chattopadhay, A." in text and "Grad-CAM++" in text
    # a confusion matrix of a step that is not shown says nothing in search either
    overview = [d for d in docs if d["location"] == "models/MNIST_Demo/index.html#evaluation"]
    assert overview and "Step 1-10" not in overview[0]["text"]
    assert "Step 2-20" in overview[0]["text"]


def test_about_the_methods_lists_every_technique_with_its_references(built):
    site_data, site = built
    html = (site / "methods.html").read_text("utf-8")
    assert "hide:" not in html                            # the front matter is read, not shown
    for t in site_data.techniques:
        assert f'id="{t["name"]}"' in html, t["name"]
    rpv = html.split('id="rpv"')[1].split("</section>")[0]
    assert ("Bhullar, A., Czomko, M., Ali, R. A. and Welch, D. L. (2025). Interpreting Capsule "
            "Networks for Image Classification by Routing Path Visualization. Artificial "
            "Intelligence 348") in rpv
    assert "lᵢ (cᵢⱼ lⱼ)²" in rpv                         # the formula, readable
    cam = html.split('id="gradcam_pp"')[1].split("</section>")[0]
    assert "Chattopadhay, A., Sarkar, A., Howlader, P. and Balasubramanian, V. N. (2018)" in cam
    assert "doi:10.1109/WACV.2018.00097" in cam
    # a technique that declares no citation shows none (no fallback to another paper)
    kernels = html.split('id="conv_kernels"')[1].split("</section>")[0]
    assert "Reference" not in kernels and "Sabour" not in kernels
    assert 'id="thresholds"' in html and "0.05 nats" in html
    assert ("one class predicted for at least 95% of the evaluation images, or an accuracy "
            "interval not above chance over at least 1,000 images") in html   # the banner
    assert "decided by the 95% interval over the images" in html
    home = (site / "index.html").read_text("utf-8")
    assert 'side by side. <a href="methods.html">About the methods</a>' in home   # and the nav
    assert home.count('href="methods.html"') >= 2 or 'href="methods/"' in home


@pytest.mark.browser
@pytest.mark.slow
def test_findings_methods_and_more_fit_a_phone(built):
    from browser_support import CHROMIUM, chromium, serve

    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    _, site = built
    with serve(site) as base, chromium() as browser:
        context = browser.new_context(viewport={"width": 390, "height": 844})
        try:
            page = context.new_page()
            for rel in ("index.html", "methods.html", "models/MNIST_Demo/index.html",
                        "models/MNIST_Demo/analyses.html", "models/MNIST_Demo/class-caps.html"):
                page.goto(base + rel)
                page.wait_for_load_state("load")
                width = page.evaluate("document.scrollingElement.scrollWidth")
                assert width <= 390, f"{rel} scrolls sideways: {width} px wide"
            # a finding's link lands on its figure's card
            page.goto(base + "models/MNIST_Demo/index.html")
            links = page.locator(".rg-findings a").filter(has_text="See the figure")
            assert links.first.get_attribute("href").endswith("index.html#evaluation")
            links.nth(1).click()
            page.wait_for_load_state("load")
            assert page.url.endswith("analyses.html#routing_entropy-argmax")
            assert page.locator("#routing_entropy-argmax").is_visible()
            # "more" opens the rest of a long caption; the slider swaps it with the step
            page.goto(base + "models/MNIST_Demo/class-caps.html")
            card = page.locator('[data-rg-panel="rpv-modified"]')
            more = card.locator('[data-rg="caption-more"]')
            text = card.locator('[data-rg="caption-more-text"]')
            assert more.is_visible() and not text.is_visible()
            more.locator("summary").click()
            assert "Options: modified." in text.inner_text()
            page.locator("[data-rg-step-prev]").click()
            assert "Options: modified." in text.inner_text()
            assert "Details" not in card.locator('[data-rg="caption"]').inner_text()
            page.locator("[data-rg-step-next]").click()
            assert len(card.locator('[data-rg="caption"]').inner_text().split()) <= CAPTION_WORDS
        finally:
            context.close()
