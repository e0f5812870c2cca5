"""The draw panel in headless Chromium, opened from file:// on a real build of the tiny trained
CapsNet: synthetic strokes update the prediction; the page's centring equals NumPy's on the same
ink; its scores, routing weights and reconstruction equal Keras's on the input it shows within
1e-4; the check against Keras's outputs that the page prints is within 1e-4; nothing is
requested from outside the site; the time from the last stroke to the new prediction is
measured. The drawn digit appears in the pose-space chart of the analyses page, projected on
the step's stored axes exactly as Python projects it."""

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
                        techniques=("predictions", "class_capsules", "draw_panel",
                                                 "pose_space"),
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


def _stroke(page, points):
    """A stroke on the pad through `points` (fractions of its width and height)."""
    box = page.locator("[data-dp-pad]").bounding_box()
    (x, y), rest = points[0], points[1:]
    page.mouse.move(box["x"] + x * box["width"], box["y"] + y * box["height"])
    page.mouse.down()
    for x, y in rest:
        page.mouse.move(box["x"] + x * box["width"], box["y"] + y * box["height"])
    page.mouse.up()


def _projection(site: Path, step: str):
    """The step's stored mean and axes, as its pose_space.js carries them (float32)."""
    import base64

    text = (site / "artifacts" / "Tiny" / step / "dataset" / "pose_space.js").read_text("utf-8")
    record = json.loads(text[text.index("= {") + 2:text.rindex(";\n})")])["projection"]
    floats = [np.frombuffer(base64.b64decode(record[k]), "<f4") for k in ("mean", "components")]
    return floats[0], floats[1].reshape(2, -1)


def test_the_drawn_digit_appears_in_the_pose_space_chart(built):
    from reportgen.catalog import Catalog
    from reportgen.techniques.draw_panel.export import exported_outputs, keras_value
    from reportgen.techniques.pose_space.numbers import project

    project_dir, models = built
    site = project_dir / "site"
    layer_file = _model_page(site)
    chart_file = site / "models" / "Tiny" / "analyses.html"
    chart_selector = "[data-rg-pose-space]:not([hidden]) svg .mark-symbol.role-mark path"
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1100, "height": 900})
        requests, errors = [], []
        context.on("request", lambda r: requests.append(r.url))
        context.on("console", lambda m: m.type == "error" and errors.append(m.text))
        context.on("weberror", lambda e: errors.append(str(e.error)))
        chart = context.new_page()
        chart.goto(chart_file.as_uri())
        chart.wait_for_selector(chart_selector, timeout=30_000)
        chart.wait_for_function("document.querySelector('[data-rg-pose-space]')"
                                ".getAttribute('data-ps-drawn') === '0'", timeout=20_000)
        assert "Draw a digit in the draw panel" in chart.inner_text("[data-ps-drawn-note]")

        # the reader draws on a layer page open beside the chart: a bar, then a second stroke
        page = context.new_page()
        page.goto(layer_file.as_uri())
        page.locator("[data-dp-start]").click(timeout=30_000)
        page.wait_for_function("window.reportgenDrawPanel && window.reportgenDrawPanel.ready",
                               timeout=120_000)
        runs = lambda: int(chart.get_attribute("[data-rg-pose-space]", "data-ps-drawn-runs"))
        before = runs()
        _stroke(page, [(0.15 + 0.07 * k, 0.22) for k in range(11)])
        chart.wait_for_function(f"Number(document.querySelector('[data-rg-pose-space]')"
                                f".getAttribute('data-ps-drawn-runs')) > {before}",
                                timeout=30_000)
        first = chart.evaluate("window.reportgenPoseChart.drawn")
        _stroke(page, [(0.5, 0.2 + 0.06 * k) for k in range(10)])
        page.wait_for_timeout(600)          # the panel's run after the last stroke, and the chart's
        last = page.evaluate("window.reportgenDrawPanel.last")
        drawn = chart.evaluate("window.reportgenPoseChart.view.data('drawn')")
        timing = chart.evaluate("({ms: window.reportgenPoseChart.ms, "
                                "fromStroke: window.reportgenPoseChart.fromStroke})")
        assert chart.get_attribute("[data-rg-pose-space]", "data-ps-drawn") == "1"
        assert len(drawn) == 1 and drawn[0]["what"] == "your digit"
        assert (drawn[0]["pc1"], drawn[0]["pc2"]) != (first["pc1"], first["pc2"])
        assert chart.locator(chart_selector).count() == 12 + 1       # the diamond over them
        assert "your digit" in chart.inner_text("[data-ps-drawn-note]").lower()
        shot = project_dir / "pose_space_with_drawn_digit.png"
        chart.locator("[data-rg-pose-space]").screenshot(path=str(shot))

        # a chart page opened afterwards shows the same point (read on load)
        chart.reload()
        chart.wait_for_function("document.querySelector('[data-rg-pose-space]')"
                                ".getAttribute('data-ps-drawn') === '1'", timeout=30_000)
        reloaded = chart.evaluate("window.reportgenPoseChart.view.data('drawn')")
        # at a step without the draw panel (the first built) the note says where to draw
        step = chart.get_attribute("[data-rg-pose-space]", "data-ps-step")
        chart.locator("[data-rg-step-slider]").focus()
        chart.keyboard.press("Home")
        chart.wait_for_function("document.querySelector('[data-rg-pose-space]')"
                                f".getAttribute('data-ps-step') !== '{step}'", timeout=20_000)
        chart.wait_for_function("document.querySelector('[data-rg-pose-space]')"
                                ".getAttribute('data-ps-drawn') === '0'", timeout=20_000)
        assert f"appears here at step {step}" in chart.inner_text("[data-ps-drawn-note]")
        assert chart.evaluate("window.reportgenPoseChart.view.data('drawn').length") == 0
        context.close()
    assert not errors, errors
    outside = [u for u in requests if not u.startswith(("file:", "blob:", "data:", "about:"))]
    assert outside == []

    # Python: Keras's class poses of the input the panel showed, on the stored axes
    assert (site / "artifacts" / "Tiny" / step / "checkpoint" / "draw_panel.js").is_file()
    mean, components = _projection(site, step)
    net = Catalog(models).load("Tiny", step)
    image = np.asarray(last["input"], np.float32).reshape(1, 12, 12, 1)
    outputs = net.model(image, training=False)
    poses = keras_value(outputs, "poses", "class_capsules")
    np.testing.assert_allclose(np.asarray(last["poses"]), poses[0], atol=TOLERANCE)
    want = project(poses, mean, components)[0]
    got = np.array([drawn[0]["pc1"], drawn[0]["pc2"]])
    np.testing.assert_allclose(got, want, atol=TOLERANCE)
    np.testing.assert_allclose([reloaded[0]["pc1"], reloaded[0]["pc2"]], got, atol=0)
    numbers = site / "artifacts" / "Tiny" / step / "checkpoint" / "draw_panel.json"
    classes = json.loads(numbers.read_text("utf-8"))["classes"]
    scores = np.asarray(outputs[exported_outputs(net.description)["scores"]])[0]
    assert drawn[0]["predicted"] == classes[int(np.argmax(scores))]
    print(json.dumps({"largest_difference": float(np.abs(got - want).max()),
                      "chart_update_ms": timing["ms"], "stroke_to_chart_ms": timing["fromStroke"],
                      "screenshot": str(shot)}))
