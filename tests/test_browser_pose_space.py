"""The pose-space chart in headless Chromium from file://, on a site `reportgen build` made of
a tiny trained CapsNet: the live chart replaces its picture, hovering a point shows that
evaluation image in the tooltip with its values, the step slider redraws the chart for another
step (its own projection), and a point whose image is one of the model's inputs opens it."""

from __future__ import annotations

import base64
import io
import json
import re

import numpy as np
import pytest
from browser_support import CHROMIUM, chromium

pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="Debian's chromium is not installed (apt install chromium)")

CHART = "[data-rg-pose-space]:not([hidden]) svg .mark-symbol.role-mark path"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from conftest import TINY_PARAMS
    from family_nets import write_model
    from test_training import _tiny_data

    from reportgen.catalog import Catalog
    from reportgen.commands.build import BuildOptions, build
    from reportgen.training.trainer import TrainOptions, train

    tmp = tmp_path_factory.mktemp("pose_space")
    models = tmp / "models"
    write_model(models, "Tiny", TINY_PARAMS, _tiny_data(tmp / "toy.npz", n=60))
    train(Catalog(models).get("Tiny"), TrainOptions(limit=20))     # steps 0-0, 1-1, 1-2
    summary = build(Catalog(models), BuildOptions(
        steps="all", images="test:0-1", analyses="all", eval_images=12,
        techniques=("pose_space", "predictions"), cache_dir=str(tmp / "cache"),
        project_dir=str(tmp / "mkdocs"), site_dir=str(tmp / "site")))
    assert not summary.failed
    return tmp / "site"


def _rows(site, step):
    text = (site / "artifacts" / "Tiny" / step / "dataset" / "pose_space.js").read_text()
    return json.loads(text[text.index("= {") + 2:text.rindex(";\n})")])["spec"]["data"]["values"]


@pytest.mark.slow
@pytest.mark.browser
def test_hovering_a_point_shows_its_image(site):
    from PIL import Image

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto((site / "models" / "Tiny" / "analyses.html").as_uri())
        page.wait_for_selector(CHART, timeout=30_000)
        card = page.locator("[data-rg-panel=pose_space]:has([data-rg-pose-space])")
        assert page.locator("[data-rg-pose-space]").count() == 1    # not on the trend's card
        assert card.locator('[data-rg="link"]').is_hidden()      # the live chart took its place
        box = page.locator("[data-rg-pose-space]")
        assert box.get_attribute("data-ps-step") == "1-2"
        rows = _rows(site, "1-2")
        points = page.locator(CHART)
        assert points.count() == len(rows) == 12
        page.evaluate("document.querySelector('[data-rg-pose-space]')"
                      ".scrollIntoView({block: 'center'})")
        points.nth(0).hover(force=True)
        tooltip = page.locator("#vg-tooltip-element")
        page.wait_for_selector("#vg-tooltip-element img", timeout=10_000)
        src = tooltip.locator("img").get_attribute("src")
        assert src.startswith("data:image/png;base64,")
        assert page.evaluate("document.querySelector('#vg-tooltip-element img').naturalWidth") \
            == 12
        # the tooltip's image is one evaluation image's and its values are that row's
        text = tooltip.inner_text()
        shown = [r for r in rows if r["image"] == src]
        assert len(shown) >= 1
        row = shown[0]
        pc1 = re.search(r"PC1\s+(\S+)", text).group(1).replace("\u2212", "-")
        assert float(pc1) == pytest.approx(row["pc1"], rel=1e-3)     # 4 significant digits
        assert row["true"] in text and row["predicted"] in text
        pixels = np.asarray(Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))))
        assert pixels.shape == (12, 12)

        # the slider moves the chart to another step: that step's own projection
        page.locator("[data-rg-step-slider]").focus()
        page.keyboard.press("Home")
        page.wait_for_function("document.querySelector('[data-rg-pose-space]')"
                               ".getAttribute('data-ps-step') === '0-0'", timeout=20_000)
        page.wait_for_selector(CHART, timeout=20_000)
        assert _rows(site, "0-0") != rows
        assert errors == []


@pytest.mark.slow
@pytest.mark.browser
def test_a_point_whose_image_is_an_input_opens_its_page(site):
    index = json.loads((site / "models" / "Tiny" / "index.json").read_text())
    digests = {i["digest"]: i["key"] for i in index["inputs"]}
    rows = _rows(site, "1-2")
    linked = [i for i, r in enumerate(rows) if r["digest"] in digests]
    assert linked                       # test #0 and #1 are among the evaluation images
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.goto((site / "models" / "Tiny" / "analyses.html").as_uri())
        page.wait_for_selector(CHART, timeout=30_000)
        box = page.locator("[data-rg-pose-space]")
        assert box.get_attribute("data-ps-linked") == str(len(linked))
        page.evaluate("document.querySelector('[data-rg-pose-space]')"
                      ".scrollIntoView({block: 'center'})")
        # Vega draws the points in data order (misclassified last, `order`): find the row's
        # point by its tooltip
        key = digests[rows[linked[0]]["digest"]]
        points = page.locator(CHART)
        for n in range(points.count()):
            points.nth(n).hover(force=True)
            page.wait_for_selector("#vg-tooltip-element img", timeout=10_000)
            if page.locator("#vg-tooltip-element img").get_attribute("src") == \
                    rows[linked[0]]["image"]:
                break
        with page.expect_navigation(timeout=20_000):
            points.nth(n).click(force=True)
        assert page.url.endswith(f"?input={key}")
