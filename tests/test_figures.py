"""The drawing layer: placement by receptive field, colormaps, deterministic encoders, renderers."""

from __future__ import annotations

import io
import subprocess
import sys
import xml.etree.ElementTree as ET
from types import SimpleNamespace as NS

import numpy as np
import pytest
from PIL import Image

from reportgen.figures import panel_kit
from reportgen.figures.colormaps import (
    COLOUR_LEVELS, apply_colormap, apply_diverging, colorbar_array, colorbar_png, lut,
)
from reportgen.figures.encode import (matplotlib_bytes, new_figure, png_bytes, png_size,
                                      to_uint8)
from reportgen.figures.placement import place_grid_on_input, seen_mask, stretch_grid
from reportgen.techniques.activation_maximization.figures import render_activation_maximization
from reportgen.techniques.base import Figure, RenderContext
from reportgen.techniques.class_capsules.figures import render_class_capsules
from reportgen.techniques.conv_feature_maps.figures import render_conv_feature_maps
from reportgen.techniques.conv_kernels.figures import render_conv_kernels
from reportgen.techniques.decoder_length.figures import render_decoder_length
from reportgen.techniques.decoder_perturbation.figures import render_decoder_perturbation
from reportgen.techniques.gradcam_pp.figures import render_gradcam_pp
from reportgen.techniques.predictions.figures import render_predictions
from reportgen.techniques.primary_heatmaps.figures import render_primary_heatmaps
from reportgen.techniques.rpv.figures import render_rpv

BASELINE_RF = (0, 17, 2)      # primary_conv of the MNIST baseline: 6x6 grid on 28x28


# --- placement ----------------------------------------------------------------------------------

def test_hot_cell_covers_exactly_its_receptive_field():
    grid = np.zeros((6, 6))
    grid[2, 3] = 1.0
    placed = place_grid_on_input(grid, (28, 28), BASELINE_RF)
    assert placed.shape == (28, 28)
    rows, cols = np.nonzero(np.nan_to_num(placed) > 0)
    assert (rows.min(), rows.max(), cols.min(), cols.max()) == (4, 20, 6, 22)
    assert np.all(np.nan_to_num(placed[4:21, 6:23]) > 0)
    # Cell 5 ends at pixel 26: row and column 27 are seen by no cell.
    assert np.isnan(placed[27]).all() and np.isnan(placed[:, 27]).all()
    assert not np.isnan(placed[:27, :27]).any()
    np.testing.assert_array_equal(seen_mask((6, 6), (28, 28), BASELINE_RF), ~np.isnan(placed))


def test_placement_averages_the_cells_that_see_a_pixel():
    grid = np.arange(36, dtype=float).reshape(6, 6)
    placed = place_grid_on_input(grid, (28, 28), BASELINE_RF)
    assert placed[0, 0] == grid[0, 0]                     # only cell (0, 0) sees pixel (0, 0)
    assert placed[0, 2] == pytest.approx(grid[0, :2].mean())   # cells 0 and 1 see column 2
    assert placed[12, 12] == pytest.approx(grid.mean())   # rows 10..16 are seen by all 6 cells
    ones = place_grid_on_input(np.ones((6, 6)), (28, 28), BASELINE_RF)
    np.testing.assert_allclose(ones[:27, :27], 1.0)
    stack = np.random.default_rng(0).random((6, 6, 3))
    together = place_grid_on_input(stack, (28, 28), BASELINE_RF)
    for i in range(3):
        np.testing.assert_array_equal(together[..., i],
                                      place_grid_on_input(stack[..., i], (28, 28), BASELINE_RF))


def _centre_row(footprint):
    rows = np.nonzero(np.nan_to_num(footprint).any(axis=1))[0]
    return (rows.min() + rows.max()) / 2


def test_even_stretch_spreads_the_map_about_2_3x_too_wide():
    centres = {}
    for method in ("placed", "stretched"):
        out = []
        for p in (0, 5):
            grid = np.zeros((6, 6))
            grid[p, 0] = 1.0
            footprint = (place_grid_on_input(grid, (28, 28), BASELINE_RF) if method == "placed"
                         else stretch_grid(grid, (28, 28)))
            out.append(_centre_row(footprint))
        centres[method] = out
    assert centres["placed"] == [8, 18]                   # the baseline's centres 8 … 18
    ratio = np.diff(centres["stretched"])[0] / np.diff(centres["placed"])[0]
    assert 2.2 < ratio < 2.5
    grid = np.zeros((6, 6))
    grid[2, 3] = 1.0
    stretched = stretch_grid(grid, (28, 28))
    assert not np.isnan(stretched).any()                  # the stretch claims every pixel
    rows, cols = np.nonzero(stretched)
    assert (rows.min(), rows.max(), cols.min(), cols.max()) == (10, 13, 14, 18)


# --- colormaps ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["viridis", "RdBu_r", "gray", "inferno"])
def test_lut_matches_matplotlib(name):
    from matplotlib import colormaps

    values = np.concatenate([[0.0, 1e-9, 0.25, 0.5, 0.75, 0.999, 1.0],
                             np.random.default_rng(1).random(200)])
    ours = apply_colormap(values, name) / 255.0
    # figures draw values at COLOUR_LEVELS levels: matplotlib's colour of the nearest level
    levels = np.round(values * (COLOUR_LEVELS - 1)) / (COLOUR_LEVELS - 1)
    assert np.abs(levels - values).max() <= 0.5 / (COLOUR_LEVELS - 1) + 1e-12
    theirs = np.asarray(colormaps[name](levels))[:, :3]
    np.testing.assert_allclose(ours, theirs, atol=1 / 255)
    assert lut(name).shape == (256, 3) and lut(name).dtype == np.uint8
    assert len(np.unique(apply_colormap(np.linspace(0, 1, 1000), name), axis=0)) <= COLOUR_LEVELS


def test_colormap_clips_and_paints_nan():
    rgb = apply_colormap(np.array([[-1.0, 2.0, np.nan]]), "viridis", nan_color=(1, 2, 3))
    assert rgb.shape == (1, 3, 3) and rgb.dtype == np.uint8
    np.testing.assert_array_equal(rgb[0, 0], lut("viridis")[0])
    np.testing.assert_array_equal(rgb[0, 1], lut("viridis")[255])
    np.testing.assert_array_equal(rgb[0, 2], (1, 2, 3))


def test_diverging_is_symmetric_and_white_at_zero():
    rgb, vmax = apply_diverging(np.array([-2.0, 0.0, 1.0, 2.0]))
    assert vmax == 2.0
    assert rgb[1].min() >= 240                            # zero → (near) white
    assert rgb[0, 2] > rgb[0, 0]                          # negative → blue
    assert rgb[3, 0] > rgb[3, 2]                          # positive → red
    np.testing.assert_array_equal(rgb[0], lut("RdBu_r")[0])
    np.testing.assert_array_equal(rgb[3], lut("RdBu_r")[255])
    zero_rgb, zero_vmax = apply_diverging(np.zeros(3))    # all-zero input: no division by zero
    assert zero_vmax == 1.0 and zero_rgb.min() >= 240


def test_colorbar():
    bar = colorbar_array("viridis", 0.0, 0.5, "capsule length", width=150)
    assert bar.dtype == np.uint8 and bar.shape[1] >= 150
    data = colorbar_png("RdBu_r", -1.0, 1.0, "weight")
    assert data == colorbar_png("RdBu_r", -1.0, 1.0, "weight")
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "PNG"


# --- encoders -----------------------------------------------------------------------------------

def test_png_bytes_round_trip_and_determinism():
    arr = np.random.default_rng(2).integers(0, 256, (7, 5, 3), dtype=np.uint8)
    data = png_bytes(arr)
    assert data == png_bytes(arr.copy())
    assert png_size(data) == (5, 7)
    with Image.open(io.BytesIO(data)) as image:
        np.testing.assert_array_equal(np.asarray(image.convert("RGB")), arr)
        assert not image.info.get("Software")
    assert png_size(png_bytes(np.zeros((3, 4)))) == (4, 3)
    gray = np.repeat(arr[:, :, :1], 3, axis=2)            # gray RGB is stored as 8-bit gray
    with Image.open(io.BytesIO(png_bytes(gray))) as image:
        assert image.mode == "L"
        np.testing.assert_array_equal(np.asarray(image.convert("RGB")), gray)
    with pytest.raises(ValueError):
        png_bytes(np.zeros((2, 2, 2)))


def _decoded(data: bytes) -> tuple[str, np.ndarray]:
    with Image.open(io.BytesIO(data)) as image:
        return image.mode, np.asarray(image.convert("RGB")).astype(int)


def test_png_palette_is_exact_up_to_256_colours_and_bounded_beyond():
    rng = np.random.default_rng(3)
    colours = rng.integers(0, 256, (200, 3), dtype=np.uint8)
    few = colours[rng.integers(0, 200, (40, 50))]
    mode, back = _decoded(png_bytes(few))
    assert mode == "P" and np.array_equal(back, few)                 # exact
    # 256 grays and viridis's 256 colours, scattered: 512 colours, quantised within 6/255
    ramp = np.linspace(0, 1, 256)
    table = np.concatenate([np.repeat(to_uint8(ramp)[:, None], 3, 1),
                            apply_colormap(ramp[None, :], "viridis")[0]])
    many = table[rng.integers(0, len(table), (96, 96))]
    assert len(np.unique(many.reshape(-1, 3), axis=0)) > 256
    data = png_bytes(many)
    mode, back = _decoded(data)
    assert mode == "P" and 0 < np.abs(back - many).max() <= 6
    assert len(data) < 0.6 * len(png_bytes(many, palette=False))
    assert data == png_bytes(many.copy())                             # deterministic
    # random noise cannot be held by 256 colours within the tolerance: stays RGB, exact
    noise = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
    mode, back = _decoded(png_bytes(noise))
    assert mode == "RGB" and np.array_equal(back, noise)
    mode, back = _decoded(png_bytes(many, palette=False))
    assert mode == "RGB" and np.array_equal(back, many)


def _mpl_figure():
    fig = new_figure(3, 2)
    ax = fig.add_subplot()
    ax.barh(["a", "b", "c"], [0.2, 0.9, 0.4], color=["C0", "C1", "C0"])
    ax.set_xlim(0, 1)
    ax.set_title("lengths")
    return fig


@pytest.mark.parametrize("kind", ["png", "svg", "pdf"])
def test_matplotlib_bytes_are_deterministic(kind):
    first = matplotlib_bytes(_mpl_figure(), kind)
    second = matplotlib_bytes(_mpl_figure(), kind)
    assert first == second
    if kind == "png":
        assert first[:8] == b"\x89PNG\r\n\x1a\n" and b"Software" not in first
    elif kind == "svg":
        ET.fromstring(first)
        assert b"<dc:date>" not in first
    else:
        assert first.startswith(b"%PDF") and b"CreationDate" not in first


def test_figures_package_never_imports_tensorflow():
    code = ("import sys, reportgen.figures.panel_kit, reportgen.figures.encode; "
            "assert not any(m.split('.')[0] in ('tensorflow', 'keras') for m in sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


# --- renderers ----------------------------------------------------------------------------------

K, D, GRID, TYPES = 3, 4, 4, 5
# each technique's drawing of one input (reportgen/techniques/<name>/figures.py)
RENDERERS = {
    "predictions": render_predictions,
    "conv_feature_maps": render_conv_feature_maps,
    "conv_kernels": render_conv_kernels,
    "primary_heatmaps": render_primary_heatmaps,
    "rpv": render_rpv,
    "class_capsules": render_class_capsules,
    "decoder_length": render_decoder_length,
    "decoder_perturbation": render_decoder_perturbation,
    "gradcam_pp": render_gradcam_pp,
    "activation_maximization": render_activation_maximization,
}


def _context(channels: int) -> RenderContext:
    size = 28 if channels == 1 else 32
    rng = np.random.default_rng(channels)
    # conv1 as in the baseline; the last field puts a 4x4 grid on 28x28 (0, 13, 5) or
    # 32x32 (0, 14, 6).
    start_rfs = ((0, 9, 1), (0, 17, 2), (0, 13, 5) if channels == 1 else (0, 14, 6))
    return RenderContext(model="TEST", step="epoch-1", class_names=("zero", "one", "<two&>"),
                         input_label="test #0", image=rng.random((size, size, channels)),
                         receptive_fields=start_rfs,
                         conv_layer_names=("conv1", "conv2", "primary_conv"))


def _results(ctx: RenderContext):
    rng = np.random.default_rng(3)
    h, w, c = ctx.image.shape
    dead = np.array([0, 1, 0, 0, 0, 1], dtype=np.float32)
    maps = np.maximum(rng.normal(size=(6, 6, 6)), 0)
    maps[..., dead > 0] = 0
    return {
        "predictions": ({"lengths": np.array([0.1, 0.8, 0.3])}, None),
        "conv_feature_maps": ({"maps": maps, "dead": dead}, NS(layer="conv1")),
        "conv_kernels": ({"kernels": rng.normal(size=(3, 3, c, 6))}, NS(layer="conv1")),
        "primary_heatmaps": ({"lengths": rng.random((GRID, GRID, TYPES))},
                             NS(normalization="per_layer")),
        "rpv": ({"maps": rng.random((K, GRID, GRID))}, NS(method="modified")),
        "class_capsules": ({"capsules": rng.normal(size=(K, D)),
                            "lengths": np.array([0.1, 0.8, 0.3])}, None),
        "decoder_length": ({"images": rng.random((5, h, w, c)), "lengths": np.linspace(0, 1, 5),
                            "target": np.array(2)}, None),
        "decoder_perturbation": ({"images": rng.random((D, 3, h, w, c)),
                                  "deltas": np.array([-0.25, 0.0, 0.25]),
                                  "target": np.array(1)}, None),
        "gradcam_pp": ({"map": rng.random((h - 8, w - 8))}, NS(layer="conv1")),
        "activation_maximization": ({"images": rng.random((K, h, w, c)),
                                     "lengths": rng.random((K, K))}, None),
    }


def _check_figure(fig: Figure):
    assert isinstance(fig, Figure) and fig.caption and fig.data
    if fig.kind == "png":
        with Image.open(io.BytesIO(fig.data)) as image:
            image.load()
            assert image.size == (fig.width, fig.height) and image.mode in ("RGB", "L", "P")
            assert fig.width > 0 and fig.height > 0
    elif fig.kind == "svg":
        ET.fromstring(fig.data)
    else:
        assert fig.kind == "pdf" and fig.data.startswith(b"%PDF")


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("technique", sorted(RENDERERS))
def test_renderers_draw_valid_deterministic_files(technique, channels):
    ctx = _context(channels)
    result, params = _results(ctx)[technique]
    render = RENDERERS[technique]
    figures = render(result, params, ctx)
    assert figures and len({f.name for f in figures}) == len(figures)
    assert any(f.kind == "png" for f in figures)
    for fig in figures:
        _check_figure(fig)
    again = render({k: np.array(v, copy=True) for k, v in result.items()}, params, ctx)
    assert [f.data for f in again] == [f.data for f in figures]
    assert [f.caption for f in again] == [f.caption for f in figures]


def test_renderers_accept_missing_params_and_context():
    ctx = RenderContext(model="M", step="s", class_names=())
    results = _results(_context(1))
    for technique, (result, _) in results.items():
        for fig in RENDERERS[technique](result, None, ctx):
            _check_figure(fig)


def _red(rgb):
    return (rgb[..., 0] > 200) & (rgb[..., 1] < 60) & (rgb[..., 2] < 60)


def test_dead_filters_are_outlined_in_red():
    ctx = _context(1)
    dead = np.array([0, 1, 0, 0])
    maps = np.random.default_rng(4).random((5, 5, 4)) + 0.1
    maps[..., 1] = 0.0
    fig, = render_conv_feature_maps({"maps": maps, "dead": dead}, NS(layer="conv1"), ctx)
    assert "1 of 4 filters dead" in fig.caption and "conv1" in fig.caption
    rgb = np.asarray(Image.open(io.BytesIO(fig.data)).convert("RGB"))
    ys, xs = np.nonzero(_red(rgb))
    assert ys.size
    top, bottom, left, right = ys.min(), ys.max(), xs.min(), xs.max()
    side = bottom - top + 1
    assert side == right - left + 1 and side >= 20     # one square frame around a tile (5x5 map x 4)
    assert _red(rgb[top, left:right + 1]).all() and _red(rgb[top:bottom + 1, left]).all()
    assert _red(rgb[bottom, left:right + 1]).all() and _red(rgb[top:bottom + 1, right]).all()
    inside = rgb[top + side // 2, left + side // 2]
    np.testing.assert_array_equal(inside, lut("viridis")[0])     # the dead map itself is 0
    fig, = render_conv_feature_maps({"maps": maps[..., [0, 2, 3]], "dead": np.zeros(3)},
                                    NS(layer="conv1"), ctx)
    assert not _red(np.asarray(Image.open(io.BytesIO(fig.data)).convert("RGB"))).any()
    assert "0 of 3 filters dead" in fig.caption


def test_captions_state_options_and_normalisation():
    ctx = _context(1)
    results = _results(ctx)
    result, _ = results["primary_heatmaps"]
    captions = {n: render_primary_heatmaps(result, NS(normalization=n), ctx)[0].caption
                for n in ("per_layer", "per_map", "absolute")}
    assert "per layer" in captions["per_layer"] and "per map" in captions["per_map"]
    assert "absolute" in captions["absolute"]
    assert all("receptive field" in c for c in captions.values())
    result, _ = results["rpv"]
    assert "original" in render_rpv(result, NS(method="original"), ctx)[0].caption
    assert "modified" in render_rpv(result, None, ctx)[0].caption
    result, _ = results["gradcam_pp"]
    caption = render_gradcam_pp(result, NS(layer="conv1"), ctx)[0].caption
    assert "conv1" in caption and "min-max" in caption and "receptive field" in caption
    caption = render_decoder_length(*results["decoder_length"], ctx)[0].caption
    assert "<two&>" in caption
    caption = render_conv_kernels(*_results(_context(3))["conv_kernels"], _context(3))[0]
    assert "mean over its 3 input channels" in caption.caption


def test_predictions_highlight_the_longest_capsule():
    ctx = _context(1)
    png, svg = render_predictions({"lengths": np.array([0.1, 0.8, 0.3])}, None, ctx)
    assert (png.kind, svg.kind) == ("png", "svg")
    assert "one" in png.caption and "not a softmax" in png.caption
    rgb = np.asarray(Image.open(io.BytesIO(png.data)).convert("RGB"))
    highlight = np.all(rgb == panel_kit.HIGHLIGHT, axis=-1)
    other = np.all(rgb == panel_kit.BAR, axis=-1)
    assert highlight.sum() > 0 and other.sum() > 0
    # The highlighted bar (0.8) is longer than each of the others.
    assert np.ptp(np.nonzero(highlight.any(axis=0))[0]) > np.ptp(np.nonzero(other.any(axis=0))[0])
    root = ET.fromstring(svg.data)
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "<two&>" in texts and "0.800" in texts


def test_placement_is_used_by_the_heatmap_overlay():
    """A single hot cell lights up only the tile at its receptive field's centre."""
    ctx = RenderContext(model="M", step="s", class_names=(), image=np.zeros((28, 28, 1)),
                        receptive_fields=(BASELINE_RF,))
    lengths = np.zeros((6, 6, 1))
    lengths[2, 3, 0] = 1.0
    tiles, where = panel_kit.overlay_tiles(np.moveaxis(lengths, -1, 0), ctx, BASELINE_RF,
                                           "gray", 0.5, target=28)
    assert tiles.shape == (1, 28, 28, 3) and "2p … 2p+16" in where
    rows, cols = np.nonzero(tiles[0].max(axis=-1) > 0)     # black input, gray(0) = black
    # cell (2, 3): centres 8+2*2 = 12 and 8+2*3 = 14, each a 2x2 tile
    assert (rows.min(), rows.max(), cols.min(), cols.max()) == (11, 12, 13, 14)


def test_centre_placement_matches_hand_computed_baseline():
    """Baseline: 6x6 grid, receptive field (0, 17, 2): centres 8, 10, ..., 18 -> tiles 7 … 18."""
    from reportgen.figures.placement import place_grid_at_centres

    grid = np.arange(36, dtype=float).reshape(6, 6)
    placed = place_grid_at_centres(grid, (28, 28), (0, 17, 2))
    seen = np.flatnonzero(~np.isnan(placed[:, 12]))
    assert seen.tolist() == list(range(7, 19))           # 12 px, not 28: 2.33x narrower
    assert placed[7, 7] == placed[8, 8] == grid[0, 0]
    assert placed[17, 18] == grid[5, 5]
    assert placed[10, 12] == grid[1, 2]                  # rows 9-10 -> cell 1, cols 11-12 -> 2
    # conv1 of the baseline (0, 9, 1): 20x20 grid, centres 4 … 23
    conv = place_grid_at_centres(np.ones((20, 20)), (28, 28), (0, 9, 1))
    assert np.flatnonzero(~np.isnan(conv[:, 10])).tolist() == list(range(4, 24))


def test_palette_indices_match_a_binary_search():
    from PIL import Image

    from reportgen.figures.encode import _packed, _palette_indices

    rng = np.random.default_rng(3)
    for count in (1, 37, 256, 37):      # a smaller palette after a larger: no stale slot read
        keys = np.sort(rng.choice(1 << 24, count, replace=False).astype(np.uint32))
        packed = keys[rng.integers(0, count, 5000)]
        np.testing.assert_array_equal(_palette_indices(keys, packed),
                                      np.searchsorted(keys, packed))
    # the packed colours of an image, against NumPy's own arithmetic
    rgb = rng.integers(0, 256, (7, 5, 3), dtype=np.uint8)
    expected = rgb[..., 0].astype(np.uint32) | rgb[..., 1].astype(np.uint32) << 8 | \
        rgb[..., 2].astype(np.uint32) << 16
    np.testing.assert_array_equal(_packed(Image.fromarray(rgb, "RGB")), expected)


# --- legibility of the labels of image grids ------------------------------------------------------


def _ink_bands(strip: np.ndarray) -> list[int]:
    """Heights of the runs of rows of a (rows, cols) grey strip that hold ink (labels are dark
    or muted grey on white)."""
    inked = (strip < 200).any(axis=1)
    bands, run = [], 0
    for row in inked:
        if row:
            run += 1
        elif run:
            bands.append(run)
            run = 0
    return bands + ([run] if run else [])


def _grid_label_heights(png: bytes) -> tuple[list[int], int]:
    """(ink heights of the row labels left of the first tile column, ink height of the column
    label above the first tile) of a sheet whose tiles are black, measured on its pixels."""
    grey = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    black = np.argwhere(grey == 0)
    top, left = black[:, 0].min(), black[black[:, 0] == black[:, 0].min(), 1].min()
    rows = _ink_bands(grey[top:, :left - 2])
    right = left + int(np.argmax(grey[top, left:] != 0))    # the first tile's right edge
    above = grey[:top, left:right][::-1]                   # upwards from the first tile
    first_ink = int(np.argmax((above < 200).any(axis=1)))
    column = _ink_bands(above[first_ink:])[0]
    return rows, column


def test_grid_labels_are_at_least_10_px_tall_at_1x():
    """The perturbation grids' row and column labels: digits at least 10 px tall in the PNG
    the page shows at 1x (the ink of "dim 3" and "-0.25", measured on the pixels)."""
    from reportgen.techniques.capsule_semantics.figures import _sheet

    ctx = RenderContext(model="M", step="1-0", class_names=tuple(map(str, range(10))))
    result = {"images": np.zeros((4, 5, 28, 28, 1), np.float32),
              "deltas": np.linspace(-0.25, 0.25, 5), "target": np.int64(3)}
    figure = render_decoder_perturbation(result, None, ctx)[0]
    rows, column = _grid_label_heights(figure.data)
    assert len(rows) == 4 and min(rows) >= 10 and column >= 10, (rows, column)
    sheet = _sheet(np.zeros((3, 5, 28, 28, 1)), [f"dim {d} (sd 0.12)" for d in range(3)],
                   ["-2 sd", "-1 sd", "0", "+1 sd", "+2 sd"], "title")
    rows, column = _grid_label_heights(png_bytes(sheet))
    assert len(rows) == 3 and min(rows) >= 10 and column >= 10, (rows, column)


# --- legends of the Compare page's charts ---------------------------------------------------------

def _compare_summaries(m: int) -> dict[str, dict]:
    """Hand-made summaries of model `m` per analysis with a comparison chart: values near the
    top of each axis, where an in-axes legend would cover bars or lines."""
    from reportgen.probe.affine import FACTORS
    from reportgen.techniques.adversarial_robustness.numbers import metric_key

    high = 0.9 + 0.02 * m
    adversarial = {"images": 10, "clean_accuracy": high, "has_decoder": True}
    for target in ("capsules", "votes"):
        for attack in ("fgsm", "pgd"):
            for eps in (0.0, 0.05, 0.1, 0.2, 0.3):
                for metric in ("accuracy", "undetected"):
                    adversarial[metric_key(metric, target, attack, eps)] = high - eps
    return {
        "explanation_fidelity": {
            "builtin_method": "rpv_modified", "grid": "6x6", "images": 10, "patches": 36,
            "gradcam_layer": "conv1", "agreement_mean": 0.9, "agreement_std": 0.05,
            **{f"{k}_{method}": high for k in ("deletion_aopc", "insertion_auc")
               for method in ("rpv_modified", "rpv_original", "gradcam_pp", "random")}},
        "affnist_benchmark": {"clean_accuracy": high, "affnist_accuracy": high - 0.05},
        "capsule_semantics": {"effective_dims": 7.0,
                              **{f"compactness_{f}": high for f in FACTORS}},
        "routing_entropy": {"entropy_mean": 1.0, "entropy_max": 2.3, "layers": 1,
                            "entropy_length_weighted_mean": 1.0},
        "vote_agreement": {"agreement_true_mean_cos": high,
                                "agreement_wrong_mean_cos": high,
                                "agreement_true_coupling_weighted_cos": high},
        "em_routing_entropy": {"layers": 3, "entropy_normalized_per_layer": [1.0, 1.0, 0.99],
                               "entropy_mean": 1.0, "entropy_max": 1.1},
        "dead_units": {"dead_filter_fraction": high, "dead_type_fraction": high},
        "affine_robustness": {"clean_accuracy": high,
                              **{k: v for f in FACTORS for k, v in (
                                  (f"{f}_values", [-1.0, 0.0, 1.0]),
                                  (f"{f}_accuracy", [high, high, high]))}},
        "adversarial_robustness": adversarial,
    }


def _overlaps(a, b) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > 0.5 and min(a.y1, b.y1) - max(a.y0, b.y0) > 0.5


@pytest.mark.parametrize("analysis", ["explanation_fidelity", "affnist_benchmark",
                                      "capsule_semantics", "routing_entropy",
                                      "em_routing_entropy", "vote_agreement", "dead_units",
                                      "affine_robustness",
                                      "adversarial_robustness"])
def test_compare_legends_sit_outside_every_plotting_area(analysis, monkeypatch):
    """The Compare page's charts: every legend inside the figure and clear of every axes' box
    (its data area) and of its tick labels and titles, measured as matplotlib lays them out."""
    import importlib

    from reportgen.techniques import get_technique

    name = analysis.removeprefix("em_")          # an EM model's routing entropy: several layers
    technique = get_technique(name)
    module = importlib.import_module(f"reportgen.techniques.{name}.figures")
    drawn = []
    original = module.figure_pair

    def keep(fig, *args, **kwargs):
        drawn.append(fig)
        return original(fig, *args, **kwargs)

    monkeypatch.setattr(module, "figure_pair", keep)
    series = [(f"MNIST_model_number_{m} (10-1000)", _compare_summaries(m)[analysis])
              for m in range(4)]
    figures = technique.render_compare(series, None, RenderContext("all models", "last", ()))
    assert figures and len(drawn) == 1
    fig = drawn[0]
    renderer = fig.canvas.get_renderer()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert len(legends) == 1
    box = legends[0].get_window_extent(renderer)
    page = fig.bbox
    assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1
    for ax in fig.axes:
        assert not _overlaps(box, ax.get_window_extent(renderer)), ax.get_title()
        assert not _overlaps(box, ax.get_tightbbox(renderer)), ax.get_title()
    # every model (or method) is named once
    texts = [t.get_text() for t in legends[0].get_texts()]
    assert len(texts) == len(set(texts))


@pytest.mark.parametrize("technique", ["predictions", "conv_feature_maps", "conv_kernels",
                                       "primary_heatmaps", "rpv", "class_capsules",
                                       "decoder_perturbation", "gradcam_pp"])
def test_mosaic_digits_are_at_least_10_px_tall_at_1x(technique):
    """The numbers drawn inside the mosaics at 1x: their last line of ink is digits (a colour
    bar's ticks, or the predictions' axis), at least 10 px tall, measured on the pixels; so is
    the class capsules' first line (dimension numbers)."""
    ctx = _context(1)
    result, params = _results(ctx)[technique]
    figure = RENDERERS[technique](result, params, ctx)[0]
    grey = np.asarray(Image.open(io.BytesIO(figure.data)).convert("L"))
    bands = _ink_bands(grey)
    assert bands[-1] >= 10, bands
    if technique == "class_capsules":
        assert bands[0] >= 10, bands


def test_class_pose_activations_are_at_least_10_px_tall_at_1x():
    """Matrix capsules' poses: the activation line above each tile ("a = 0.900", digits and an
    x-height letter), measured on the pixels between the class name and the tile."""
    from reportgen.figures.matrix_capsules import render_class_poses

    result = {"capsules": np.zeros((3, 16)), "lengths": np.array([0.1, 0.9, 0.3])}
    figure = render_class_poses(result, None, RenderContext("M", "1-0", ("a", "b", "c")))[0]
    grey = np.asarray(Image.open(io.BytesIO(figure.data)).convert("L"))
    rgb = np.asarray(Image.open(io.BytesIO(figure.data)).convert("RGB"))
    frame = np.flatnonzero((rgb == panel_kit.HIGHLIGHT).all(-1).sum(1) >= 40)  # predicted's frame
    name, activation = _ink_bands(grey[:frame.min(), :])[:2]
    assert activation >= 10, (name, activation)


def test_pdf_font_subsets_are_reused_and_the_pdf_bytes_stay_the_same(monkeypatch):
    """Each set of glyphs is subset once per process (reportgen.figures.pdf_fonts); a PDF made
    with a reused subset equals the one matplotlib makes on its own, and embeds the font."""
    from matplotlib.backends import _backend_pdf_ps

    from reportgen.figures import pdf_fonts

    def figure(title):
        fig = new_figure(4, 3)
        ax = fig.add_subplot()
        ax.plot([0, 1, 2], [0.2, 0.5, 0.4], label="PGD")
        ax.set_title(title)
        ax.legend()
        return fig

    titles = ["step 1-40", "step 2-40", "step 1-40", "Ünïcode ε"]
    original = _backend_pdf_ps.get_glyphs_subset
    monkeypatch.setattr(pdf_fonts, "_installed", True)        # matplotlib's own subsetting
    plain = [matplotlib_bytes(figure(t), "pdf") for t in titles]
    monkeypatch.setattr(pdf_fonts, "_installed", False)
    monkeypatch.setattr(pdf_fonts, "_subsets", type(pdf_fonts._subsets)())
    monkeypatch.setattr(pdf_fonts, "stats", {"made": 0, "reused": 0})
    monkeypatch.setattr(_backend_pdf_ps, "get_glyphs_subset", original)
    reused = [matplotlib_bytes(figure(t), "pdf") for t in titles]
    assert reused == plain
    assert b"/FontFile2" in reused[0]                         # a TrueType font is embedded
    if _backend_pdf_ps.get_glyphs_subset is not original:     # installed (matplotlib >= 3.11)
        # the same glyphs ("step 1-40" twice) are subset once
        assert pdf_fonts.stats["reused"] >= 1
