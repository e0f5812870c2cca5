"""The class capsules' pose table (reportgen.techniques.class_capsules)."""

from __future__ import annotations

import numpy as np

from reportgen.figures.colormaps import DIVERGING, apply_diverging, fmt, text_size
from reportgen.figures.figure import Figure, RenderContext
from reportgen.figures.panel_kit import (HIGHLIGHT, MUTED, WHITE, Block, class_name, colorbar,
                                         compose, grid, length_label, line_height, png_figure,
                                         upscale)


def render_class_capsules(result, params, ctx: RenderContext) -> list[Figure]:
    """K rows x D columns of pose values (diverging), each row with class name and its score
    (its length |v| when the length is what the model predicts by)."""
    from reportgen.capsnet import model_words

    description = ctx.description
    by_length = description is None or model_words.readout(description) == "length"
    score = "|v|" if by_length else model_words.score_word(description)
    capsules = np.asarray(result["capsules"], dtype=np.float64)           # (K, D)
    lengths = np.asarray(result["lengths"], dtype=np.float64).reshape(-1)
    classes, dims = capsules.shape
    # the prediction: the highest score, or the two highest for images of two digits
    count = max(1, int(ctx.labels_per_image))
    predicted = [int(k) for k in np.argsort(-lengths, kind="stable")[:count]]
    cell = 16
    rgb, vmax = apply_diverging(capsules)
    cells = upscale(np.broadcast_to(rgb[:, :, None, None, :], (classes, dims, 1, 1, 3)), cell)
    table = grid(np.ascontiguousarray(cells), 1)
    names = [class_name(ctx, k) for k in range(classes)]
    lh = line_height()
    label_w = max(text_size(n)[0] for n in names) + 8
    value_w = max(text_size(f"{score} = {length_label(v)}")[0] for v in lengths) + 8
    header = lh + 2
    height = header + table.shape[0] + 2
    width = label_w + table.shape[1] + value_w + 4
    array = np.full((height, width, 3), WHITE, dtype=np.uint8)
    x0, y0 = label_w + 2, header
    array[y0:y0 + table.shape[0], x0:x0 + table.shape[1]] = table
    # Frame each predicted class's row.
    for row in predicted:
        top = y0 + row * (cell + 1) - 1
        bottom = top + cell + 1
        array[top, x0 - 2:x0 + table.shape[1] + 2] = HIGHLIGHT
        array[bottom, x0 - 2:x0 + table.shape[1] + 2] = HIGHLIGHT
        array[top:bottom + 1, x0 - 2] = HIGHLIGHT
        array[top:bottom + 1, x0 + table.shape[1] + 1] = HIGHLIGHT
    texts = [(x0 + d * (cell + 1) + cell / 2, 0, str(d), "center", MUTED) for d in range(dims)]
    for k in range(classes):
        y = y0 + k * (cell + 1) + (cell - lh) // 2 + 1
        colour = HIGHLIGHT if k in predicted else None
        texts.append((x0 - 6, y, names[k], "right", colour))
        texts.append((x0 + table.shape[1] + 6, y, f"{score} = {length_label(lengths[k])}", "left",
                      colour))
    blocks = [Block(array, texts),
              colorbar(DIVERGING, -vmax, vmax, "pose value", width=min(200, table.shape[1]))]
    if count == 2:
        lead = ("the two longest are the prediction" if by_length else
                f"the prediction is {model_words.top2_words(description)}")
    else:
        lead = ("the longest is the prediction" if by_length else
                f"the prediction is {model_words.prediction_words(description)}")
    framed = (f"predicted class {names[predicted[0]]} framed" if count == 1 else
              f"predicted classes {' and '.join(names[k] for k in predicted)} framed")
    each = ("each row's length |v| on the right" if by_length else
            f"each row's {model_words.score_word(description)} on the right (its class score, "
            f"one of {model_words.score_words(description)})")
    caption = (f"The pose vector of every class capsule; {lead}. Details: "
               f"Class capsules: the {dims}-dimensional pose vector of each of the {classes} class "
               f"capsules (rows; columns = dimensions 0 … {dims - 1}), {DIVERGING} colours "
               f"symmetric around zero, scale ±{fmt(vmax)} = the largest absolute value for this "
               f"image; {each}, {framed}.")
    return [png_figure("class_capsules.png", compose(blocks), caption)]
