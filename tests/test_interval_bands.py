"""The trend and compare charts draw each plotted score's 95% interval where its summary records
one (reportgen.results.intervals): a shaded band under a line over steps (fill_between's
PolyCollection), a vertical error bar on a bar (a LineCollection), read back from the drawn
artists in data coordinates; none where the summary has no interval; the caption names the
method."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import to_rgb

from reportgen.techniques.base import RenderContext

CLASSES = [str(i) for i in range(10)]


def _captured(monkeypatch, module):
    """Render through `module`'s figure_pair, keeping the matplotlib figure and its caption
    instead of encoding them."""
    drawn = []

    def keep(fig, stem, caption, svg_size=True):
        drawn.append((fig, caption))
        return []

    monkeypatch.setattr(module, "figure_pair", keep)
    return drawn


def _entry(low, high, n, method):
    return {"low": low, "high": high, "n": n, "method": method}


def _band_ends(collection):
    """{x: (lowest y, highest y)} of a fill_between polygon's vertices."""
    ends = {}
    for path in collection.get_paths():
        for x, y in path.vertices:
            lo, hi = ends.get(round(float(x), 9), (np.inf, -np.inf))
            ends[round(float(x), 9)] = (min(lo, y), max(hi, y))
    return ends


def _segments(ax):
    """(x, low, high) of every vertical segment of the axes' LineCollections (error bars)."""
    found = []
    for collection in ax.collections:
        if isinstance(collection, LineCollection):
            for seg in collection.get_segments():
                assert seg[0][0] == pytest.approx(seg[1][0])          # vertical
                found.append((float(seg[0][0]), float(min(seg[0][1], seg[1][1])),
                              float(max(seg[0][1], seg[1][1]))))
    return sorted(found)


def _affine_summary(clean, mean, intervals):
    return {"images": 200, "clean_accuracy": clean, "rotation_values": [-30.0, 0.0, 30.0],
            "rotation_accuracy": [mean - 0.1, clean, mean + 0.1], "rotation_mean_accuracy": mean,
            **({"intervals": intervals} if intervals else {})}


def test_affine_trend_shades_each_interval_at_its_step(monkeypatch):
    from reportgen.techniques.affine_robustness import figures

    drawn = _captured(monkeypatch, figures)
    steps = [("1-10", _affine_summary(0.80, 0.60, {
                 "clean_accuracy": _entry(0.74, 0.85, 200, "Wilson"),
                 "rotation_mean_accuracy": _entry(0.55, 0.66, 200,
                                                  "BCa bootstrap over images")})),
             ("2-10", _affine_summary(0.90, 0.70, {
                 "clean_accuracy": _entry(0.85, 0.94, 200, "Wilson"),
                 "rotation_mean_accuracy": _entry(0.64, 0.75, 200,
                                                  "BCa bootstrap over images")}))]
    figures.render_trend(steps, None, RenderContext("M", "all", CLASSES))
    (fig, caption), = drawn
    ax = fig.axes[0]
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 2                                 # clean, rotation's mean
    clean, rotation = (_band_ends(b) for b in bands)
    assert clean == {0.0: pytest.approx((0.74, 0.85)), 1.0: pytest.approx((0.85, 0.94))}
    assert rotation == {0.0: pytest.approx((0.55, 0.66)), 1.0: pytest.approx((0.64, 0.75))}
    # each band in its line's colour, and no band in the legend
    lines = {line.get_label(): line.get_color() for line in ax.get_lines()}
    assert np.allclose(bands[1].get_facecolor()[0][:3],
                       to_rgb(lines["rotation (mean over sweep)"]))
    assert len(ax.get_legend_handles_labels()[0]) == len([k for k in lines if
                                                          not k.startswith("_")])
    assert "Shaded: 95% intervals, Wilson / BCa bootstrap over the 200 images." in caption


def test_affine_trend_without_intervals_draws_no_band(monkeypatch):
    from reportgen.techniques.affine_robustness import figures

    drawn = _captured(monkeypatch, figures)
    steps = [("1-10", _affine_summary(0.8, 0.6, None)), ("2-10", _affine_summary(0.9, 0.7, None))]
    figures.render_trend(steps, None, RenderContext("M", "all", CLASSES))
    (fig, caption), = drawn
    assert not [c for c in fig.axes[0].collections if isinstance(c, PolyCollection)]
    assert "95% interval" not in caption


def test_affine_compare_shades_the_sweep_per_value(monkeypatch):
    from reportgen.techniques.affine_robustness import figures

    drawn = _captured(monkeypatch, figures)
    sweep = {"rotation_accuracy": _entry([0.4, 0.85, 0.6], [0.6, 0.95, 0.8], [200] * 3,
                                         "Wilson")}
    figures.render_compare([("A", _affine_summary(0.9, 0.6, sweep)),
                            ("B", _affine_summary(0.9, 0.6, None))], None,
                           RenderContext("M", "all", CLASSES))
    (fig, caption), = drawn
    bands = [c for c in fig.axes[0].collections if isinstance(c, PolyCollection)]
    assert len(bands) == 1                                 # model B records none
    assert _band_ends(bands[0]) == {-30.0: pytest.approx((0.4, 0.6)),
                                    0.0: pytest.approx((0.85, 0.95)),
                                    30.0: pytest.approx((0.6, 0.8))}
    assert "Shaded: 95% intervals, Wilson over the 200 images." in caption


def test_vote_agreement_bars_carry_their_intervals(monkeypatch):
    from reportgen.techniques.vote_agreement import figures

    drawn = _captured(monkeypatch, figures)
    keys = [k for k, _ in figures.COSINES]
    a = {k: 0.5 + 0.1 * i for i, k in enumerate(keys)}
    a["intervals"] = {k: _entry(0.45 + 0.1 * i, 0.58 + 0.1 * i, 50, "BCa bootstrap over images")
                      for i, k in enumerate(keys)}
    b = {k: 0.3 for k in keys}                             # older: no intervals
    figures.render_compare([("A", a), ("B", b)], None, RenderContext("M", "all", CLASSES))
    (fig, caption), = drawn
    ax = fig.axes[0]
    # model A's bars sit left of each group's centre: x = group - width / 2, width 0.8 / 2
    assert _segments(ax) == [(pytest.approx(i - 0.2), pytest.approx(0.45 + 0.1 * i),
                              pytest.approx(0.58 + 0.1 * i)) for i in range(len(keys))]
    bars = sorted((p.get_x() + p.get_width() / 2, p.get_height()) for p in ax.patches)
    assert [x for x, _ in bars if x < 0] == [pytest.approx(-0.2)]   # the bar under the bar
    assert "Error bars: 95% intervals, BCa bootstrap over the 50 images." in caption


def test_vote_agreement_trend_bands_follow_lines_over_steps(monkeypatch):
    from reportgen.techniques.vote_agreement import figures

    drawn = _captured(monkeypatch, figures)
    key = figures.COSINES[0][0]
    steps = []
    for s, (low, high) in enumerate(((0.1, 0.3), (0.4, 0.5), (0.6, 0.9))):
        steps.append((f"{s}-10", {key: (low + high) / 2,
                                  "intervals": {key: _entry(low, high, 20, "BCa bootstrap over "
                                                                           "images")}}))
    figures.render_trend(steps, None, RenderContext("M", "all", CLASSES))
    (fig, _), = drawn
    bands = [c for c in fig.axes[0].collections if isinstance(c, PolyCollection)]
    assert len(bands) == 1                                 # the other cosines have none
    assert _band_ends(bands[0]) == {0.0: pytest.approx((0.1, 0.3)),
                                    1.0: pytest.approx((0.4, 0.5)),
                                    2.0: pytest.approx((0.6, 0.9))}


def test_affnist_compare_error_bars_at_each_bar(monkeypatch):
    from reportgen.techniques.affnist_benchmark import figures

    drawn = _captured(monkeypatch, figures)
    a = {"clean_accuracy": 0.99, "affnist_accuracy": 0.7,
         "intervals": {"clean_accuracy": _entry(0.98, 0.995, 1000, "Wilson"),
                       "affnist_accuracy": _entry(0.67, 0.73, 1000, "Wilson")}}
    b = {"clean_accuracy": 0.98, "affnist_accuracy": 0.6}
    figures.render_compare([("A", a), ("B", b)], None, RenderContext("M", "all", CLASSES))
    (fig, caption), = drawn
    ax = fig.axes[0]
    assert _segments(ax) == [(pytest.approx(-0.19), pytest.approx(0.98), pytest.approx(0.995)),
                             (pytest.approx(0.19), pytest.approx(0.67), pytest.approx(0.73))]
    centres = sorted(round(p.get_x() + p.get_width() / 2, 6) for p in ax.patches)
    assert {-0.19, 0.19} <= set(centres)                   # the bars the error bars sit on
    assert "Error bars: 95% intervals, Wilson over the 1,000 images." in caption


def test_routing_entropy_compare_deficit_bars_from_the_share_interval(monkeypatch):
    from reportgen.techniques.routing_entropy import figures

    drawn = _captured(monkeypatch, figures)
    log_k = float(np.log(10))
    a = {"entropy_mean": 0.865 * log_k, "entropy_max": log_k, "layers": 1,
         "entropy_mean_normalized": 0.865,
         "intervals": {"entropy_mean_normalized": _entry(0.85, 0.88, 100,
                                                         "BCa bootstrap over images")}}
    b = {"entropy_mean": 0.5 * log_k, "entropy_max": log_k, "layers": 1}
    figures.render_compare([("A", a), ("B", b)], None, RenderContext("M", "all", CLASSES))
    (fig, caption), = drawn
    # 1 − H / log K: the share's high end gives the deficit's low end
    assert _segments(fig.axes[0]) == [(0.0, pytest.approx(1 - 0.88), pytest.approx(1 - 0.85))]
    assert "Error bars: 95% intervals, BCa bootstrap over the 100 images." in caption


def test_explanation_fidelity_trend_bands_per_method(monkeypatch):
    from reportgen.techniques.explanation_fidelity import figures

    drawn = _captured(monkeypatch, figures)
    method = "gradcam_pp"
    history = []
    for s, (low, high) in enumerate(((0.10, 0.20), (0.25, 0.40))):
        history.append((f"{s}-10", {
            f"deletion_aopc_{method}": (low + high) / 2, f"insertion_auc_{method}": 0.5,
            "agreement_mean": 0.3, "images": 20, "patches": 4, "grid": "6x6",
            "builtin_method": "rpv_modified",
            "intervals": {f"deletion_aopc_{method}": _entry(low, high, 20,
                                                            "BCa bootstrap over images")}}))
    from reportgen.techniques.explanation_fidelity import Params

    figures.render_trend(history, Params(), RenderContext("M", "all", CLASSES))
    (fig, caption), = drawn
    bands = [c for c in fig.axes[0].collections if isinstance(c, PolyCollection)]
    assert len(bands) == 1
    assert _band_ends(bands[0]) == {0.0: pytest.approx((0.10, 0.20)),
                                    1.0: pytest.approx((0.25, 0.40))}
    assert not [c for c in fig.axes[1].collections if isinstance(c, PolyCollection)]
    assert "Shaded: 95% intervals, BCa bootstrap over the 20 images." in caption


def _wilson(k, n, z=1.959963984540054):
    """Wilson (1927) score interval of k / n, written out."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    spread = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - spread, centre + spread


def test_affine_step_figure_shades_wilson_per_sweep_value(monkeypatch):
    from reportgen.techniques.affine_robustness import figures

    drawn = _captured(monkeypatch, figures)
    n, right = 40, [12, 30, 20]                            # correct images per sweep value
    labels = np.arange(n) % 10
    predicted = np.stack([np.where(np.arange(n) < k, labels, (labels + 1) % 10) for k in right])
    arrays = {"clean_accuracy": np.float64(0.75), "class_counts": np.full(10, n // 10),
              "values_rotation": np.array([-30.0, 0.0, 30.0]),
              "accuracy_rotation": np.array(right) / n, "labels": labels,
              "predicted_rotation": predicted}
    figures.render(arrays, None, RenderContext("M", "1-10", CLASSES))
    (fig, caption), = drawn
    band, = [c for c in fig.axes[0].collections if isinstance(c, PolyCollection)]
    assert _band_ends(band) == {x: pytest.approx(_wilson(k, n))
                                for x, k in zip((-30.0, 0.0, 30.0), right)}
    assert "shaded: 95% intervals, Wilson over the 40 images" in caption
    # results stored without per-image outcomes: no band, no words
    drawn.clear()
    del arrays["labels"], arrays["predicted_rotation"]
    figures.render(arrays, None, RenderContext("M", "1-10", CLASSES))
    (fig, caption), = drawn
    assert not [c for c in fig.axes[0].collections if isinstance(c, PolyCollection)]
    assert "shaded" not in caption
