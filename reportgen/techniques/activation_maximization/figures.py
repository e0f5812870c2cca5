"""The synthesised images of activation maximization
(reportgen.techniques.activation_maximization)."""

from __future__ import annotations

import numpy as np

from reportgen.figures.colormaps import COLOUR_LEVELS
from reportgen.figures.figure import Figure, RenderContext
from reportgen.figures.panel_kit import (DEAD, MUTED, class_name, columns, compose, factor, mosaic,
                                         png_figure, rgb, title, upscale)


def render_activation_maximization(result, params, ctx: RenderContext) -> list[Figure]:
    """A row of synthesized images, one per class, with the model's lengths for each."""
    from reportgen.capsnet import model_words

    # the ascent is on the class capsules' lengths (the technique's); the model predicts by
    # them only when its readout is their length
    description = ctx.description
    by_length = description is None or model_words.readout(description) == "length"
    images = np.asarray(result["images"], dtype=np.float64)               # (K, H, W, C)
    lengths = np.asarray(result["lengths"], dtype=np.float64)             # (K, K)
    classes, height, width = images.shape[:3]
    tiles = upscale(rgb(images, COLOUR_LEVELS), factor(max(height, width), 84))
    names = [class_name(ctx, k) for k in range(classes)]
    below = []
    for k in range(classes):
        pred = int(np.argmax(lengths[k]))
        below.append([f"|v|={lengths[k, k]:.3f}",
                      (f"{'pred' if by_length else 'longest'} {names[pred]}",
                       MUTED if pred == k else DEAD)])
    cols = columns(classes, 10)
    tiled = mosaic(tiles, cols, gutter=4, above=names, below=below)
    blocks = [title("Activation maximization (experimental)"), tiled]
    verdict = ("the model's prediction for it (red when another class wins)" if by_length else
               f"the longest class capsule for it (red when another class's is longer; this "
               f"model predicts by {model_words.prediction_words(description)}, not by length)")
    caption = ("Images synthesised to maximise each class capsule, and what the model predicts "
               "for them. Details: " if by_length else
               "Images synthesised to lengthen each class capsule, and which capsule is then "
               "the longest. Details: ") + (
               "Activation maximization (experimental): for each class, an image synthesized by "
               "gradient ascent on that class capsule's length from an all-black input, no "
               f"regulariser; below each, the length of its own class capsule and {verdict}. "
               "Pixel values clipped to 0 … 1, no normalisation.")
    return [png_figure("activation_maximization.png", compose(blocks), caption)]
