"""The draw panel in headless Chromium, opened from file:// on a real build of the tiny trained
CapsNet: synthetic strokes update the prediction; the page's centring equals NumPy's on the same
ink; its scores, routing weights and reconstruction equal Keras's on the input it shows within
1e-4; the check against Keras's outputs that the page prints is within 1e-4; nothing is
requested from outside the site; the time from the last stroke to the new prediction is
measured."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from browser_support import CHROMIUM, chromium
from trained_tiny import copy_trained_tiny

pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
pytestmark = [pytest.mark.slow, pytest.mark.browser,
              pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed "
                                                          "(apt-get install chromium)")]
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from reportgen.commands.build import run_build
    from reportgen.techniques.draw_panel import runtime

    if runtime.installed_version() is None:
        pytest.skip(runtime.missing_reason())
    project = tmp_path_factory.mktemp("draw-panel")
    models = project / "models"
    copy_trained_tiny(tmp_path_factory, models / "Tiny")
    summary = run_build(models_dir=models, models="Tiny", steps="last", images="test:0-1",
                        techniques=("predictions", "class_capsules", "draw_panel"),
                        analyses="last", eval_images=12, site_dir=str(project / "site"),
                        cache_dir=str(project / "cache"))
    assert summary.ok
    return project, models


def _model_page(site: Path) -> Path:
    pages = [p for p in site.rglob("*.html") if "data-rg-draw-panel" in p.read_text("utf-8")]
    assert pages, "no page holds the draw panel"
    return pages[0]


def test_strokes_update_the_prediction_equal_to_keras_offline(built):
    from reportgen.catalog import Catalog
    from reportgen.techniques.draw_panel.centring import centre_drawing
    from reportgen.techniques.draw_panel.export import exported_outputs

    project, models = built
    page_file = _model_page(project / "site")
    with chromium() as browser:
        context = browser.new_context()
        requests, errors = [], []
        context.on("request", lambda r: requests.append(r.url))
        context.on("console", lambda m: m.type == "error" and errors.append(m.text))
        context.on("weberror", lambda e: errors.append(str(e.error)))
        page = context.new_page()
        page.goto(page_file.as_uri())
        start = page.locator("[data-dp-start]")
        start.wait_for(state="visible", timeout=30_000)
        start.click()
        page.wait_for_function("window.reportgenDrawPanel && window.reportgenDrawPanel.ready",
                               timeout=120_000)
        check = float(page.get_attribute("[data-rg-draw-panel]", "data-dp-check"))
        assert check <= TOLERANCE
        assert "largest difference" in page.inner_text("[data-dp-agreement]")

        # a stroke: a horizontal bar across the upper third
        box = page.locator("[data-dp-pad]").bounding_box()
        runs = int(page.get_attribute("[data-rg-draw-panel]", "data-dp-runs") or 0)
        page.mouse.move(box["x"] + 0.15 * box["width"], box["y"] + 0.22 * box["height"])
        page.mouse.down()
        for k in range(1, 11):
            page.mouse.move(box["x"] + (0.15 + 0.07 * k) * box["width"],
                            box["y"] + 0.22 * box["height"])
        page.mouse.up()
        page.wait_for_function(f"Number(document.querySelector('[data-rg-draw-panel]')"
                               f".getAttribute('data-dp-runs')) > {runs}", timeout=30_000)
        page.wait_for_timeout(300)         # the run after the last stroke
        last = page.evaluate("window.reportgenDrawPanel.last")
        assert page.inner_text("[data-dp-prediction]").startswith("Prediction:")
        assert "after the last stroke" in page.inner_text("[data-dp-timing]")

        # the page's centring equals NumPy's on the same ink (a blob with soft edges)
        rng = np.random.default_rng(3)
        ink = np.zeros((60, 50))
        ink[12:40, 8:30] = rng.random((28, 22))
        ours = np.array(page.evaluate("([v, h, w]) => Array.from("
                                      "window.reportgenDrawPanel.centreInk(v, h, w, 12))",
                                      [ink.ravel().tolist(), 60, 50])).reshape(12, 12)
        np.testing.assert_allclose(ours, centre_drawing(ink, 12), atol=1e-6)
        context.close()
    assert not errors, errors
    outside = [u for u in requests if not u.startswith(("file:", "blob:", "data:", "about:"))]
    assert outside == []

    # the page's outputs on the input it showed, against Keras's own
    net = Catalog(models).load("Tiny", "last")
    image = np.asarray(last["input"], np.float32).reshape(1, 12, 12, 1)
    keras_out = net.model(image, training=False)
    for name, source in exported_outputs(net.description).items():
        want = np.asarray(keras_out[source], np.float32).ravel()
        np.testing.assert_allclose(np.asarray(last[name], np.float32), want, atol=TOLERANCE,
                                   err_msg=name)
    # centring moves any horizontal bar to the middle rows (5-6 of 12): the toy data's class 1
    rows = np.nonzero(np.asarray(last["input"]).reshape(12, 12).max(axis=1) > 0.5)[0]
    assert set(rows) <= {4, 5, 6, 7}
    assert np.argmax(last["scores"]) == 1
    print(json.dumps({"ms_after_last_stroke": last["ms"], "check": check}))
