"""Charts of the capsule-semantics analysis (reportgen.techniques.capsule_semantics).

No TensorFlow here. Charts are drawn once with matplotlib and saved as PNG (site) and SVG
(paper) with deterministic bytes (reportgen.figures.encode); the reconstruction grids are
images, not plots: a NumPy mosaic with Pillow labels, PNG only (like the per-image decoder
panels, and ~20x cheaper than matplotlib).
"""

from __future__ import annotations

import numpy as np

from reportgen.figures.encode import new_figure
from reportgen.figures.plots import (band, bounds, error_bars, figure_pair, interval_bounds,
                                     interval_note, legend_below, legends_outside, styled,
                                     summary_value)
from reportgen.probe.affine import FACTORS
from reportgen.figures.figure import Figure

BAR = "#8098ba"
FACTOR_LABELS = {"rotation": "rotation", "translation_x": "x-translation",
                 "translation_y": "y-translation", "scale": "scale", "shear_x": "x-shear",
                 "shear_y": "y-shear"}


def _class_name(ctx, k: int) -> str:
    names = getattr(ctx, "class_names", ()) or ()
    return str(names[k]) if 0 <= k < len(names) else str(k)


def _where(ctx) -> str:
    return f", {ctx.model} step {ctx.step}" if getattr(ctx, "model", "") else ""


def _variance(arrays, params, ctx) -> list[Figure]:
    var = np.asarray(arrays["dim_variance"], np.float64)
    class_var = np.asarray(arrays["class_dim_variance"], np.float64)
    counts = np.asarray(arrays["predicted_counts"], np.float64)
    dims, classes = var.size, class_var.shape[0]
    fig = new_figure(6.4, 2.0 + 0.16 * classes)
    with styled():
        ax_bar, ax_map = fig.subplots(1, 2, width_ratios=(1, 1.25))
        ax_bar.bar(np.arange(dims), var, color=BAR, width=0.8)
        ax_bar.set_xlabel("class-capsule dimension")
        ax_bar.set_ylabel("variance over the set")
        ax_bar.set_xlim(-0.7, dims - 0.3)
        ax_bar.set_title(f"Predicted class capsule{_where(ctx)}")
        shown = np.ma.masked_invalid(class_var)
        image = ax_map.imshow(shown, aspect="auto", cmap="viridis", interpolation="nearest")
        ax_map.set_yticks(np.arange(classes),
                          [f"{_class_name(ctx, k)} ({int(counts[k])})" for k in range(classes)])
        ax_map.set_xlabel("dimension")
        ax_map.set_title("per predicted class")
        fig.colorbar(image, ax=ax_map, label="variance", shrink=0.9)
        fig.tight_layout()
    n = int(counts.sum())
    total = float(np.nansum(var))
    effective = total ** 2 / float(np.nansum(var ** 2)) if total > 0 else float("nan")
    caption = (f"How many of the class-capsule dimensions does the network use? The variance of "
               f"each dimension over the evaluation images. Details: "
               f"Capsule semantics, dimension variance: variance (population, ddof 0) of each of "
               f"the {dims} dimensions of the predicted class capsule over {n} evaluation "
               f"images (left, all classes pooled) and over the images predicted as each class "
               f"(right; image counts in brackets, blank below 2 images). Effective number of "
               f"dimensions (Σvar)²/Σvar² = {effective:.2f} of {dims}.")
    return figure_pair(fig, "dimension_variance", caption)


def _wrapped(text: str, room: int, size: int) -> list[str]:
    """`text` in lines of at most `room` px (words kept whole; a longer word alone)."""
    from reportgen.figures.colormaps import text_size

    lines: list[str] = []
    for word in text.split():
        if lines and text_size(f"{lines[-1]} {word}", size)[0] <= room:
            lines[-1] += f" {word}"
        else:
            lines.append(word)
    return lines or [""]


def _sheet(images: np.ndarray, row_labels, col_labels, title: str, target: int = 48) -> np.ndarray:
    """(rows, cols, H, W, C) images in [0, 1] -> uint8 RGB sheet with labels (Pillow text).
    Tiles are enlarged towards `target` px only while the sheet stays within PRINT_HEIGHT
    (taller, the supplement would shrink its labels under 7 pt); the title wraps to the
    sheet's width."""
    from reportgen.figures.colormaps import FONT_SIZE, draw_texts, quantise, text_size
    from reportgen.figures.panel_kit import PRINT_HEIGHT

    rows, cols, h, w, c = images.shape
    th, tw, gutter, margin = h, w, 2, 8
    size = FONT_SIZE
    line = text_size("Ag", size)[1]
    label_w = max(text_size(t, size)[0] for t in row_labels) + 8
    col_w = max(text_size(t, size)[0] for t in col_labels) + 6
    fits = (PRINT_HEIGHT - 2 * margin - 4 * line - 8) // rows - gutter     # px per tile row
    factor = max(1, min(int(np.ceil(target / max(h, w))), fits // max(h, 1)))
    # reconstructions at the figures' colour levels (reportgen.figures.colormaps)
    pixels = quantise(np.nan_to_num(images))
    pixels = pixels[..., :1].repeat(3, -1) if c == 1 else pixels[..., :3]
    tiles = (pixels * 255 + 0.5).astype(np.uint8).repeat(factor, 2).repeat(factor, 3)
    th, tw = h * factor, w * factor
    cell = max(tw, col_w)                        # column labels never run together
    width = margin + label_w + cols * (cell + gutter) - gutter + margin
    heading = _wrapped(title, width - 2 * margin, size)
    top = margin + (len(heading) + 1) * line + 8
    height = top + rows * (th + gutter) - gutter + margin
    sheet = np.full((height, width, 3), 255, np.uint8)
    x0 = (cell - tw) // 2
    for r in range(rows):
        for k in range(cols):
            y, x = top + r * (th + gutter), margin + label_w + k * (cell + gutter) + x0
            sheet[y:y + th, x:x + tw] = tiles[r, k]
    texts = [(margin, margin + i * line, text, "left") for i, text in enumerate(heading)]
    texts += [(margin + label_w + k * (cell + gutter) + cell / 2, top - line - 4, t, "center",
               (110, 110, 110), size) for k, t in enumerate(col_labels)]
    texts += [(margin + label_w - 6, top + r * (th + gutter) + (th - line) // 2, t, "right",
               None, size) for r, t in enumerate(row_labels)]
    return draw_texts(sheet, texts)


def _perturbation(arrays, params, ctx) -> list[Figure]:
    from reportgen.figures.encode import png_bytes

    if "perturbation_images" not in arrays:
        return []
    images = np.asarray(arrays["perturbation_images"], np.float64)      # (R, D, S, H, W, C)
    sigma = np.asarray(arrays["perturbation_sigma"], np.float64)         # (R, D)
    multiples = np.asarray(arrays["perturbation_multiples"], np.float64)
    index = np.asarray(arrays["representative_index"]).astype(int)
    target = np.asarray(arrays["representative_class"]).astype(int)
    reps, dims, steps = images.shape[:3]
    # Pillow's default font has no σ: the sheet says "sd", the caption σ.
    labels = [("0" if abs(m) < 1e-9 else f"{m:+.2g} sd") for m in multiples]
    source = ("the images predicted as that class (pooled over the set below 2 images)"
              if params.sigma == "per_class" else "all evaluation images (pooled)")
    chooser = ("the most confident correctly classified evaluation image of each class "
               "(the first image of the class if none is correct)"
               if params.representatives == "per_class" else "the first evaluation images")
    figures = []
    for r in range(reps):
        name = _class_name(ctx, target[r])
        sheet = _sheet(images[r], [f"dim {d} (sd {sigma[r, d]:.2g})" for d in range(dims)],
                       labels, f"Decoder: class {name} capsule of evaluation image {index[r]}, "
                       f"one dimension shifted by m standard deviations (columns)")
        caption = (f"What each class-capsule dimension draws: one dimension moved by multiples of "
                   f"its own spread, then decoded. Details: "
               f"Capsule semantics, decoder perturbation in standard deviations: dimension d "
                   f"(rows) of the predicted class {name} capsule of evaluation image "
                   f"{index[r]} shifted by m·σ_d, m = {multiples[0]:g} … {multiples[-1]:+g} in "
                   f"{steps} steps (columns), other class capsules masked, then reconstructed "
                   f"(pixels clipped to 0 … 1, no normalisation). σ_d is the dimension's "
                   f"standard deviation over {source}; representatives: {chooser}. Unlike the "
                   f"fixed δ = ±0.25 of the per-image panel, each dimension moves over its own "
                   f"observed range (sd on the sheet = σ).")
        if "perturbation_absolute" in arrays:      # a CNN's feature units (Gu 2022)
            span = float(np.asarray(arrays["perturbation_absolute"]))
            offsets = multiples * sigma[r, 0]
            sheet = _sheet(images[r], [f"dim {d}" for d in range(dims)],
                           [f"{o:+.3g}" for o in offsets],
                           f"Decoder: class {name} feature units of evaluation image {index[r]}, "
                           f"one dimension shifted by the amounts of the columns")
            caption = (f"Capsule semantics of a CNN, decoder perturbation: dimension d (rows) "
                       f"of the predicted class {name}'s feature units of evaluation image "
                       f"{index[r]} shifted by δ = {-span:g} … {span:+g} in {steps} steps "
                       f"(columns; Gu 2022's range for CNN units), other classes masked, then "
                       f"reconstructed (pixels clipped to 0 … 1); representatives: {chooser}.")
        figures.append(Figure(f"perturbation_{r}.png", png_bytes(sheet), "png", caption,
                              int(sheet.shape[1]), int(sheet.shape[0])))
    return figures


def _compactness(arrays, params, ctx) -> list[Figure]:
    """Both aggregations of the compactness score per factor, each with its chance level (an
    isotropic random change: mean and 95th percentile), and the mean share of variance."""
    from reportgen.techniques.capsule_semantics import summarize
    from reportgen.techniques.capsule_semantics.numbers import (PER_IMAGE, POOLED, REFERENCE,
                                                                chance_levels,
                                                                pooled_compactness)

    scores = np.asarray(arrays["compactness"], np.float64)                # per image, averaged
    shares = np.asarray(arrays["compactness_dim_share"], np.float64)      # (F, D)
    values = np.asarray(arrays["factor_values"], np.float64)              # (F, Z)
    images = int(np.asarray(arrays["compactness_index"]).size)
    factors = list(FACTORS)[:len(scores)]
    dims = shares.shape[1]
    pooled = np.array([pooled_compactness(row) for row in shares])
    chance = chance_levels(images, values.shape[1], dims) if images else None
    names = [FACTOR_LABELS[f] for f in factors]
    fig = new_figure(9.6, 2.9)
    with styled():
        ax_one, ax_pool, ax_map = fig.subplots(1, 3, width_ratios=(1, 1, 1.4))
        x = np.arange(len(factors))
        summary = summarize(arrays, params)   # each score's BCa interval over the images
        for ax, bars, key, title in (
                (ax_one, scores, "per_image", "per image, then averaged"),
                (ax_pool, pooled, "pooled", "shares averaged, then KL (Gu)")):
            ax.bar(x, np.nan_to_num(bars), color=BAR, width=0.7)
            prefix = PER_IMAGE if key == "per_image" else POOLED
            ends = [bounds(summary, f"{prefix}{f}") for f in factors]
            highs = [hi for _, hi in ends]
            error_bars(ax, x, [lo for lo, _ in ends], highs)
            for xi, score in zip(x, bars):
                ax.text(xi, np.nan_to_num(score), "–" if not np.isfinite(score) else
                        f"{score:.2g}", ha="center", va="bottom", fontsize=6)
            if chance is not None:      # grey: what an isotropic random change reaches
                mean, high = chance[key]
                ax.axhspan(0, high, color="#d9d9d9", alpha=0.6, zorder=0)
                ax.axhline(mean, color="#7f7f7f", linewidth=0.8, linestyle="--")
                title += f"\nrandom change ≤ {high:.2g} (grey, 95%)"
            top = np.nanmax(np.r_[np.nan_to_num(bars), np.nan_to_num(highs),
                                  chance[key][1] if chance else 0.0])
            ax.set_ylim(0, 1.15 * top if top > 0 else 1.0)
            ax.set_xticks(x, names, rotation=30, ha="right")
            ax.set_title(title)
        ax_one.set_ylabel("compactness KL(p ‖ uniform)")
        image = ax_map.imshow(np.ma.masked_invalid(shares), aspect="auto", cmap="viridis",
                              vmin=0.0, interpolation="nearest")
        ax_map.set_yticks(x, names)
        ax_map.set_xlabel("dimension of the true class capsule")
        ax_map.set_title("mean share of variance p_d")
        fig.colorbar(image, ax=ax_map, shrink=0.9)
        fig.suptitle(f"Compactness per factor{_where(ctx)}".replace(", ", ": ", 1), fontsize=9)
        fig.tight_layout()
    grids = "; ".join(f"{FACTOR_LABELS[f]} {values[i, 0]:g} … {values[i, -1]:g}"
                      for i, f in enumerate(factors))
    rotation = factors.index("rotation") if "rotation" in factors else 0
    chance_text = "" if chance is None else (
        f" An isotropic random change of the same {images} images x {values.shape[1]} values "
        f"gives {chance['per_image'][0]:.2g} per image (95%: {chance['per_image'][1]:.2g}) and "
        f"{chance['pooled'][0]:.2g} pooled (95%: {chance['pooled'][1]:.2g}): a score inside "
        f"the grey band says nothing.")
    caption = (f"Compactness: does a change of pose land in few capsule dimensions? Rotation "
               f"{pooled[rotation]:.2g} (shares averaged over images, the aggregation of the "
               f"order of Gu 2022's Table 5) and {scores[rotation]:.2g} (per image, averaged). "
               f"Details: {images} evaluation images (stratified by class), each transformed "
               f"over {values.shape[1]} evenly spaced values of one factor at a time ({grids}; "
               f"pixels for translations, degrees for rotation; bilinear resampling about the "
               f"image centre, zero fill); per image the variance of each of the {dims} "
               f"dimensions of its TRUE class capsule, normalised to p_d = var_d / Σ var and "
               f"scored KL(p ‖ uniform) = Σ p_d log(p_d·{dims}) (0 = change spread evenly, "
               f"log {dims} = {np.log(dims):.3f} = all in one dimension). Left: each image's KL "
               f"averaged; middle: the KL of p_d averaged over images; right: mean p_d per "
               f"factor.{chance_text} For context, {REFERENCE}.")
    note = interval_note([summary], [f"{prefix}{f}" for prefix in (PER_IMAGE, POOLED)
                                     for f in factors], "error bars")
    return figure_pair(fig, "compactness", f"{caption} {note}".strip())


def render(arrays, params, ctx) -> list[Figure]:
    return (_variance(arrays, params, ctx) + _compactness(arrays, params, ctx)
            + _perturbation(arrays, params, ctx))


def render_trend(series, params, ctx) -> list[Figure]:
    """Compactness per factor and the effective number of dimensions against training step."""
    if len(series) < 2:
        return []
    steps = [str(s) for s, _ in series]
    x = np.arange(len(steps))
    fig = new_figure(8.0, 3.0)
    with styled():
        ax_c, ax_d = fig.subplots(1, 2)
        for factor in FACTORS:
            line, = ax_c.plot(x, [summary_value(s, f"compactness_{factor}") for _, s in series],
                              marker="o", markersize=3, linewidth=1.0,
                              label=FACTOR_LABELS[factor])
            band(ax_c, x, *interval_bounds([s for _, s in series], f"compactness_{factor}"),
                 line.get_color())
        ax_d.plot(x, [summary_value(s, "effective_dims") for _, s in series], marker="o",
                  markersize=3, linewidth=1.0, color=BAR)
        for ax in (ax_c, ax_d):
            ax.set_xticks(x, steps, rotation=60 if len(steps) > 6 else 0)
            ax.set_xlabel("training step")
        ax_c.set_ylabel("compactness")
        ax_d.set_ylabel("effective dimensions (Σvar)²/Σvar²")
        fig.suptitle(f"Capsule semantics over training, {ctx.model}".strip(", "), fontsize=9)
        legends_outside(fig)
    caption = (f"Capsule semantics over {len(steps)} training steps (same evaluation set and "
               f"transform grids at every step): compactness per affine factor (left; the KL "
               f"of the image-averaged shares of variance, the aggregation of Gu 2022's Table 5; "
               f"0 = the change of pose spreads over all dimensions, log D = it stays in one) "
               f"and the effective number of class-capsule dimensions in use (right).")
    note = interval_note([s for _, s in series], [f"compactness_{f}" for f in FACTORS],
                         "shaded")
    return figure_pair(fig, "capsule_semantics_trend", f"{caption} {note}".strip())


def render_compare(series, params, ctx) -> list[Figure]:
    """Compactness per factor of several models as grouped bars."""
    if len(series) < 2:
        return []
    models = [str(m) for m, _ in series]
    fig = new_figure(7.2, 3.0)
    with styled():
        ax = fig.subplots()
        factors = list(FACTORS)
        width = 0.8 / len(models)
        x = np.arange(len(factors))
        for m, (model, summary) in enumerate(series):
            ax.bar(x + (m - (len(models) - 1) / 2) * width,
                   [summary_value(summary, f"compactness_{f}") for f in factors], width=width,
                   label=f"{model} (eff. dims {summary_value(summary, 'effective_dims'):.1f})")
            error_bars(ax, x + (m - (len(models) - 1) / 2) * width,
                       *zip(*(bounds(summary, f"compactness_{f}") for f in factors)))
        ax.set_xticks(x, [FACTOR_LABELS[f] for f in factors])
        ax.set_ylabel("compactness KL(p ‖ uniform)")
        ax.set_title("Capsule semantics, models compared")
        legend_below(fig)
    caption = ("Compactness per affine factor of " + ", ".join(models) + " (the KL of the "
               "image-averaged shares of variance, the aggregation of Gu 2022's Table 5; each "
               "model with its own options and evaluation set at the chosen step); the legend "
               "gives each model's effective number of class-capsule dimensions.")
    note = interval_note([s for _, s in series], [f"compactness_{f}" for f in FACTORS],
                         "error bars")
    return figure_pair(fig, "capsule_semantics_compare", f"{caption} {note}".strip())
