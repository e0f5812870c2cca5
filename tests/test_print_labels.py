"""The image figures' Pillow text and the trend charts' legends as the supplement prints them:
every label at 7 pt or more at the size captions.tex sets the figure (its width, and its
height under its caption: reportgen.figures.print_size), no two labels of a sheet overlapping,
and no trend legend over a curve."""

from __future__ import annotations

from types import SimpleNamespace as NS

import numpy as np
import pytest

from bitmap_text import collisions, on_figure, recorded_texts, smallest_printed
from reportgen.figures.print_size import MIN_PRINTED_PT
from reportgen.techniques.base import RenderContext
from test_figures import RENDERERS, _compare_summaries


def _context(channels: int) -> RenderContext:
    """An MNIST-sized (or CIFAR-sized) input of a 10-class model."""
    size = 28 if channels == 1 else 32
    return RenderContext(model="MNIST_Demo", step="5-40", class_names=tuple(map(str, range(10))),
                         input_label="test #3",
                         image=np.random.default_rng(channels).random((size, size, channels)),
                         receptive_fields=((0, 9, 1), (0, 17, 2), (0, 25, 2)),
                         conv_layer_names=("conv1", "primary_conv"))


def _results(ctx: RenderContext) -> dict:
    """A result per image technique at the baseline CapsNet's sizes (Sabour et al. 2017: 256
    conv1 filters of 9x9, 32 primary types on a 6x6 grid, 10 class capsules of 16
    dimensions; the decoder perturbation's 11 offsets -0.25 ... 0.25)."""
    rng = np.random.default_rng(3)
    h, w, c = ctx.image.shape
    return {
        "predictions": ({"lengths": rng.random(10)}, None),
        "conv_feature_maps": ({"maps": np.maximum(rng.normal(size=(20, 20, 256)), 0),
                               "dead": (rng.random(256) < 0.1).astype(np.float32)},
                              NS(layer="conv1")),
        "conv_kernels": ({"kernels": rng.normal(size=(9, 9, c, 256))}, NS(layer="conv1")),
        "primary_heatmaps": ({"lengths": rng.random((6, 6, 32))}, NS(normalization="per_layer")),
        "rpv": ({"maps": rng.random((10, 6, 6))}, NS(method="modified")),
        "class_capsules": ({"capsules": rng.normal(size=(10, 16)) * 0.3,
                            "lengths": rng.random(10)}, None),
        "decoder_length": ({"images": rng.random((5, h, w, c)), "lengths": np.linspace(0, 1, 5),
                            "target": np.array(2)}, None),
        "decoder_perturbation": ({"images": rng.random((16, 11, h, w, c)),
                                  "deltas": np.round(np.linspace(-0.25, 0.25, 11), 2),
                                  "target": np.array(1)}, None),
        "gradcam_pp": ({"map": rng.random((20, 20))}, NS(layer="conv1")),
        "activation_maximization": ({"images": rng.random((10, h, w, c)),
                                     "lengths": rng.random((10, 10))}, None),
    }


def _check(figures, drawn) -> None:
    pictures = [f for f in figures if f.kind == "png"]
    assert pictures
    for figure in pictures:
        mine = on_figure(drawn, figure, figures)
        assert mine, figure.name
        size, text = smallest_printed(mine, figure)
        assert size >= MIN_PRINTED_PT, f"{figure.name}: {text!r} prints at {size:.2f} pt"
        assert not collisions(mine), (figure.name, collisions(mine)[:3])


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("technique", sorted(RENDERERS))
def test_image_figures_print_every_label_at_7_pt_and_none_overlap(technique, channels):
    ctx = _context(channels)
    result, params = _results(ctx)[technique]
    with recorded_texts() as drawn:
        figures = RENDERERS[technique](result, params, ctx)
    _check(figures, drawn)


def test_class_poses_and_semantics_sheets_print_at_7_pt():
    from reportgen.figures.matrix_capsules import render_class_poses
    from reportgen.techniques.capsule_semantics.figures import _sheet

    with recorded_texts() as drawn:
        figures = render_class_poses({"capsules": np.zeros((10, 16)),
                                      "lengths": np.linspace(0, 1, 10)}, None,
                                     RenderContext("M", "1-0", tuple(map(str, range(10)))))
    _check(figures, drawn)
    # 16 dimensions x 5 multiples of 28 x 28 reconstructions under a title wider than the grid
    with recorded_texts() as drawn:
        sheet = _sheet(np.zeros((16, 5, 28, 28, 1)), [f"dim {d} (sd 0.12)" for d in range(16)],
                       ["-2 sd", "-1 sd", "0", "+1 sd", "+2 sd"],
                       "Decoder: class 3 capsule of evaluation image 17, one dimension shifted "
                       "by m standard deviations (columns)")
    figure = NS(name="perturbation_0.png", kind="png", width=sheet.shape[1],
                height=sheet.shape[0], caption="x" * 800)
    _check([figure], drawn)
    assert max(t.x1 for t in drawn) <= sheet.shape[1]          # the title wraps, not clipped


def test_multimnist_pair_prints_at_7_pt():
    """The two-digit figure with a wrong top-2 (its widest: a third panel and two legends)."""
    from reportgen.techniques.multimnist_pair.figures import render_pair

    first, second = np.zeros((36, 36, 1)), np.zeros((36, 36, 1))
    first[4:32, 16:20] = 1.0
    second[16:20, 4:32] = 1.0
    image = np.maximum(first, second)
    result = {"image": image, "labels": np.array([1, 7]), "top2": np.array([3, 1]),
              "reconstructions": np.stack([first, second]),
              "predicted_reconstructions": np.stack([second, first])}
    with recorded_texts() as drawn:
        figures = render_pair(result, None, RenderContext("M", "1-1", tuple(map(str, range(10))),
                                                          image=image))
    _check(figures, drawn)


def test_collisions_finds_the_old_perturbation_columns():
    """What the issue saw, measured as the recorder measures: δ labels wider than the old
    30 px columns (28 px tiles, 2 px gutters) overlap their neighbours."""
    from bitmap_text import DrawnText
    from reportgen.figures.colormaps import text_size

    pitch = 30
    drawn = []
    for s, text in enumerate(["+0.05", "+0.1", "+0.15"]):
        width, height = text_size(text)
        centre = s * pitch + pitch / 2
        drawn.append(DrawnText(1, (1, 1), text, 14, centre - width / 2, 0, centre + width / 2,
                               height))
    assert text_size("+0.05")[0] > pitch
    assert ("+0.05", "+0.1") in collisions(drawn) and ("+0.1", "+0.15") in collisions(drawn)


# --- trend legends ---------------------------------------------------------------------------

TRENDS = ["affine_robustness", "capsule_semantics", "dead_units", "routing_entropy",
          "em_routing_entropy", "vote_agreement", "explanation_fidelity",
          "adversarial_robustness"]


def _segments_cross(box, xy: np.ndarray, samples: int = 50) -> bool:
    """Whether the polyline through display points `xy` passes through `box` (its points and
    `samples` points along every segment)."""
    finite = xy[np.isfinite(xy).all(axis=1)]
    if len(finite) == 0:
        return False
    t = np.linspace(0.0, 1.0, samples)[:, None]
    points = [finite] + [a + t * (b - a) for a, b in zip(finite[:-1], finite[1:])]
    points = np.concatenate(points)
    inside = ((points[:, 0] > box.x0) & (points[:, 0] < box.x1) & (points[:, 1] > box.y0)
              & (points[:, 1] < box.y1))
    return bool(inside.any())


@pytest.mark.parametrize("analysis", TRENDS)
def test_trend_legends_cover_no_curve(analysis, monkeypatch):
    """Every line of a trend chart (its data points and the segments between them, in display
    coordinates) stays out of every legend's box, as matplotlib lays the figure out; every
    legend's text prints at 7 pt or more."""
    import importlib

    from reportgen.figures.print_size import text_floor
    from reportgen.techniques import get_technique

    name = analysis.removeprefix("em_")
    technique = get_technique(name)
    module = importlib.import_module(f"reportgen.techniques.{name}.figures")
    drawn = []
    original = module.figure_pair
    monkeypatch.setattr(module, "figure_pair",
                        lambda fig, *a, **k: (drawn.append(fig), original(fig, *a, **k))[1])
    # values that sweep the whole axis, so an in-axes legend anywhere would cover a line
    steps = [(f"{e}-100", _compare_summaries(e % 4)[analysis]) for e in range(8)]
    classes = tuple(str(k) for k in range(10))
    figures = technique.render_trend(steps, None, RenderContext("M", "all", classes))
    assert figures and len(drawn) == 1
    fig = drawn[0]
    renderer = fig.canvas.get_renderer()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert legends
    lines = [(ax, line) for ax in fig.axes for line in ax.get_lines()]
    assert lines
    floor = text_floor(fig.get_figwidth(), fig.dpi)
    for legend in legends:
        box = legend.get_window_extent(renderer)
        assert all(t.get_fontsize() >= floor - 1e-9 for t in legend.get_texts())
        for ax, line in lines:
            x = np.asarray(line.get_xdata(), dtype=float)
            y = np.asarray(line.get_ydata(), dtype=float)
            # the line's own transform: data, or axes x and data y (axhline)
            xy = line.get_transform().transform(np.column_stack([x, y]))
            assert not _segments_cross(box, xy), (line.get_label(), legend)


def test_plain_log_tick_labels_of_many_decades_do_not_collide():
    """A log x axis over eight decades in a half-width panel (routing entropy's distance from
    uniform): its labelled decades' boxes do not overlap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reportgen.figures.plots import plain_log_ticks

    fig, ax = plt.subplots(figsize=(3.4, 2.4))
    ax.set_xscale("log")
    ax.plot([1e-7, 10], [0, 1])
    plain_log_ticks(ax, "x")
    ax.set_xlim(1e-7, 10)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    shown = [t for t in ax.get_xticklabels() if t.get_text() and t.get_visible()
             and 1e-7 <= t.get_position()[0] <= 10]
    boxes = sorted((t.get_window_extent(renderer) for t in shown), key=lambda b: b.x0)
    assert len(boxes) >= 3
    assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:]))
    plt.close(fig)


def test_a_figure_grown_by_its_legend_draws_twice_its_layout_size():
    """A trend figure whose legend grew it by a fraction of a pixel still draws exactly
    PIXEL_RATIO times the layout size its img tag says."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reportgen.figures.encode import PIXEL_RATIO, png_size
    from reportgen.figures.plots import png_figure

    fig, ax = plt.subplots(figsize=(4.0, 4.115), dpi=100)   # 411.5 px: 823 at 2x, not 824
    ax.plot([0, 1], [0, 1], label="a")
    got = png_figure(fig, "t.png", "")
    assert png_size(got.data) == (PIXEL_RATIO * got.width, PIXEL_RATIO * got.height)
    plt.close(fig)


def test_explanation_quality_table_prints_at_7_pt_and_no_two_texts_overlap(monkeypatch):
    """The explanation-quality table (a matplotlib figure of texts): every text at the floor
    that prints at 7 pt or above, none overlapping another, all inside the figure; the widest
    case (RPV modified and original, Grad-CAM++, both baselines, a scaled column)."""
    from reportgen.figures.print_size import text_floor
    from reportgen.techniques import explanation_quality as eq
    from reportgen.techniques.explanation_quality import figures as module

    drawn = []
    original = module.figure_pair
    monkeypatch.setattr(module, "figure_pair",
                        lambda fig, *a, **k: (drawn.append(fig), original(fig, *a, **k))[1])
    rng = np.random.default_rng(0)
    n = 20
    rows = [rng.normal(-0.55, 0.3, n) for _ in range(6)]
    rows[2] = np.full(n, np.nan)                                  # no built-in map
    arrays = {"faithfulness": np.stack(rows[:5] + [np.full(n, np.nan)]),
              "infidelity": np.abs(np.stack(rows)) * 1e-6 + 1e-7,
              "sensitivity": np.abs(np.stack(rows)), "has": np.array([1, 1, 0, 1, 1, 1]),
              "subset_size": np.int64(78)}
    arrays["infidelity"][2] = arrays["sensitivity"][2] = np.nan
    arrays["road_morf"] = np.stack(rows) - 0.5                    # ROAD's block, negative too
    arrays["road_lerf"] = np.stack(rows[::-1]) + 0.5
    arrays["road_gap"] = arrays["road_lerf"] - arrays["road_morf"]
    for name in ("road_morf", "road_lerf", "road_gap"):
        arrays[name][2] = np.nan
    figures = eq.TECHNIQUE.render(arrays, eq.Params(), RenderContext("MNIST_Demo", "5-40",
                                                                     tuple("0123456789")))
    assert figures and len(drawn) == 1
    fig = drawn[0]
    renderer = fig.canvas.get_renderer()
    floor = text_floor(fig.get_figwidth(), fig.dpi)
    texts = [t for t in fig.findobj(match=lambda o: hasattr(o, "get_text")
                                    and hasattr(o, "get_fontsize"))
             if t.get_visible() and t.get_text().strip()]
    assert len(texts) > 30
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    page = fig.bbox
    for text, box in boxes:
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 <= page.y1, text
    assert all(t.get_fontsize() >= floor - 1e-9 for t in texts)
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1:]:
            overlap = (min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0) > 0.5
                       and min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0) > 0.5)
            assert not overlap, (a, b)
