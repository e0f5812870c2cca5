"""Charts of the affNIST-like benchmark (reportgen.techniques.affnist_benchmark); no TensorFlow."""

from __future__ import annotations

import numpy as np

from reportgen.figures.encode import new_figure
from reportgen.figures.figure import Figure
from reportgen.figures.plots import (chance_line, error_bars, figure_pair, interval_bounds,
                                     interval_note, legend_below, png_figure, style_axes, styled,
                                     summary_value)

COLORS = ("#1b9e77", "#d95f02")
PROTOCOL = ("affNIST-like test digits: padded to 40x40, then rotation within ±20°, shear within "
            "±45°, scale 0.8–1.2 per axis, translation within ±8 px (seeded, bilinear, zero "
            "fill); clean: the model's own 40x40 evaluation images (digits at random positions)")


def render(arrays, params, ctx) -> list[Figure]:
    clean = float(np.asarray(arrays["clean_accuracy"]))
    affine = float(np.asarray(arrays["affnist_accuracy"]))
    n = int(np.asarray(arrays["labels"]).size)
    names = tuple(getattr(ctx, "class_names", ()) or ())
    fig = new_figure(3.2, 2.4)
    with styled():
        ax = fig.subplots()
        ax.bar([0, 1], [clean, affine], 0.6, color=COLORS)
        for x, value in ((0, clean), (1, affine)):
            ax.annotate(f"{value:.2%}", (x, value), xytext=(0, 2), textcoords="offset points",
                        ha="center", fontsize=7)
        ax.set_xticks([0, 1])
        ax.set_xticklabels(["clean (40x40)", "affNIST-like"])
        chance_line(ax, len(names))
        if len(names) > 1:
            ax.legend(frameon=False, loc="lower right")
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("accuracy")
        style_axes(ax)
        fig.tight_layout()
    caption = (f"Accuracy on affinely transformed digits ({affine:.1%}) beside clean accuracy "
               f"({clean:.1%}). Details: "
               f"affNIST-like benchmark (Gu 2022, Ch.5), {ctx.model} step {ctx.step}: clean "
               f"accuracy {clean:.2%}, affNIST-like accuracy {affine:.2%} over {n} images. "
               f"{PROTOCOL}.")
    figures = figure_pair(fig, "benchmark", caption)
    images = np.asarray(arrays["example_images"], np.float64)
    if len(images):
        labels = np.asarray(arrays["example_labels"]).astype(int)
        predicted = np.asarray(arrays["example_predicted"]).astype(int)
        fig = new_figure(1.0 * len(images), 1.25)
        axes = np.atleast_1d(fig.subplots(1, len(images)))
        for ax, image, label, guess in zip(axes, images, labels, predicted):
            ax.imshow(image[..., 0] if image.shape[-1] == 1 else image, cmap="gray", vmin=0,
                      vmax=1, interpolation="nearest")
            name = lambda k: names[k] if 0 <= k < len(names) else str(k)   # noqa: E731
            ax.set_title(f"{name(label)} → {name(guess)}", fontsize=7,
                         color="#000000" if label == guess else "#c00000")
            ax.set_xticks([])
            ax.set_yticks([])
        fig.tight_layout()
        figures.append(png_figure(fig, "examples.png",
                                  "affNIST-like test images: true → predicted class (red: "
                                  f"wrong). {PROTOCOL}."))
    return figures


def render_compare(entries, params, ctx) -> list[Figure]:
    entries = list(entries)
    if not entries:
        return []
    models = [str(m) for m, _ in entries]
    x = np.arange(len(models))
    fig = new_figure(max(4.0, 1.0 + 0.9 * len(models)), 2.8)
    with styled():
        ax = fig.subplots()
        for i, (key, label) in enumerate((("clean_accuracy", "clean"),
                                          ("affnist_accuracy", "affNIST-like"))):
            ax.bar(x + (i - 0.5) * 0.38, [summary_value(s, key) for _, s in entries], 0.38,
                   color=COLORS[i], label=label)
            error_bars(ax, x + (i - 0.5) * 0.38, *interval_bounds([s for _, s in entries], key))
        ax.set_xticks(x)
        ax.set_xticklabels(models, rotation=30 if len(models) > 3 else 0,
                           ha="right" if len(models) > 3 else "center")
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("accuracy")
        style_axes(ax)
        legend_below(fig)
    caption = (f"affNIST-like benchmark across models (each at its step on this page): clean "
               f"and affNIST-like accuracy. {PROTOCOL}. Gu 2022 (Table 1, models stopped at "
               f"≈ 99.22% on MNIST): Aff-CapsNet 93.21%, ConvNet-Avg 94.11%, CapsNet 79%, "
               f"ConvNet-FC 66% on affNIST.")
    note = interval_note([s for _, s in entries], ["clean_accuracy", "affnist_accuracy"],
                         "error bars")
    return figure_pair(fig, "compare", f"{caption} {note}".strip())
