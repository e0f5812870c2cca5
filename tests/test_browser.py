"""The built site in a real browser (Playwright driving Debian's headless chromium): served over
127.0.0.1 and opened from file://. The slider and the input picker swap images in place, the
choice persists across pages and models, the quantitative analyses follow the slider (and say
when a step has none), search works, nothing logs an error, and no request leaves the machine.
The live decoder is tested in depth in reportgen/techniques/live_decoder/tests/."""

from __future__ import annotations

from pathlib import Path

import pytest

from site_fixture import EVIL_MODEL, build_fixture_site

from browser_support import CHROMIUM, chromium, pages_like, serve
pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="Debian's chromium is not installed (apt-get install "
                                       "chromium); the browser tests need it")

CONV_IMG = '[data-rg-panel="conv_feature_maps"] img[data-rg="img"]'
PRIMARY_IMG = '[data-rg-panel="primary_heatmaps"] img[data-rg="img"]'


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return build_fixture_site(tmp_path_factory.mktemp("browser"))[2]


@pytest.fixture(scope="module")
def base_url(site):
    with serve(site) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium() as launched:
        yield launched


class Recorder:
    """Every request, console error and page error of one browser context."""

    def __init__(self, context):
        self.requests: list[str] = []
        self.errors: list[str] = []
        context.on("request", lambda request: self.requests.append(request.url))
        context.on("console", lambda msg: msg.type == "error" and self.errors.append(msg.text))
        context.on("weberror", lambda error: self.errors.append(str(error.error)))

    def check(self, allowed: tuple[str, ...]) -> None:
        assert not self.errors, self.errors
        outside = [u for u in self.requests if not u.startswith(allowed + ("data:", "blob:",
                                                                          "about:"))]
        assert not outside, f"requests leaving the machine: {outside}"


@pytest.fixture()
def context(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(5000)
    yield context
    context.close()


def _src(page, selector: str) -> str:
    _drawn(page)
    return page.locator(selector).first.get_attribute("src")


def _drawn(page) -> None:
    """Wait until the page has drawn its choice (an input's panels load with its own script)."""
    page.wait_for_selector("[data-rg-page]:not([data-rg-busy])", state="attached")


@pytest.mark.browser
@pytest.mark.slow
def test_over_http(context, base_url):
    rec = Recorder(context)
    page = context.new_page()

    page.goto(base_url + "index.html")
    models = page.locator("table.rg-models a.rg-model-link").all_inner_texts()
    assert models == ["MNIST_Demo", EVIL_MODEL]   # the escaped name reads as plain text

    page.goto(base_url + "models/MNIST_Demo/conv.html")
    assert page.locator("[data-rg-controls]").is_visible()
    latest = _src(page, CONV_IMG)
    assert "/2-20/test-0/" in latest
    # the slider: Home = first step; the image is swapped in place
    slider = page.locator("[data-rg-step-slider]")
    slider.focus()
    page.keyboard.press("Home")
    first = _src(page, CONV_IMG)
    assert first != latest and "/0-0/test-0/" in first
    assert page.locator("[data-rg-step-value]").inner_text() == "0-0"
    page.keyboard.press("ArrowRight")
    assert "/1-10/test-0/" in _src(page, CONV_IMG)
    # the input picker
    page.select_option("[data-rg-input-picker]", "test-2")
    assert "/1-10/test-2/" in _src(page, CONV_IMG)
    assert "/inputs/test-2.png" in _src(page, '[data-rg-input-card] img')
    assert "step=1-10" in page.url and "input=test-2" in page.url
    # only the current choice's images are in the DOM
    assert page.locator(".rg-panel img[src*='/0-0/']").count() == 0

    # the choice persists to another page of the model ...
    page.goto(base_url + "models/MNIST_Demo/primary-caps.html")
    assert "/1-10/test-2/" in _src(page, PRIMARY_IMG)
    assert page.locator("[data-rg-input-picker]").input_value() == "test-2"
    # ... and to another model: its nearest earlier step (it has 0-0, 1-15, 3-5), and its first
    # input when it lacks the chosen one
    page.goto(base_url + "models/" + page_slug(EVIL_MODEL) + "/primary-caps.html")
    assert "/0-0/test-0/" in _src(page, PRIMARY_IMG)
    assert page.locator("[data-rg-step-value]").inner_text() == "0-0"

    # model overview: the slider switches the confusion matrix shown
    page.goto(base_url + "models/MNIST_Demo/index.html")
    assert page.locator('[data-rg-step="1-10"]').is_visible()
    assert not page.locator('[data-rg-step="2-20"]').is_visible()
    marker = page.locator(".chosen_rule_marks line, .chosen_rule_marks path").first
    marker.wait_for(state="attached")
    before = marker.get_attribute("transform")
    page.locator("[data-rg-step-next]").click()
    assert page.locator('[data-rg-step="2-20"]').is_visible()
    page.wait_for_function("before => { const m = document.querySelector("
                           "'.chosen_rule_marks line, .chosen_rule_marks path'); "
                           "return m && m.getAttribute('transform') !== before; }", arg=before)

    # compare models and filmstrip pickers
    page.goto(base_url + "compare.html")
    page.select_option("[data-rg-panel-picker]", "rpv-original")
    cards = page.locator("[data-rg-model-card] img[data-rg='img']")
    assert cards.count() == 2
    assert "rpv-original.png" in cards.nth(0).get_attribute("src")
    # a model the technique does not apply to says why (the reason comes from its index) ...
    evil_card = f'[data-rg-model-card="{page_slug(EVIL_MODEL)}"]'
    evil_note = page.locator(evil_card + ' [data-rg="missing"]')
    assert evil_note.is_visible()
    assert evil_note.inner_text() == "Not applicable to this model: the model has no dynamic routing"
    # ... and a result missing at one step says that instead (its class capsules fail at 0-0)
    page.select_option("[data-rg-input-picker]", "test-0")
    page.select_option("[data-rg-panel-picker]", "class_capsules")
    assert not evil_note.is_visible()
    page.locator("[data-rg-step-slider]").focus()
    page.keyboard.press("Home")
    assert evil_note.is_visible()
    assert evil_note.inner_text() == "Not computed for this step and input."
    page.keyboard.press("End")
    page.select_option("[data-rg-input-picker]", "test-2")
    page.select_option("[data-rg-panel-picker]", "rpv-original")
    page.goto(base_url + "models/MNIST_Demo/filmstrip.html")
    strip = page.locator("[data-rg-step-card] img[data-rg='img']")
    assert strip.count() == 3
    assert [("/%s/" % s) in strip.nth(i).get_attribute("src")
            for i, s in enumerate(["0-0", "1-10", "2-20"])] == [True] * 3
    assert "rpv-original.png" in strip.nth(0).get_attribute("src")   # technique persisted

    # search (Material runs it in a Web Worker over HTTP)
    page.goto(base_url + "index.html")
    _search(page, "filmstrip")

    rec.check((base_url,))


def _hover_chart(page, chart) -> str:
    """Move the pointer over the middle of a drawn chart; the tooltip's text."""
    plot = chart.locator("svg .mark-line path").first
    plot.wait_for(state="attached")
    chart.scroll_into_view_if_needed()
    box = chart.locator("svg").first.bounding_box()
    for share in (0.5, 0.55):
        page.mouse.move(box["x"] + box["width"] * share, box["y"] + box["height"] * 0.35)
    tooltip = page.locator("#vg-tooltip-element")
    tooltip.wait_for(state="visible")
    return tooltip.inner_text()


@pytest.mark.browser
@pytest.mark.slow
def test_live_charts_from_file_url(context, site):
    """The overview's and Compare's charts are drawn by the bundled vega-embed from file:// (no
    request leaves the disk): the pointer shows each series' value, the controls redraw them,
    and Compare's runs table sorts by a column."""
    rec = Recorder(context)
    page = context.new_page()
    page.goto((site / "models" / "MNIST_Demo" / "index.html").resolve().as_uri())
    charts = page.locator("[data-rg-chart]")
    assert charts.count() == 2
    text = _hover_chart(page, charts.nth(1))
    assert "validation accuracy" in text and "step" in text and "%" in text
    assert not page.locator("[data-rg-nojs]").first.is_visible()
    # the log scale redraws the charts (their y axes' labels change), and so does smoothing
    labels = ("() => [...document.querySelectorAll('[data-rg-chart] .role-axis-label text')]"
              ".map(e => e.textContent).join()")
    linear = page.evaluate(labels)
    page.check("[data-rg-log-scale]")
    page.wait_for_function(f"before => ({labels})() !== before", arg=linear)
    line = "() => document.querySelector('[data-rg-chart] svg .mark-line path').getAttribute('d')"
    raw = page.evaluate(line)
    page.select_option("[data-rg-smoothing]", "0.1")      # a time-weighted EMA redraws the line
    page.wait_for_function(f"before => ({line})() !== before", arg=raw)

    page.goto((site / "compare.html").resolve().as_uri())
    overlay = page.locator("[data-rg-chart]")
    assert overlay.count() == 2
    text = _hover_chart(page, overlay.nth(0))
    assert "MNIST_Demo" in text and EVIL_MODEL in text        # the name as text, not markup
    table = page.locator("table.rg-runs")
    names = table.locator("tbody tr td:first-child a")
    assert names.all_inner_texts() == ["MNIST_Demo", EVIL_MODEL]
    page.click("table.rg-runs [data-rg-sort='2']")          # training images: not recorded last
    page.click("table.rg-runs [data-rg-sort='8']")          # parameters, ascending
    assert names.all_inner_texts() == [EVIL_MODEL, "MNIST_Demo"]
    assert table.locator("th").nth(8).get_attribute("aria-sort") == "ascending"
    rec.check(("file://",))


@pytest.mark.browser
@pytest.mark.slow
def test_model_picker_and_the_sliders_place_in_the_tab_order(context, site):
    """Tab's first stop leads to the step slider, which shows a focus ring; the model picker
    opens the same page of another model (its overview when it lacks the page)."""
    page = context.new_page()
    page.goto((site / "models" / "MNIST_Demo" / "decoder.html").resolve().as_uri())
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.classList.contains('rg-skip')")
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.hasAttribute('data-rg-step-slider')")
    page.keyboard.press("ArrowLeft")                      # keyboard focus: the ring shows
    ring = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert ring == "solid"
    picker = page.locator("[data-rg-model-picker]")
    assert picker.is_visible()
    options = picker.locator("option").all_inner_texts()
    assert options == ["MNIST_Demo", f"{EVIL_MODEL} (overview)"]     # it has no decoder
    page.goto((site / "models" / "MNIST_Demo" / "conv.html").resolve().as_uri())
    page.select_option("[data-rg-model-picker]", index=1)
    page.wait_for_url("**/conv.html*")
    assert page.locator("h1").first.inner_text().startswith(EVIL_MODEL)


@pytest.mark.browser
@pytest.mark.slow
def test_from_file_url(context, site):
    rec = Recorder(context)
    page = context.new_page()
    url = (site / "models" / "MNIST_Demo" / "conv.html").resolve().as_uri()
    page.goto(url)
    latest = _src(page, CONV_IMG)
    assert "/2-20/test-0/" in latest
    page.locator("[data-rg-step-slider]").focus()
    page.keyboard.press("Home")
    assert "/0-0/test-0/" in _src(page, CONV_IMG)
    page.select_option("[data-rg-input-picker]", "test-1")
    assert "/0-0/test-1/" in _src(page, CONV_IMG)
    page.goto((site / "models" / "MNIST_Demo" / "class-caps.html").resolve().as_uri())
    assert "/0-0/test-1/" in _src(page, '[data-rg-panel="rpv-modified"] img[data-rg="img"]')
    # search from file:// (Material's worker runs through reportgen's iframe shim)
    _search(page, "filmstrip")
    # the dataset panels' slider and the live decoder's scripts work from file:// too
    page.goto((site / "models" / "MNIST_Demo" / "analyses.html").resolve().as_uri())
    assert page.locator("[data-rg-no-analyses]").is_visible()       # 0-0 was chosen above
    page.goto((site / "models" / "MNIST_Demo" / "decoder.html").resolve().as_uri())
    page.locator("[data-ld-start]").click()             # the weights load on request
    page.wait_for_selector("[data-ld-app]:not([hidden])")
    assert page.locator("[data-ld-dim]").count() == 16
    # the 404 page is styled from disk too (its links are relative to the site folder)
    page.goto((site / "404.html").resolve().as_uri())
    assert page.evaluate("getComputedStyle(document.querySelector('.md-header')).position") \
        == "sticky"                                           # Material's stylesheet applies
    rec.check(("file://",))


@pytest.mark.parametrize("server", ["GitHub Pages (project page)", "reportgen serve"])
@pytest.mark.browser
@pytest.mark.slow
def test_the_404_page_works_at_any_depth(context, site, base_url, server):
    """A missing URL at any depth gets the site's 404 page with status 404, styled, its Home
    link to the site's Home and its navigation into the site."""
    with pages_like(site) if server.startswith("GitHub") else serve(site) as url:
        page = context.new_page()
        failed = []
        page.on("response", lambda r: r.status >= 400 and r.request.resource_type != "document"
                and failed.append(r.url))
        for missing in ("gone.html", "models/MNIST_Demo/gone/deeper/page.html",
                        "nowhere/else/at/all/"):
            failed.clear()
            response = page.goto(url + missing)
            assert response.status == 404 and page.url == url + missing
            # `reportgen serve` pins the page to its root: no failed request at all; on a host
            # that serves the page as it is, finding the root costs at most one failed probe
            # (the "/" above a project page), not one per folder of the missing URL
            probes = [u for u in failed if u.endswith("/assets/reportgen/reportgen.js")
                      and "/gone/" not in u and "/nowhere/" not in u]
            if server.startswith("GitHub"):
                assert len(probes) <= 1, (missing, failed)
            else:
                assert not failed, (missing, failed)
            assert page.evaluate("getComputedStyle(document.querySelector('.md-header'))"
                                 ".position") == "sticky"            # Material's stylesheet
            home = page.locator("a.md-header__button.md-logo").evaluate("a => a.href")
            assert home == url + "index.html", (missing, home)
            assert page.locator("script[src$='reportgen.js']").evaluate("s => s.src") == \
                url + "assets/reportgen/reportgen.js"
        page.locator("a.md-header__button.md-logo").click()
        page.wait_for_url(url + "index.html")
        assert page.locator("[data-rg-page]").count() == 1          # Home itself


@pytest.mark.browser
@pytest.mark.slow
def test_quantitative_analyses_follow_the_slider(context, base_url):
    rec = Recorder(context)
    page = context.new_page()
    page.goto(base_url + "models/MNIST_Demo/analyses.html")
    affine = '[data-rg-step-panels] [data-rg-panel="affine_robustness"]'
    semantics = '[data-rg-step-panels] [data-rg-panel="capsule_semantics"]'
    note = page.locator("[data-rg-no-analyses]")
    trend = _src(page, '#trend-affine_robustness img[data-rg="img"]')
    assert "/2-20/dataset/" in _src(page, affine + ' img[data-rg="img"]')
    assert not note.is_visible()
    more = page.locator(semantics + ' [data-rg="more"]')
    assert more.is_visible() and more.locator("img").count() == 1
    # one step back: 1-10 has the robustness panel but not capsule semantics
    page.locator("[data-rg-step-prev]").click()
    assert page.locator("[data-rg-step-value]").inner_text() == "1-10"
    assert "/1-10/dataset/" in _src(page, affine + ' img[data-rg="img"]')
    links = page.locator(affine + ' [data-rg="downloads"] a')
    assert links.all_inner_texts() == ["PNG", "SVG", "PDF", "JSON", "CSV"]
    assert all("/1-10/dataset/" in links.nth(i).get_attribute("href") for i in range(5))
    assert page.locator(semantics + ' [data-rg="missing"]').is_visible()
    assert "--analyses all" in page.locator(semantics + ' [data-rg="missing"]').inner_text()
    assert not note.is_visible()
    # 0-0 has none: the page says so, no figure is shown; the trend plot stays
    page.locator("[data-rg-step-slider]").focus()
    page.keyboard.press("Home")
    assert note.is_visible()
    assert note.inner_text() == "Not computed at this step (build with --analyses all)."
    assert not page.locator(affine + ' img[data-rg="img"]').is_visible()
    assert not page.locator("[data-rg-step-panels]").is_visible()   # one note, not one per card
    assert _src(page, '#trend-affine_robustness img[data-rg="img"]') == trend
    # the choice carries over to the other pages and back
    page.goto(base_url + "models/MNIST_Demo/conv.html")
    assert "/0-0/test-0/" in _src(page, CONV_IMG)
    page.goto(base_url + "models/MNIST_Demo/analyses.html")
    assert note.is_visible() and not more.is_visible()
    # the last step again: the panel of two figures, its downloads grouped by figure
    page.locator("[data-rg-step-slider]").focus()
    page.keyboard.press("End")
    assert not note.is_visible() and more.is_visible()
    assert "/2-20/dataset/capsule_semantics-compactness.png" in more.locator("img") \
        .get_attribute("src")
    assert page.locator(semantics + " .rg-download-label").all_inner_texts() == [
        "dimension variance", "compactness", "numbers"]
    # the Decoder page's live decoder starts with the fixture's random decoder
    page.goto(base_url + "models/MNIST_Demo/decoder.html")
    page.locator("[data-ld-start]").click()             # the weights load on request
    page.wait_for_selector("[data-ld-app]:not([hidden])")
    assert "500 evaluation images" in page.locator("[data-ld-std-note]").inner_text()
    page.locator("[data-rg-step-slider]").focus()
    page.keyboard.press("Home")
    page.wait_for_function("document.querySelector('[data-ld-std-note]').textContent"
                           ".includes('chosen inputs')")
    rec.check((base_url,))


@pytest.mark.browser
@pytest.mark.slow
def test_the_untrained_banner_follows_the_slider(browser, tmp_path):
    """A step that predicts one class (here MNIST_Demo's 0-0) has a banner on every page of the
    model, shown while that step is chosen."""
    from reportgen.pages.render import build_site, render_site
    from site_fixture import make_site

    project = tmp_path / "project"
    site = make_site(project / "docs")
    untrained = site.models[0].steps[0]
    untrained.confusion_matrix = [[10 if j == 4 else 0 for j in range(10)] for _ in range(10)]
    render_site(site, project / "docs")
    built = build_site(project, tmp_path / "site", strict=True)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(5000)
    rec = Recorder(context)
    with serve(built) as base:
        page = context.new_page()
        banner = page.locator(".rg-untrained")
        page.goto(base + "models/MNIST_Demo/conv.html")
        _drawn(page)
        assert banner.count() == 1 and not banner.is_visible()        # 2-20 is shown
        page.locator("[data-rg-step-slider]").focus()
        page.keyboard.press("Home")
        assert banner.is_visible()
        assert banner.inner_text().startswith("This step predicts one class: its analyses "
                                              "describe an untrained network (step 0-0: class 4")
        for other in ("index.html", "analyses.html", "decoder.html"):    # the choice follows
            page.goto(base + "models/MNIST_Demo/" + other)
            _drawn(page)
            assert banner.is_visible(), other
        page.locator("[data-rg-step-slider]").focus()
        page.keyboard.press("End")
        assert not banner.is_visible()
        page.keyboard.press("Home")
        page.goto(base + "models/MNIST_Demo/filmstrip.html")
        assert banner.is_visible()                   # every step at once: always listed
    rec.check((base,))
    context.close()


def _search(page, term: str) -> None:
    """Type into Material's search box until results show (the index loads asynchronously;
    a query typed before it is ready is not re-run)."""
    page.locator("label.md-search__icon, .md-search__input").first.click()
    box = page.locator(".md-search__input")
    for _ in range(20):
        box.fill("")
        box.press_sequentially(term)
        try:
            page.wait_for_selector(".md-search-result__item", timeout=250)
            return
        except Exception:  # playwright's TimeoutError: not ready yet
            continue
    raise AssertionError(f"search for {term!r} showed no results")


def page_slug(name: str) -> str:
    from reportgen.pages.render import model_slug

    return model_slug(name)


@pytest.mark.browser
@pytest.mark.slow
def test_every_page_fits_a_phone(browser, base_url, site):
    """At 390 px no page scrolls sideways (wide tables stack, panels shrink) and the sticky
    controls take at most ~12% of a 390x844 screen."""
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html")
                   if "search" not in p.relative_to(site).parts and p.name != "404.html")
    kinds = {"index.html", "compare.html"} | {p.rsplit("/", 1)[-1] for p in pages}
    assert {"filmstrip.html", "analyses.html", "conv.html", "decoder.html"} <= kinds
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        for rel in pages:
            page.goto(base_url + rel)
            page.wait_for_load_state("load")
            width = page.evaluate("document.scrollingElement.scrollWidth")
            assert width <= 390, f"{rel} scrolls sideways: {width} px wide"
            controls = page.locator("[data-rg-controls]")
            if controls.count() and controls.first.is_visible():
                height = controls.first.bounding_box()["height"]
                assert height <= 0.12 * 844, f"{rel}: sticky controls {height:.0f} px tall"
                # and every control shows its label (it was hidden at this width)
                labels = page.evaluate("""() => [...document.querySelectorAll(
                    '[data-rg-controls] .rg-control-label')].map(l => [l.textContent.trim(),
                    l.getBoundingClientRect().width, l.getBoundingClientRect().height])""")
                assert labels and all(w >= 20 and h >= 8 for _, w, h in labels), (rel, labels)
        page.goto(base_url + "index.html")
        # Home's techniques table stacks into cards: a row is no taller than a phone screen.
        rows = page.locator("table.rg-techniques tbody tr")
        assert rows.count() > 3
        tallest = max(rows.nth(i).bounding_box()["height"] for i in range(rows.count()))
        assert tallest < 844, f"a techniques row is {tallest:.0f} px tall"
    finally:
        context.close()


@pytest.mark.browser
@pytest.mark.slow
def test_enlarge_overlay_from_file_url(context, site):
    """A figure's link opens the image large in an overlay (whole-factor nearest-neighbour
    scaling) instead of the bare file, from file:// too; Esc, a click and the close button
    close it, the keyboard opens it and Tab stays inside it."""
    rec = Recorder(context)
    page = context.new_page()
    url = (site / "models" / "MNIST_Demo" / "conv.html").resolve().as_uri()
    page.goto(url)
    _drawn(page)
    link = page.locator('[data-rg-panel="conv_feature_maps"] a[data-rg-enlarge]')
    src = link.get_attribute("href")
    overlay = page.locator("[data-rg-lightbox]")
    link.click()
    assert overlay.is_visible() and page.url == url              # no navigation
    big = overlay.locator("img")
    page.wait_for_function("document.querySelector('[data-rg-lightbox] img').style.width")
    size = big.evaluate("i => [i.naturalWidth, i.naturalHeight, i.getBoundingClientRect().width,"
                        " i.getBoundingClientRect().height, getComputedStyle(i).imageRendering]")
    natural_w, natural_h, shown_w, shown_h, rendering = size
    assert big.get_attribute("src") == src and rendering == "pixelated"
    factor = shown_w / natural_w
    assert factor >= 1 and factor == int(factor) and shown_h == natural_h * factor
    assert shown_w <= 1280 and shown_h <= 900
    assert page.evaluate("document.activeElement.classList.contains('rg-lightbox-close')")
    page.keyboard.press("Tab")                                   # the file link, then back
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.classList.contains('rg-lightbox-close')")
    page.keyboard.press("Escape")
    assert overlay.count() == 0
    assert page.evaluate("document.activeElement.getAttribute('data-rg-enlarge')") == ""
    page.keyboard.press("Enter")                                 # from the focused link
    assert overlay.is_visible()
    overlay.locator(".rg-lightbox-close").click()
    assert overlay.count() == 0
    # a small image (the 28x28 input) is scaled up by a whole factor; a click anywhere closes
    page.locator("[data-rg-input-card] a[data-rg-enlarge]").click()
    page.wait_for_function("document.querySelector('[data-rg-lightbox] img').style.width")
    assert overlay.locator("img").evaluate("i => i.getBoundingClientRect().width / "
                                           "i.naturalWidth") >= 10
    page.mouse.click(5, 5)
    assert overlay.count() == 0
    # the further figures of a dataset panel, also after the slider redrew them
    page.goto((site / "models" / "MNIST_Demo" / "analyses.html").resolve().as_uri())
    page.locator("[data-rg-step-slider]").focus()
    page.keyboard.press("End")
    page.locator('[data-rg-panel="capsule_semantics"] .rg-more-figure a').first.click()
    assert overlay.is_visible()
    page.keyboard.press("Escape")
    rec.check(("file://",))


@pytest.mark.browser
@pytest.mark.slow
def test_a_table_wider_than_its_column_shows_that_it_scrolls(context, site):
    """At 1280 px no table hides columns behind a scroll without a cue: one that does not fit
    sits in a scrolling box that draws a shadow at the edge where more of it lies."""
    page = context.new_page()
    for path in ("index.html", "compare.html", "models/MNIST_Demo/index.html"):
        page.goto((site / path).resolve().as_uri())
        hidden = page.evaluate("""() => [...document.querySelectorAll('table')]
            .filter(t => t.scrollWidth > t.parentElement.clientWidth + 1)
            .map(t => {
              const box = t.parentElement, style = getComputedStyle(box);
              return [t.className, box.className, style.overflowX,
                      style.backgroundImage.includes('radial-gradient'),
                      style.backgroundAttachment];
            })""")
        for table, box, overflow, shadow, attachment in hidden:
            assert "rg-scroll" in box and overflow == "auto", (path, table, box)
            assert shadow and "local" in attachment, (path, table, attachment)
