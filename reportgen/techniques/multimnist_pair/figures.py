"""MultiMNIST segmentation: one input of two overlapping digits and the decoder run once per
class capsule, the two reconstructions drawn over each other in two colours (Sabour, Frosst &
Hinton 2017, Fig. 5, where they are red and green).

The two colours are Okabe & Ito's blue and orange, told apart with every common colour-vision
deficiency (red and green are not). Each reconstruction tints a white canvas by its intensity,
subtractively, so where the two digits overlap the colours mix to a dark brown and where neither
is drawn the canvas stays white; a legend names the class of each colour.
"""

from __future__ import annotations

import numpy as np

from reportgen.figures.colormaps import COLOUR_LEVELS, quantise, text_size
from reportgen.figures.figure import Figure, RenderContext
from reportgen.figures.panel_kit import (HIGHLIGHT, MUTED, Block, class_name, compose, factor,
                                         mosaic, png_figure, rgb, side_by_side, text_block, upscale)

PAIR_COLOURS = ((0, 114, 178), (230, 159, 0))      # Okabe & Ito: blue, orange
PAIR_HEX = tuple("#%02x%02x%02x" % c for c in PAIR_COLOURS)
SWATCH = 12


def two_colour(first: np.ndarray, second: np.ndarray,
               colours=PAIR_COLOURS) -> np.ndarray:
    """uint8 (H, W, 3): two reconstructions (H, W) or (H, W, 1) in [0, 1] on white, the first
    tinting towards colours[0], the second towards colours[1], in proportion to its intensity:
    pixel = 255 - a * (255 - c0) - b * (255 - c1), clipped to 0 … 255."""
    a = quantise(np.clip(np.nan_to_num(np.asarray(first, np.float64)), 0, 1), COLOUR_LEVELS)
    b = quantise(np.clip(np.nan_to_num(np.asarray(second, np.float64)), 0, 1), COLOUR_LEVELS)
    a, b = a.reshape(a.shape[:2])[..., None], b.reshape(b.shape[:2])[..., None]
    ink_a = 255.0 - np.asarray(colours[0], np.float64)
    ink_b = 255.0 - np.asarray(colours[1], np.float64)
    out = 255.0 - a * ink_a - b * ink_b
    return (np.clip(out, 0.0, 255.0) + 0.5).astype(np.uint8)


def _legend(names: list[str], colours) -> Block:
    """One line of coloured squares, each followed by its class name."""
    widths = [SWATCH + 4 + text_size(name)[0] + 12 for name in names]
    height = max(SWATCH, text_size("Ag")[1]) + 2
    array = np.full((height, sum(widths), 3), 255, np.uint8)
    texts, x = [], 0
    for name, colour, width in zip(names, colours, widths):
        top = (height - SWATCH) // 2
        array[top:top + SWATCH, x:x + SWATCH] = colour
        texts.append((x + SWATCH + 4, 0, name, "left", None))
        x += width
    return Block(array, texts)


def render_pair(result, params, ctx: RenderContext) -> list[Figure]:
    """The input, the reconstructions of its two true classes in two colours, and — when the
    top-2 prediction is not the true pair — the reconstructions of the two predicted classes.

    `result`: "image" (H, W, 1) in [0, 1]; "labels" (2,) the true classes; "top2" (2,) the two
    longest class capsules, longest first; "reconstructions" (2, H, W, 1) of the true classes
    (decoder masked to each); "predicted_reconstructions" (2, H, W, 1) of the predicted ones
    (needed only when they differ)."""
    image = np.asarray(result["image"], np.float64)
    labels = [int(k) for k in np.asarray(result["labels"]).reshape(-1)]
    top2 = [int(k) for k in np.asarray(result["top2"]).reshape(-1)]
    recs = np.asarray(result["reconstructions"], np.float64)
    height, width = image.shape[:2]
    scale = 1 if ctx.thumbnail else factor(max(height, width), 108)
    right = sorted(top2) == sorted(labels)
    names = [class_name(ctx, k) for k in labels]
    panels = [upscale(rgb(image[None]), scale)[0], upscale(two_colour(recs[0], recs[1]),
                                                              scale)]
    below = ["input", f"classes {names[0]} and {names[1]}"]
    legends = [_legend([f"class {n}" for n in names], PAIR_COLOURS)]
    if not right:
        predicted = np.asarray(result["predicted_reconstructions"], np.float64)
        panels.append(upscale(two_colour(predicted[0], predicted[1]), scale))
        predicted_names = [class_name(ctx, k) for k in top2]
        below.append(f"predicted {predicted_names[0]} and {predicted_names[1]}")
        legends.append(_legend([f"predicted {n}" for n in predicted_names], PAIR_COLOURS))
    verdict = (f"top-2: {class_name(ctx, top2[0])}, {class_name(ctx, top2[1])}: "
               + ("both right" if right else "not the true pair"))
    tiled = mosaic(np.stack(panels), len(panels), gutter=6, below=below)
    blocks = [tiled, side_by_side(legends) if len(legends) > 1 else legends[0],
              text_block(verdict, color=MUTED if right else HIGHLIGHT)]
    caption = (f"The two overlapping digits pulled apart: the decoder run once per true class "
               f"capsule. Details: MultiMNIST segmentation (Sabour et al. 2017, Fig. 5): the "
               f"input ({height}x{width}); the reconstructions from the class {names[0]} capsule "
               f"(blue) and from the class {names[1]} capsule (orange), each with every other "
               f"class capsule masked, drawn over each other on white (where both draw, the "
               f"colours mix to brown); pixel values clipped to 0 … 1, no normalisation. The "
               f"top-2 prediction is {_top2(ctx)}"
               + ("." if right else "; it is not the true pair, so the reconstructions of the "
                                     "two predicted classes are drawn on the right."))
    return [png_figure("multimnist_pair.png", compose(blocks), caption)]


def _top2(ctx: RenderContext) -> str:
    """The model's top-2 prediction in its own terms (reportgen.capsnet.model_words)."""
    from reportgen.capsnet.model_words import top2_words

    description = getattr(ctx, "description", None)
    return top2_words(description) if description is not None else "its two highest class scores"


def render_input(result, params, ctx: RenderContext) -> list[Figure]:
    """One input's pair figure from the multimnist_pair technique's arrays: "lengths" (K,) and
    "reconstructions" (K, H, W, C), the decoder masked to each class in turn. The true classes
    are the input's (`ctx.true_classes`); without two of them (a user's image) only the
    predicted pair is drawn."""
    lengths = np.asarray(result["lengths"], np.float64)
    recs = np.asarray(result["reconstructions"])
    top2 = [int(k) for k in np.argsort(-lengths, kind="stable")[:2]]
    image = ctx.image if ctx.image is not None else np.zeros(recs.shape[1:])
    if len(ctx.true_classes) == 2:
        labels = [int(k) for k in ctx.true_classes]
        return render_pair({"image": image, "labels": labels, "top2": top2,
                            "reconstructions": recs[labels],
                            "predicted_reconstructions": recs[top2]}, params, ctx)
    return _render_predicted_pair(image, top2, recs[top2], ctx)


def _render_predicted_pair(image, top2, recs, ctx: RenderContext) -> list[Figure]:
    """An input whose classes are unknown: the reconstructions of its two predicted classes."""
    image = np.asarray(image, np.float64)
    height, width = image.shape[:2]
    scale = 1 if ctx.thumbnail else factor(max(height, width), 108)
    names = [class_name(ctx, k) for k in top2]
    panels = [upscale(rgb(image[None]), scale)[0],
              upscale(two_colour(recs[0], recs[1]), scale)]
    tiled = mosaic(np.stack(panels), 2, gutter=6,
                     below=["input", f"predicted {names[0]} and {names[1]}"])
    blocks = [tiled, _legend([f"predicted {n}" for n in names], PAIR_COLOURS),
              text_block(f"top-2: {names[0]}, {names[1]} (true classes unknown)", color=MUTED)]
    caption = (f"The input pulled apart into its two predicted digits, {names[0]} and "
               f"{names[1]}; its true classes are unknown. Details: MultiMNIST segmentation "
               f"(Sabour et al. 2017, Fig. 5): the input ({height}x{width}) and the decoder's "
               f"reconstructions from the capsules of its top-2 classes ({_top2(ctx)}), "
               f"class {names[0]} in blue "
               f"and class {names[1]} in orange, each with every other class capsule masked, "
               f"drawn over each other on white; pixel values clipped to 0 … 1.")
    return [png_figure("multimnist_pair.png", compose(blocks), caption)]
