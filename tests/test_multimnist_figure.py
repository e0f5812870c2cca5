"""The MultiMNIST segmentation figure on a hand-made pair: each reconstruction in its own
colour-blind-safe colour, their overlap mixed, the legend naming the classes, and the predicted
pair's reconstructions added only when the top-2 prediction is wrong."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import numpy as np
from PIL import Image

from reportgen.figures.figure import RenderContext
from reportgen.techniques.multimnist_pair.figures import PAIR_COLOURS, render_pair, two_colour

NAMES = tuple(str(k) for k in range(10))


def _pair():
    """A vertical bar (class 1) and a horizontal bar (class 7) crossing in one 4x4 square."""
    first = np.zeros((36, 36, 1))
    second = np.zeros((36, 36, 1))
    first[4:32, 16:20] = 1.0
    second[16:20, 4:32] = 1.0
    return first, second


def test_each_reconstruction_takes_its_colour_and_the_overlap_mixes():
    first, second = _pair()
    rgb = two_colour(first, second)
    assert rgb.shape == (36, 36, 3) and rgb.dtype == np.uint8
    assert tuple(rgb[0, 0]) == (255, 255, 255)                 # neither: white
    assert tuple(rgb[6, 17]) == PAIR_COLOURS[0]                 # only the first: blue
    assert tuple(rgb[17, 6]) == PAIR_COLOURS[1]                 # only the second: orange
    # both: white minus both inks (an independent computation of the subtractive mix)
    both = np.clip(255 - (255 - np.array(PAIR_COLOURS[0])) - (255 - np.array(PAIR_COLOURS[1])),
                   0, 255)
    assert tuple(rgb[17, 17]) == tuple(both)
    # half an intensity: half the ink
    half = two_colour(first * 0.5, second * 0)
    expected = np.round(255 - 0.5 * (255 - np.array(PAIR_COLOURS[0])))
    assert np.abs(half[6, 17].astype(int) - expected).max() <= 1


def _figure(top2):
    first, second = _pair()
    image = np.maximum(first, second)
    result = {"image": image, "labels": np.array([1, 7]), "top2": np.array(top2),
              "reconstructions": np.stack([first, second]),
              "predicted_reconstructions": np.stack([second, first])}
    ctx = RenderContext(model="M", step="1-1", class_names=NAMES, image=image)
    (figure,) = render_pair(result, None, ctx)
    return figure, np.asarray(Image.open(io.BytesIO(figure.data)).convert("RGB"))


def _count(pixels, colour) -> int:
    return int(np.all(pixels == np.array(colour, np.uint8), axis=-1).sum())


def test_the_figure_shows_both_digits_in_two_colours_with_a_legend():
    figure, pixels = _figure([7, 1])              # the true pair, in either order: right
    assert figure.name == "multimnist_pair.png"
    assert (figure.width, figure.height) == (pixels.shape[1], pixels.shape[0])
    blue, orange = (_count(pixels, c) for c in PAIR_COLOURS)
    # the bars' own pixels (enlarged) plus one legend swatch each; the overlap is neither
    assert blue > 12 * 12 and orange > 12 * 12
    assert abs(blue - orange) <= 4            # the two bars are the same size
    assert "class 1 capsule (blue)" in figure.caption and "class 7 capsule (orange)" in \
        figure.caption
    assert "not the true pair" not in figure.caption


def test_a_wrong_top2_adds_the_predicted_pair():
    right, right_pixels = _figure([1, 7])
    wrong, wrong_pixels = _figure([3, 1])
    assert "not the true pair" in wrong.caption
    assert wrong.width > right.width + 36         # a third panel
    # the predicted pair's panel draws the same two bars with the colours swapped, so each
    # colour appears about twice as often as in the right figure (legend swatches aside)
    for colour in PAIR_COLOURS:
        assert _count(wrong_pixels, colour) > 1.8 * _count(right_pixels, colour) - 400


def test_a_filmstrip_frame_keeps_natural_size():
    first, second = _pair()
    image = np.maximum(first, second)
    result = {"image": image, "labels": np.array([1, 7]), "top2": np.array([1, 7]),
              "reconstructions": np.stack([first, second])}
    big = render_pair(result, None, RenderContext("M", "1-1", NAMES, image=image))[0]
    small = render_pair(result, None, RenderContext("M", "1-1", NAMES, image=image,
                                                    thumbnail=True))[0]
    assert small.width < big.width


def test_the_predictions_chart_highlights_both_classes_of_a_pair():
    """A two-digit model predicts its two highest scores: both bars highlighted, no other."""
    from reportgen.figures.panel_kit import BAR, HIGHLIGHT
    from reportgen.techniques.predictions.figures import render_predictions

    lengths = np.array([0.1, 0.8, 0.3, 0.7, 0.2])
    for per_image, expected in ((1, {1}), (2, {1, 3})):
        ctx = RenderContext(model="M", step="1-0", class_names=NAMES[:5],
                            labels_per_image=per_image)
        png, svg = render_predictions({"lengths": lengths}, None, ctx)
        rgb = np.asarray(Image.open(io.BytesIO(png.data)).convert("RGB"))
        lit = np.all(rgb == HIGHLIGHT, axis=-1).any(axis=1)
        bands = np.flatnonzero(np.diff(lit.astype(int)) == 1)        # starts of lit row bands
        bars = np.all(rgb == BAR, axis=-1).any(axis=1)
        assert len(bands) == len(expected) and bars.any()
        bold = [t.text for t in ET.fromstring(svg.data).iter("{http://www.w3.org/2000/svg}text")
                if t.get("font-weight") == "bold"]
        assert set(bold) == {NAMES[k] for k in expected}
    assert "Predicted classes 1 (length 0.800) and 3 (length 0.700), the two highest (top-2)" \
        in png.caption


def test_the_examples_say_the_scores_beside_chance_the_reference_and_the_count():
    from reportgen.techniques.multimnist_segmentation.figures import render_examples

    first, second = _pair()
    recs = np.stack([first, second])[None]
    result = {"example_images": np.maximum(first, second)[None], "example_labels": [[1, 7]],
              "example_top2": [[7, 1]], "example_reconstructions": recs,
              "example_predicted_reconstructions": recs, "correct": np.ones(30),
              "top2_accuracy": 0.5, "top2_chance": 1 / 45, "segmentation_iou": 0.41,
              "segmentation_reference": 0.23}
    ctx = RenderContext(model="M", step="1-0", class_names=NAMES)
    caption = render_examples(result, None, ctx)[0].caption
    assert caption.startswith("Test pair 1, of 30 test pairs scored: top-2 accuracy 50.0% "
                              "(chance 2.2%), segmentation IoU 41.0% (reference 23.0%: each "
                              "class's typical digit at the centre): ")
