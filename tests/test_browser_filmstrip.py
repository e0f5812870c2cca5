"""The training filmstrip in a real browser: frames in one row, the shared-scale frames shown by
default, the box switches every frame to its own scale, one caption for the strip."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from site_fixture import make_site

from browser_support import CHROMIUM, chromium, serve
pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")]

FRAMES = "[data-rg-step-card] img[data-rg='img']"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    from reportgen.pages.render import build_site, render_site

    root = tmp_path_factory.mktemp("filmstrip")
    docs = root / "project" / "docs"
    data = make_site(docs)
    # Every per-input panel gets a shared-scale frame (a copy of its PNG).
    for step in (s for m in data.models for s in m.steps):
        for panels in step.input_panels.values():
            for i, panel in enumerate(panels):
                png = panel.figures[0]
                shared_path = png.path.replace(".png", "-shared.png")
                shutil.copyfile(docs / png.path, docs / shared_path)
                shared = replace(panel, caption=f"shared scale caption {step.step}. Details: "
                                                f"shared details {step.step}",
                                 figures=[replace(png, path=shared_path)])
                panels[i] = replace(panel, shared=shared, shared_range=(0.0, 0.79))
    render_site(data, docs)
    return build_site(root / "project", root / "site", strict=True)


def test_filmstrip_strip_and_shared_scale(site):
    with serve(site) as base, chromium() as browser:
        for width in (1280, 390):
            context = browser.new_context(viewport={"width": width, "height": 844})
            page = context.new_page()
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            model = next(p for p in sorted(site.glob("models/*/filmstrip.html")))
            page.goto(base + model.relative_to(site).as_posix())
            page.wait_for_load_state("load")
            frames = page.locator(FRAMES)
            assert frames.count() >= 2
            srcs = [frames.nth(i).get_attribute("src") for i in range(frames.count())]
            assert all(s.endswith("-shared.png") for s in srcs), srcs
            tops = {round(frames.nth(i).bounding_box()["y"]) for i in range(frames.count())}
            assert len(tops) == 1                                   # one row
            assert page.evaluate("document.scrollingElement.scrollWidth") <= width
            toggle = page.locator("[data-rg-scale-toggle]")
            assert toggle.is_visible() and "0.79" in toggle.inner_text()
            caption = page.locator("[data-rg-strip-caption]")
            assert caption.count() == 1
            assert caption.inner_text().startswith("shared scale caption")
            assert all(not c.is_visible() for c in page.locator(".rg-filmstrip .rg-caption").all())
            # the details once, below the strip: the chosen step's
            assert all(not c.is_visible()
                       for c in page.locator(".rg-filmstrip .rg-caption-more").all())
            more = page.locator("[data-rg-strip-more] details")
            assert more.count() == 1 and more.is_visible()
            more.locator("summary").click()
            current = page.locator(".rg-strip-item.rg-current").get_attribute("data-rg-step-card")
            assert f"shared details {current}" in more.inner_text()
            page.locator("[data-rg-shared-scale]").uncheck()
            srcs = [frames.nth(i).get_attribute("src") for i in range(frames.count())]
            assert not any(s.endswith("-shared.png") for s in srcs), srcs
            assert not caption.inner_text().startswith("shared scale caption")
            assert not errors, errors
            context.close()


def test_frames_without_the_chosen_technique_name_it(site):
    """A step without the chosen technique's result says so under that technique's title,
    not the title of the technique chosen before (the second model's class capsules failed
    at 0-0)."""
    from reportgen.pages.render import model_slug
    from site_fixture import EVIL_MODEL

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto((site / "models" / model_slug(EVIL_MODEL) / "filmstrip.html").resolve().as_uri())
        page.select_option("[data-rg-panel-picker]", "conv_feature_maps")
        page.select_option("[data-rg-panel-picker]", "class_capsules")
        titles = page.locator("[data-rg-step-card] [data-rg='title']").all_inner_texts()
        assert titles == ["Class capsules"] * 3, titles
        first = page.locator('[data-rg-step-card="0-0"]')
        assert first.locator("[data-rg='missing']").inner_text() == \
            "Not computed for this step and input."
        # a technique drawn at every step: every frame has its picture and its title
        page.select_option("[data-rg-panel-picker]", "conv_feature_maps")
        assert page.locator("[data-rg-step-card] [data-rg='title']").all_inner_texts() == \
            ["Conv feature maps"] * 3
        assert not first.locator("[data-rg='missing']").is_visible()
