"""The decoder perturbation grid shows each reconstruction's signed difference from the
unperturbed one on one diverging scale, and capsule lengths near zero keep 3 significant
digits."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from reportgen.figures.colormaps import apply_diverging
from reportgen.figures.figure import RenderContext
from reportgen.figures.panel_kit import length_label
from reportgen.techniques.decoder_perturbation.figures import (perturbation_difference,
                                                               render_decoder_perturbation)
from reportgen.techniques.predictions.figures import render_predictions

CTX = RenderContext(model="m", step="0-0", class_names=tuple("0123456789"))
DELTAS = np.array([-0.2, -0.1, 0.0, 0.1, 0.2])


def test_difference_matches_numpy_reference():
    rng = np.random.default_rng(1)
    images = rng.uniform(-0.2, 1.2, (3, 5, 8, 8, 1))       # the decoder may leave 0 … 1
    images[:, 2] = images[0, 2]                            # δ = 0: one unperturbed image
    difference, vmax = perturbation_difference(images, DELTAS)
    shown = np.clip(images, 0, 1)
    reference = shown[..., 0] - shown[0, 2, ..., 0][None, None]
    np.testing.assert_allclose(difference, reference, atol=1e-12)
    assert vmax == np.abs(reference).max()
    assert np.all(difference[:, 2] == 0)
    assert perturbation_difference(images, np.array([-0.1, 0.1, 0.2, 0.3, 0.4])) is None


def test_difference_is_drawn_on_one_shared_scale(monkeypatch):
    # exact pixels to find; the site's palette encoding is tested in test_figures.py
    monkeypatch.setattr("reportgen.figures.encode.PALETTE_TOLERANCE", 0)
    # Constant images: each difference tile is one colour, findable in the PNG.
    values = np.array([[0.1, 0.3, 0.5, 0.6, 0.9], [0.5, 0.45, 0.5, 0.55, 0.7]])
    images = np.broadcast_to(values[:, :, None, None, None], (2, 5, 8, 8, 1)).copy()
    figures = render_decoder_perturbation(
        {"images": images, "deltas": DELTAS, "target": np.array(3.0)}, None, CTX)
    # the reconstructions, then their differences: a figure of its own
    assert [f.name for f in figures] == ["decoder_perturbation.png",
                                         "decoder_perturbation_difference.png"]
    figure = figures[1]
    pixels = np.asarray(Image.open(io.BytesIO(figure.data)).convert("RGB")).reshape(-1, 3)
    colours, counts = np.unique(pixels, axis=0, return_counts=True)
    found = {tuple(c): n for c, n in zip(colours, counts)}
    reference = values - 0.5
    vmax = np.abs(reference).max()                         # one scale for the whole grid
    assert np.isclose(vmax, 0.4)
    rgb, _ = apply_diverging(reference, vmax)
    for colour in {tuple(int(v) for v in c) for c in rgb.reshape(-1, 3)}:
        assert found.get(colour, 0) >= 8 * 8, colour       # at least one tile of that colour
    assert "±0.4 = the largest absolute difference" in figure.caption


def test_small_lengths_keep_three_significant_digits():
    assert length_label(0.000123) == "0.000123"
    assert length_label(0.0123) == "0.0123"
    assert length_label(0.734) == "0.734"
    assert length_label(0.0) == "0"
    lengths = np.array([0.00042, 0.00031, 0.00087])
    _, svg = render_predictions({"lengths": lengths}, None,
                                RenderContext(model="m", step="0-0", class_names=("a", "b", "c")))
    text = svg.data.decode()
    assert ">0.000420</text>" in text and ">0.000870</text>" in text and ">0.000</text>" not in text
    # exact lengths of an untrained network (no epsilon floor) read as such in the caption too
    png, _ = render_predictions({"lengths": np.array([2.5e-6, 7.1e-7, 1.3e-6])}, None,
                                RenderContext(model="m", step="0-0",
                                              class_names=("a", "b", "c")))
    assert "Predicted class a (length 2.50e-06) highlighted." in png.caption
