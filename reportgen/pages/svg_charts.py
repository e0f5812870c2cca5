"""The training curves of a model's overview page as inline SVG: drawn here, with no JavaScript
chart library, so the bytes are deterministic and the page works without scripts. The step
slider moves the chosen-step marker (reportgen.js reads its `data-x`)."""

from __future__ import annotations

import json
import math

from markupsafe import Markup, escape

from reportgen.figures.model_plots import ACCURACIES, LOSSES

# the series of the downloadable matplotlib charts (reportgen.figures.model_plots), in the same
# colours
CURVE_SERIES = {"loss": LOSSES, "accuracy": ACCURACIES}


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` evenly spaced round ticks from at or below `lo` to at or above `hi`: the
    chart's axis runs from the first to the last, so every value in [lo, hi] is inside it."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    # 1e-9: a bound on a tick (0.7 / 0.1 = 6.999...) is not one tick further out
    first = math.floor(lo / step + 1e-9)
    last = math.ceil(hi / step - 1e-9)
    return [round(k * step, 10) for k in range(first, last + 1)]


def _fmt(value: float) -> str:
    """A tick or hover value: whole numbers with thousands separators (images seen: 15,000,
    not 1.5e+04), others with 4 significant digits."""
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    text = f"{value:.4g}"
    return text if "e" not in text else f"{value:.1e}"


def training_curves_svg(history: list[dict], kind: str, selected_step: str | None = None,
                        width: int = 560, height: int = 260, accuracy: str = "accuracy") -> Markup:
    """One chart ("loss" or "accuracy") of ModelData.history as an inline SVG.

    x = images seen when the history records it, else the record's position; one polyline per
    series, a dot per saved step (hover: step and value), a vertical marker on the chosen step
    (moved by the slider through `data-x`). `accuracy`: what the accuracies count ("top-2
    accuracy" for images of two digits), in the title and legend.
    """
    series = [(key, label.replace("accuracy", accuracy), colour)
              for key, label, colour in CURVE_SERIES[kind]
              if any(isinstance(r.get(key), (int, float)) for r in history)]
    if not history or not series:
        return Markup("")
    left, right, top, bottom = 56, 12, 14, 58
    plot_w, plot_h = width - left - right, height - top - bottom
    use_seen = all(isinstance(r.get("images_seen"), (int, float)) for r in history)
    xs_raw = [float(r["images_seen"]) if use_seen else float(i) for i, r in enumerate(history)]
    x_lo, x_hi = min(xs_raw), max(xs_raw)
    x_span = (x_hi - x_lo) or 1.0
    values = [float(r[k]) for r in history for k, _, _ in series
              if isinstance(r.get(k), (int, float)) and math.isfinite(float(r[k]))]
    if kind == "accuracy":
        y_lo, y_hi = min(values + [1.0]), 1.0
        y_lo = max(0.0, math.floor(y_lo * 10) / 10)
        ticks = nice_ticks(y_lo, y_hi, 5)
    else:
        ticks = nice_ticks(0.0, max(values) if values else 1.0, 5)
    y_lo, y_hi = ticks[0], ticks[-1]
    y_span = (y_hi - y_lo) or 1.0

    def px(x: float) -> float:
        return round(left + (x - x_lo) / x_span * plot_w, 2)

    def py(y: float) -> float:
        return round(top + (1 - (y - y_lo) / y_span) * plot_h, 2)

    xs = {str(r.get("step", i)): px(x) for i, (r, x) in enumerate(zip(history, xs_raw))}
    out = [f'<svg class="rg-chart" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img" xmlns="http://www.w3.org/2000/svg">',
           f"<title>{escape('Loss' if kind == 'loss' else accuracy[:1].upper() + accuracy[1:])}"
           " over training steps</title>"]
    for tick in ticks:
        y = py(tick)
        label = f"{tick:.0%}" if kind == "accuracy" else _fmt(tick)
        out.append(f'<line class="rg-gridline" x1="{left}" x2="{left + plot_w}" y1="{y}" '
                   f'y2="{y}"/>')
        out.append(f'<text class="rg-tick" x="{left - 6}" y="{y + 4}" '
                   f'text-anchor="end">{escape(label)}</text>')
    # x ticks: at most ~8 step labels, always the first and the last
    n = len(history)
    every = max(1, math.ceil(n / 8))
    shown = sorted(set(range(0, n, every)) | {n - 1})
    for i in shown:
        x = px(xs_raw[i])
        out.append(f'<line class="rg-axis" x1="{x}" x2="{x}" y1="{top + plot_h}" '
                   f'y2="{top + plot_h + 4}"/>')
        out.append(f'<text class="rg-tick" x="{x}" y="{top + plot_h + 16}" '
                   f'text-anchor="middle">{escape(str(history[i].get("step", i)))}</text>')
    out.append(f'<line class="rg-axis" x1="{left}" x2="{left + plot_w}" y1="{top + plot_h}" '
               f'y2="{top + plot_h}"/>')
    out.append(f'<line class="rg-axis" x1="{left}" x2="{left}" y1="{top}" '
               f'y2="{top + plot_h}"/>')
    out.append(f'<text class="rg-axis-label" x="{left + plot_w / 2}" y="{top + plot_h + 32}" '
               f'text-anchor="middle">training step (EPOCH-BATCH)'
               f'{", spaced by images seen" if use_seen else ""}</text>')
    marker_x = xs.get(selected_step or "", xs[list(xs)[-1]])
    out.append(f'<line class="rg-step-marker" data-rg-marker="" x1="{marker_x}" '
               f'x2="{marker_x}" y1="{top}" y2="{top + plot_h}" '
               f"data-x='{escape(json.dumps(xs))}'/>")
    legend_x = left
    for key, label, colour in series:
        points = [(px(x), py(float(r[key]))) for r, x in zip(history, xs_raw)
                  if isinstance(r.get(key), (int, float)) and math.isfinite(float(r[key]))]
        if not points:
            continue
        coords = " ".join(f"{x},{y}" for x, y in points)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
                   f'points="{coords}"/>')
        for r, x in zip(history, xs_raw):
            value = r.get(key)
            if isinstance(value, (int, float)) and math.isfinite(float(value)):
                shown_value = f"{value:.2%}" if kind == "accuracy" else _fmt(float(value))
                out.append(f'<circle cx="{px(x)}" cy="{py(float(value))}" r="3" '
                           f'fill="{colour}"><title>{escape(label)} at step '
                           f'{escape(str(r.get("step", "")))}: {escape(shown_value)}'
                           "</title></circle>")
        y = height - 10
        out.append(f'<rect x="{legend_x}" y="{y - 8}" width="14" height="4" '
                   f'fill="{colour}"/>')
        out.append(f'<text class="rg-legend" x="{legend_x + 18}" y="{y - 3}">'
                   f"{escape(label)}</text>")
        legend_x += 34 + 7 * len(label)
    out.append("</svg>")
    return Markup("\n".join(out))


# The Compare page's overlay: one colour per model (matplotlib's tab10, as the paper figures).
MODEL_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                 "#7f7f7f", "#bcbd22", "#17becf")
OVERLAY_SERIES = {"accuracy": ("val_accuracy", "Validation accuracy"),
                  "loss": ("loss", "Total training loss")}


def _points(history: list[dict], key: str) -> list[tuple[float, float, str]]:
    """(images seen, value, step) of the records that have both, finite."""
    out = []
    for r in history:
        x, y = r.get("images_seen"), r.get(key)
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
               for v in (x, y)):
            out.append((float(x), float(y), str(r.get("step", ""))))
    return out


def overlay_curves_svg(runs: list[tuple[str, list[dict]]], kind: str, width: int = 560,
                       height: int = 280) -> Markup:
    """One measure ("accuracy": validation accuracy, "loss": total training loss) of several
    models' training histories in one inline SVG, over the images seen (models of different
    data-set sizes and batch sizes line up by what they saw); a dot per saved step (hover:
    model, step, value), a legend row per model. Empty when no model has the measure."""
    key, title = OVERLAY_SERIES[kind]
    series = [(name, MODEL_COLOURS[i % len(MODEL_COLOURS)], _points(history, key))
              for i, (name, history) in enumerate(runs)]
    series = [s for s in series if s[2]]
    if not series:
        return Markup("")
    rows = len(series)
    left, right, top, bottom = 56, 24, 30, 44 + 16 * rows
    height += 16 * (rows - 1)
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [x for _, _, points in series for x, _, _ in points]
    ys = [y for _, _, points in series for _, y, _ in points]
    x_ticks = nice_ticks(0.0, max(xs), 5)
    if kind == "accuracy":
        y_ticks = nice_ticks(max(0.0, math.floor(min(ys + [1.0]) * 10) / 10), 1.0, 5)
    else:
        y_ticks = nice_ticks(0.0, max(ys), 5)
    x_lo, x_hi, y_lo, y_hi = x_ticks[0], x_ticks[-1], y_ticks[0], y_ticks[-1]

    def px(x: float) -> float:
        return round(left + (x - x_lo) / ((x_hi - x_lo) or 1.0) * plot_w, 2)

    def py(y: float) -> float:
        return round(top + (1 - (y - y_lo) / ((y_hi - y_lo) or 1.0)) * plot_h, 2)

    out = [f'<svg class="rg-chart rg-overlay-chart" data-rg-overlay="{kind}" '
           f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
           f'xmlns="http://www.w3.org/2000/svg">',
           f"<title>{escape(title)} of every model over the images seen in training</title>",
           f'<text class="rg-chart-title" x="{left}" y="16">{escape(title)}</text>']
    for tick in y_ticks:
        label = f"{tick:.0%}" if kind == "accuracy" else _fmt(tick)
        out.append(f'<line class="rg-gridline" x1="{left}" x2="{left + plot_w}" '
                   f'y1="{py(tick)}" y2="{py(tick)}"/>')
        out.append(f'<text class="rg-tick" x="{left - 6}" y="{py(tick) + 4}" '
                   f'text-anchor="end">{escape(label)}</text>')
    for tick in x_ticks:
        out.append(f'<line class="rg-axis" x1="{px(tick)}" x2="{px(tick)}" '
                   f'y1="{top + plot_h}" y2="{top + plot_h + 4}"/>')
        out.append(f'<text class="rg-tick" x="{px(tick)}" y="{top + plot_h + 16}" '
                   f'text-anchor="middle">{escape(_fmt(tick))}</text>')
    out.append(f'<line class="rg-axis" x1="{left}" x2="{left + plot_w}" y1="{top + plot_h}" '
               f'y2="{top + plot_h}"/>')
    out.append(f'<line class="rg-axis" x1="{left}" x2="{left}" y1="{top}" '
               f'y2="{top + plot_h}"/>')
    out.append(f'<text class="rg-axis-label" x="{left + plot_w / 2}" y="{top + plot_h + 32}" '
               f'text-anchor="middle">training images seen</text>')
    for row, (name, colour, points) in enumerate(series):
        coords = " ".join(f"{px(x)},{py(y)}" for x, y, _ in points)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
                   f'points="{coords}" data-rg-series="{escape(name)}"/>')
        for x, y, step in points:
            shown = f"{y:.2%}" if kind == "accuracy" else _fmt(y)
            out.append(f'<circle cx="{px(x)}" cy="{py(y)}" r="2.5" fill="{colour}"><title>'
                       f'{escape(name)}, step {escape(step)}: {escape(shown)}</title></circle>')
        y = height - 10 - 16 * (rows - 1 - row)
        out.append(f'<rect x="{left}" y="{y - 8}" width="14" height="4" fill="{colour}"/>')
        out.append(f'<text class="rg-legend" x="{left + 18}" y="{y - 3}">{escape(name)}</text>')
    out.append("</svg>")
    return Markup("\n".join(out))
