"""The predictions chart (reportgen.techniques.predictions): the class scores as bars, in the
model's own terms, as a PNG and an SVG."""

from __future__ import annotations

from xml.sax.saxutils import escape

import numpy as np

from reportgen.figures.colormaps import FONT_SIZE, TEXT_COLOR, draw_texts, fmt, text_size
from reportgen.figures.figure import Figure, RenderContext
from reportgen.figures.panel_kit import (AXIS, BAR, GRID_LINE, HIGHLIGHT, MARGIN, MUTED, TITLE_SIZE,
                                         WHITE, class_name, length_label, line_height, png_figure)


def _bar_layout(lengths, names):
    lh = line_height()
    row_h = max(18, lh + 6)
    label_w = max(text_size(n)[0] for n in names) + 10
    plot_w = 260
    value_w = max(text_size(length_label(v))[0] for v in lengths) + 8
    top = line_height(TITLE_SIZE) + 10
    axis_h = lh + 8
    width = MARGIN + label_w + plot_w + value_w + MARGIN
    height = top + row_h * len(lengths) + axis_h + MARGIN
    return dict(row_h=row_h, label_w=label_w, plot_w=plot_w, top=top, width=width,
                height=height, x0=MARGIN + label_w, bar_h=row_h - 6)


def _predictions_png(lengths, names, predicted: frozenset, title):
    lay = _bar_layout(lengths, names)
    canvas = np.full((lay["height"], lay["width"], 3), WHITE, dtype=np.uint8)
    x0, plot_w, top, row_h = lay["x0"], lay["plot_w"], lay["top"], lay["row_h"]
    bottom = top + row_h * len(lengths)
    ticks = (0.0, 0.25, 0.5, 0.75, 1.0)
    for t in ticks:
        x = x0 + int(round(t * (plot_w - 1)))
        canvas[top:bottom, x] = GRID_LINE
    texts = [(MARGIN, MARGIN // 2, title, "left", None, TITLE_SIZE)]
    for k, (value, name) in enumerate(zip(lengths, names)):
        y = top + k * row_h
        bar = int(round(np.clip(value, 0.0, 1.0) * (plot_w - 1)))
        colour = HIGHLIGHT if k in predicted else BAR
        if bar > 0:
            canvas[y + 3:y + 3 + lay["bar_h"], x0:x0 + bar] = colour
        text_y = y + (row_h - line_height()) // 2
        texts.append((x0 - 6, text_y, name, "right", HIGHLIGHT if k in predicted else None))
        texts.append((x0 + bar + 4, text_y, length_label(value), "left",
                      HIGHLIGHT if k in predicted else MUTED))
    canvas[top:bottom, x0] = AXIS
    canvas[bottom, x0:x0 + plot_w] = AXIS
    for t in ticks:
        x = x0 + int(round(t * (plot_w - 1)))
        canvas[bottom:bottom + 3, x] = AXIS
        texts.append((x, bottom + 4, fmt(t), "center", MUTED))
    return draw_texts(canvas, texts)


def _predictions_svg(lengths, names, predicted: frozenset, title) -> bytes:
    """The same chart as SVG text, written directly (deterministic, no matplotlib)."""
    lay = _bar_layout(lengths, names)
    x0, plot_w, top, row_h = lay["x0"], lay["plot_w"], lay["top"], lay["row_h"]
    bottom = top + row_h * len(lengths)

    def rgb(c):
        return "#%02x%02x%02x" % tuple(c)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{lay["width"]}" '
           f'height="{lay["height"]}" viewBox="0 0 {lay["width"]} {lay["height"]}" '
           f'font-family="DejaVu Sans, Arial, sans-serif" font-size="{FONT_SIZE}">',
           f'<rect width="{lay["width"]}" height="{lay["height"]}" fill="#ffffff"/>',
           f'<text x="{MARGIN}" y="{MARGIN // 2 + TITLE_SIZE}" font-size="{TITLE_SIZE}" '
           f'fill="{rgb(TEXT_COLOR)}">{escape(title)}</text>']
    for t in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = x0 + t * (plot_w - 1) + 0.5
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" '
                   f'stroke="{rgb(GRID_LINE)}"/>')
        out.append(f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 3}" '
                   f'stroke="{rgb(AXIS)}"/>')
        out.append(f'<text x="{x:.1f}" y="{bottom + 4 + FONT_SIZE}" text-anchor="middle" '
                   f'fill="{rgb(MUTED)}">{fmt(t)}</text>')
    for k, (value, name) in enumerate(zip(lengths, names)):
        y = top + k * row_h
        bar = float(np.clip(value, 0.0, 1.0)) * (plot_w - 1)
        colour = rgb(HIGHLIGHT if k in predicted else BAR)
        text_colour = rgb(HIGHLIGHT if k in predicted else TEXT_COLOR)
        weight = ' font-weight="bold"' if k in predicted else ""
        out.append(f'<rect x="{x0}" y="{y + 3}" width="{bar:.2f}" height="{lay["bar_h"]}" '
                   f'fill="{colour}"><title>{escape(name)}: {value:.4f}</title></rect>')
        out.append(f'<text x="{x0 - 6}" y="{y + row_h / 2 + 0.36 * FONT_SIZE:.1f}" text-anchor="end" '
                   f'fill="{text_colour}"{weight}>{escape(name)}</text>')
        out.append(f'<text x="{x0 + bar + 4:.2f}" y="{y + row_h / 2 + 0.36 * FONT_SIZE:.1f}" '
                   f'fill="{rgb(HIGHLIGHT if k in predicted else MUTED)}">{length_label(value)}</text>')
    out.append(f'<line x1="{x0 + 0.5}" y1="{top}" x2="{x0 + 0.5}" y2="{bottom}" '
               f'stroke="{rgb(AXIS)}"/>')
    out.append(f'<line x1="{x0}" y1="{bottom + 0.5}" x2="{x0 + plot_w}" y2="{bottom + 0.5}" '
               f'stroke="{rgb(AXIS)}"/>')
    out.append("</svg>\n")
    return "\n".join(out).encode("utf-8")


def _prediction_terms(result, ctx: RenderContext, count: int):
    """(chart title, a bar's word, sentence saying what the bars are) in the model's own terms
    (reportgen.capsnet.model_words), from its description; without one, from the arrays (a
    CNN's come with its "probabilities")."""
    from reportgen.capsnet import model_words

    description = ctx.description
    if description is None:
        kind = "probabilities" if "probabilities" in result else "lengths"
        cnn = kind == "probabilities"
    else:
        kind = model_words.shown_kind(description)
        cnn = description.head.kind != "capsules"
    if kind == "lengths":
        return ("Class-capsule lengths", "length",
                f"Predictions: length of each of the {count} class capsules (not a softmax; "
                f"each in 0 … 1, axis 0 … 1).")
    if kind == "activations":
        logistic = description is not None and \
            model_words.class_activation(description) == "logistic"
        return ("Class-capsule activations", "activation",
                f"Predictions: the {'logistic ' if logistic else ''}activation of each of the "
                f"{count} class capsules (not a softmax; each in 0 … 1, axis 0 … 1).")
    if cnn:
        return ("Class probabilities", "probability",
                f"Predictions: the CNN's probability of each of the {count} classes (axis 0 … "
                f"1).")
    return ("Class probabilities", "probability",
            f"Predictions: the probability of each of the {count} classes, from the logits "
            f"{model_words.LEARNT} (axis 0 … 1).")


def render_predictions(result, params, ctx: RenderContext) -> list[Figure]:
    """Horizontal bar chart of the class scores in the model's own terms (class-capsule lengths,
    not a softmax; logistic activations; a learnt readout's logits; a CNN's probabilities), the
    predicted class highlighted, the two highest for a two-digit model (`ctx.labels_per_image`).
    PNG (Pillow) + SVG (written directly)."""
    lengths = np.asarray(result["lengths"], dtype=np.float64).reshape(-1)
    names = [class_name(ctx, k) for k in range(len(lengths))]
    # the predicted class, or both of a two-digit model's (its two highest scores: top-2)
    shown = [int(k) for k in np.argsort(-lengths, kind="stable")[:max(1, ctx.labels_per_image)]]
    title, kind, what = _prediction_terms(result, ctx, len(lengths))
    value = (lambda k: length_label(lengths[k])) if kind == "length" else \
        (lambda k: f"{lengths[k]:.3f}")
    named = " and ".join(f"{names[k]} ({kind} {value(k)})" for k in shown)
    caption = (f"{what} Predicted class {named} highlighted." if len(shown) == 1 else
               f"{what} Predicted classes {named}, the two highest (top-2), highlighted.")
    canvas = _predictions_png(lengths, names, frozenset(shown), title)
    svg = _predictions_svg(lengths, names, frozenset(shown), title)
    return [png_figure("predictions.png", canvas, caption),
            Figure(name="predictions.svg", data=svg, kind="svg", caption=caption,
                   width=int(canvas.shape[1]), height=int(canvas.shape[0]))]
