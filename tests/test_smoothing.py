"""The live charts' smoothing (templates/assets/smoothing.js), run in Debian's Chromium: a
time-weighted EMA over training images seen. It equals the reference code W&B publishes for
its time-weighted EMA (docs.wandb.ai, "Smooth line plots", TWEMA) on an uneven step grid, and
TensorBoard's debiased EMA (tensorboard/components/vz_line_chart2/line-chart.ts,
resmoothDataset) on an even one; and unlike a mean over saved steps, a burst of close steps
does not outweigh a long stretch of few."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from browser_support import CHROMIUM, chromium

pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")]

SCRIPT = Path(__file__).resolve().parents[1] / "templates" / "assets" / "smoothing.js"

# W&B's sample code for its time-weighted EMA, as its docs print it (VIEWPORT_SCALE and
# rangeOfX are the chart's: any positive numbers)
WANDB = """(xValues, yValues, smoothingParam, rangeOfX, VIEWPORT_SCALE) => {
  const smoothingWeight = Math.min(Math.sqrt(smoothingParam || 0), 0.999);
  let lastY = yValues.length > 0 ? 0 : NaN;
  let debiasWeight = 0;
  return yValues.map((yPoint, index) => {
    const prevX = index > 0 ? index - 1 : 0;
    const changeInX = ((xValues[index] - xValues[prevX]) / rangeOfX) * VIEWPORT_SCALE;
    const smoothingWeightAdj = Math.pow(smoothingWeight, changeInX);
    lastY = lastY * smoothingWeightAdj + yPoint;
    debiasWeight = debiasWeight * smoothingWeightAdj + 1;
    return lastY / debiasWeight;
  });
}"""


def _tensorboard(values, factor):
    """TensorBoard's resmoothDataset: last = last * f + (1 - f) * y, debiased by 1 - f^n."""
    last, out = 0.0, []
    for n, y in enumerate(values, start=1):
        last = last * factor + (1 - factor) * y
        out.append(last / (1 - factor ** n))
    return out


@pytest.fixture(scope="module")
def page():
    with chromium() as browser:
        tab = browser.new_page()
        tab.set_content("<html><body></body></html>")
        tab.add_script_tag(content=SCRIPT.read_text())
        yield tab


def test_it_equals_wandb_on_uneven_steps_and_tensorboard_on_even_ones(page):
    rng = np.random.default_rng(0)
    # saved every 100 images for a while, then every 1,000, then one step at the end
    xs = [0, 100, 200, 300, 400, 1400, 2400, 3400, 9000]
    ys = rng.uniform(0.2, 0.9, len(xs)).round(4).tolist()
    half_life, scale = 500.0, 1000.0
    span = xs[-1] - xs[0]
    # W&B's weight w per (dx / range * scale) decays as 0.5 per half-life: w = 0.5^(range/(h s))
    weight = 0.5 ** (span / (half_life * scale))
    ours = page.evaluate("a => reportgenSmoothing.twema(a[0], a[1], a[2])", [xs, ys, half_life])
    wandb = page.evaluate(f"a => ({WANDB})(a[0], a[1], a[2], a[3], a[4])",
                          [xs, ys, weight ** 2, span, scale])
    np.testing.assert_allclose(ours, wandb, rtol=1e-12)
    even = list(range(0, 900, 100))
    ours_even = page.evaluate("a => reportgenSmoothing.twema(a[0], a[1], a[2])",
                              [even, ys, half_life])
    np.testing.assert_allclose(ours_even, _tensorboard(ys, 0.5 ** (100 / half_life)),
                               rtol=1e-12)
    assert ours[0] == ys[0]                            # debiased: the first value is itself


def test_a_burst_of_close_steps_does_not_outweigh_a_long_stretch(page):
    """Nine steps at 0.2 in the first 1% of the run, then one at 0.8 after a long stretch: a
    mean of the last 3 saved steps still reads 0.4; the EMA with a half-life of 10% of the
    run weighs each burst step by 0.5^9.9 (the sum of the weights, exactly) and reads 0.795."""
    xs = [i * 10 for i in range(9)] + [10_000]
    ys = [0.2] * 9 + [0.8]
    smoothed = page.evaluate("a => reportgenSmoothing.twema(a[0], a[1], a[2])",
                             [xs, ys, 1000.0])
    weights = 0.5 ** ((10_000 - np.asarray(xs, float)) / 1000.0)
    assert smoothed[-1] == pytest.approx(float(weights @ ys / weights.sum()), rel=1e-12)
    assert abs(smoothed[-1] - 0.8) < 0.006 and np.mean(ys[-3:]) == pytest.approx(0.4)
    # a NaN (a step without the value) is shown as it is and skipped by the average
    gap = page.evaluate("a => reportgenSmoothing.twema(a[0], a[1], a[2])",
                        [[0, 1, 2], [1.0, None, 3.0], 1.0])
    assert gap[1] is None and gap[2] == pytest.approx((1.0 * 0.25 + 3.0) / 1.25)


def test_rows_of_every_series_are_smoothed_apart_over_the_charts_x_range(page):
    rows = [{"series": s, "x": x, "value": v} for s, pts in
            (("a", [(0, 1.0), (50, 3.0), (100, 2.0)]), ("b", [(100, 5.0), (0, 7.0)]))
            for x, v in pts]
    out = page.evaluate("a => reportgenSmoothing.smoothRows(a[0], a[1], 'smoothed')",
                        [rows, 0.5])
    by = {(r["series"], r["x"]): r["smoothed"] for r in out}
    expected_a = page.evaluate("a => reportgenSmoothing.twema(a[0], a[1], a[2])",
                               [[0, 50, 100], [1.0, 3.0, 2.0], 50.0])
    assert [by[("a", x)] for x in (0, 50, 100)] == expected_a
    assert by[("b", 0)] == 7.0 and by[("b", 100)] == pytest.approx((7.0 * 0.25 + 5.0) / 1.25)
    assert json.dumps(out)                              # plain rows, ready for the spec

