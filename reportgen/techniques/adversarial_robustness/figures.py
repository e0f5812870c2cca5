"""Figures of the adversarial-robustness analysis (reportgen.techniques.adversarial_robustness).

Plots are matplotlib figures (pyplot-free, deterministic bytes via encode.matplotlib_bytes), each
written as a PNG for the site and an SVG for papers; the example images are a PNG. No TensorFlow.
"""

from __future__ import annotations

import numpy as np

from reportgen.figures.encode import new_figure
from reportgen.figures.plots import (band, bounds, chance_line, figure_pair, interval_bounds,
                                     interval_note, legend_below, png_figure, style_axes,
                                     summary_value)
from reportgen.techniques.adversarial_robustness.numbers import (ATTACK_LABELS, TARGET_LABELS,
                                                                 metric_key)
from reportgen.figures.figure import Figure

TARGET_COLORS = {"capsules": "#d95f02", "votes": "#7570b3"}
ATTACK_STYLES = {"fgsm": ("--", "s"), "pgd": ("-", "o")}
CLEAN_COLOR = "#1b9e77"
FONT = 8
DPI = 110
GU_2022 = ("For context, Gu 2022 reports that attacking the votes is much stronger than "
           "attacking the output capsules: on CIFAR-10 under PGD, 17.3% robust accuracy via the "
           "output capsules vs 4.83% via the votes.")


def _combos(params):
    return [(t, target, a, attack) for t, target in enumerate(params.targets)
            for a, attack in enumerate(params.attacks)]


def _combo_label(target: str, attack: str) -> str:
    return f"{ATTACK_LABELS[attack]} via {TARGET_LABELS[target]}"


def _eps_list(epsilons) -> str:
    return ", ".join(f"{float(e):g}" for e in epsilons)


# The class scores when the caption covers several models (compare) or none is described.
ANY_SCORES = ("class scores (each model's own: the log of its class-capsule lengths or "
              "activations or of a CNN's class probabilities; the logits of a learnt readout "
              "as they are)")


def procedure(params, images: int | str, description=None) -> str:
    """Every procedure choice, for the captions; the class scores named from the model's
    `description` when given (reportgen.capsnet.description.ModelDescription.class_scores)."""
    step = ("alpha = 2.5 eps / steps" if params.pgd_step_size == 0
            else f"alpha = {float(params.pgd_step_size):g}")
    start = "a uniform random point of the eps-ball" if params.random_start else "the clean input"
    from reportgen.capsnet.model_words import encoder_score_label, scores_kind, scores_phrase

    if description is None:
        scores, largest, logged = ANY_SCORES, "class score", False
    else:
        scores, largest = scores_phrase(description), encoder_score_label(description)
        logged = scores_kind(description) != "logits"       # logits are taken as they are
    through = ("through the output capsules (routing included) or through the votes (Gu 2022: "
               "the votes u_hat[j|i] of all primary capsules averaged per class and squashed, "
               "bypassing routing)" if "votes" in params.targets else "through the model's output")
    return (f"Untargeted L-infinity attacks on the true label, {images} evaluation images, "
            f"pixels in [0, 1], eps in {{{_eps_list(params.epsilons)}}}: FGSM (one signed "
            f"gradient step of size eps) and PGD ({params.pgd_steps} signed steps of {step} from "
            f"{start}, projected on the eps-ball and [0, 1]; the last iterate is used). Loss: "
            f"cross-entropy of the softmax of the {'log ' if logged else ''}{scores} with the true "
            f"label, {through}. "
            f"Every adversarial example is classified by the real model (the largest {largest}).")


def _detection_text(arrays) -> str:
    clean = np.asarray(arrays["clean_distances"], np.float64)
    threshold = float(np.asarray(arrays["threshold"]))
    fpr = float(np.mean(clean > threshold)) if len(clean) else float("nan")
    return (f"Detection: distance = L2 norm of the input minus its reconstruction from the "
            f"predicted class capsule; threshold = 95th percentile of the clean distances "
            f"({threshold:.3g}; {fpr:.1%} of clean images flagged). Success rate = misclassified "
            f"among originally-correct images; undetected rate = successful AND distance <= "
            f"threshold, among originally-correct images.")


def _model_prefix(ctx) -> str:
    model = getattr(ctx, "model", "")
    step = getattr(ctx, "step", "")
    return f"{model} step {step}: " if model and step else (f"{model}: " if model else "")


# --- one result ---------------------------------------------------------------------------------

def render(arrays, params, ctx) -> list[Figure]:
    epsilons = np.asarray(arrays["epsilons"], np.float64)
    has_decoder = bool(np.asarray(arrays["has_decoder"]))
    n = len(np.asarray(arrays["labels"]))
    clean_accuracy = float(np.asarray(arrays["clean_accuracy"]))
    prefix = _model_prefix(ctx)
    text = procedure(params, n, getattr(ctx, "description", None))

    fig = new_figure(5.6, 3.4, dpi=DPI)
    ax = fig.subplots()
    from reportgen.techniques.adversarial_robustness import summarize

    summary = summarize(arrays, params)     # each accuracy's Wilson interval over the images
    _curves(ax, epsilons, np.asarray(arrays["accuracy"], np.float64), params, summary)
    ax.axhline(clean_accuracy, color=CLEAN_COLOR, linestyle=":", linewidth=1,
               label=f"clean ({clean_accuracy:.1%})")
    chance_line(ax, len(ctx.class_names))
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("accuracy", fontsize=FONT)
    ax.set_title(f"{prefix}accuracy under attack ({n} images)", fontsize=FONT + 1)
    ax.legend(fontsize=FONT - 1, frameon=False)
    fig.tight_layout()
    caption = (f"Accuracy under FGSM and PGD attacks of growing strength ε, on the output and on "
               f"the votes. Details: "
               f"Adversarial robustness, {prefix}accuracy vs attack strength eps for each attack "
               f"and attack target (dotted: clean accuracy). {text} {GU_2022}")
    note = interval_note([summary], [metric_key("accuracy", target, attack,
                                                round(float(e), 6))
                                     for _, target, _, attack in _combos(params)
                                     for e in epsilons], "shaded")
    figures = figure_pair(fig, "accuracy", f"{caption} {note}".strip(), svg_size=False)
    if has_decoder:
        figures += _detection_figures(arrays, params, prefix, text, summary)
    figures += _examples_figure(arrays, params, ctx, prefix, has_decoder)
    return figures


def _curves(ax, epsilons, values, params, summary=None, metric: str = "accuracy") -> None:
    """`metric` against eps per attack and target, each in the band of its 95% intervals
    (`summary`'s, when given)."""
    for t, target, a, attack in _combos(params):
        style, marker = ATTACK_STYLES[attack]
        ax.plot(epsilons, values[t, a], style, marker=marker, markersize=3.5,
                color=TARGET_COLORS[target], linewidth=1.4, label=_combo_label(target, attack))
        if summary is not None:
            ends = [bounds(summary, metric_key(metric, target, attack, round(float(e), 6)))
                    for e in epsilons]
            band(ax, epsilons, [lo for lo, _ in ends], [hi for _, hi in ends],
                 TARGET_COLORS[target])
    ax.set_xlabel("eps (L-infinity, pixel scale 0 … 1)", fontsize=FONT)
    style_axes(ax)


def _detection_figures(arrays, params, prefix, text, summary=None) -> list[Figure]:
    epsilons = np.asarray(arrays["epsilons"], np.float64)
    detection = _detection_text(arrays)
    fig = new_figure(8.4, 3.3, dpi=DPI)
    axes = fig.subplots(1, 2)
    for ax, metric, title in ((axes[0], "success", "attack success rate"),
                              (axes[1], "undetected", "successful and undetected")):
        _curves(ax, epsilons, np.asarray(arrays[metric], np.float64), params, summary, metric)
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("share of originally-correct images", fontsize=FONT)
        ax.set_title(title, fontsize=FONT + 1)
    axes[0].legend(fontsize=FONT - 1, frameon=False)
    fig.suptitle(f"{prefix}reconstruction-based detection", fontsize=FONT + 2)
    fig.tight_layout()
    caption = (f"Does the reconstruction error flag adversarial inputs? Attack success with and "
               f"without detection. Details: "
               f"Reconstruction-based detection of adversarial examples, {prefix}success rate "
               f"(left) and undetected success rate (right) vs eps. {detection} {text}")
    note = "" if summary is None else interval_note(
        [summary], [metric_key(m, target, attack, round(float(e), 6))
                    for m in ("success", "undetected") for _, target, _, attack in _combos(params)
                    for e in epsilons], "shaded")
    figures = figure_pair(fig, "detection", f"{caption} {note}".strip(), svg_size=False)

    # Histograms of distances at the chosen eps.
    combos = _combos(params)
    hist_eps = float(params.histogram_epsilon)
    clean = np.asarray(arrays["clean_distances"], np.float64)
    distances = np.asarray(arrays["histogram_distances"], np.float64)
    success = np.asarray(arrays["histogram_success"]).astype(bool)
    threshold = float(np.asarray(arrays["threshold"]))
    columns = min(len(combos), 2)
    rows = int(np.ceil(len(combos) / columns))
    fig = new_figure(4.2 * columns, 2.8 * rows, dpi=DPI)
    axes = np.asarray(fig.subplots(rows, columns)).reshape(-1)
    finite = np.concatenate([clean[np.isfinite(clean)], distances[np.isfinite(distances)]])
    top = float(finite.max()) if len(finite) else 1.0
    bins = np.linspace(0.0, top * 1.02 if top > 0 else 1.0, 31)
    for ax, (t, target, a, attack) in zip(axes, combos):
        ax.hist(clean, bins=bins, color=CLEAN_COLOR, alpha=0.55, label=f"clean ({len(clean)})")
        chosen = distances[t, a][success[t, a]]
        ax.hist(chosen, bins=bins, histtype="step", color=TARGET_COLORS[target], linewidth=1.4,
                label=f"successful adversarial ({len(chosen)})")
        ax.axvline(threshold, color="#333333", linestyle="--", linewidth=1,
                   label="threshold (95th pct clean)")
        ax.set_title(f"{_combo_label(target, attack)}, eps {hist_eps:g}", fontsize=FONT + 1)
        ax.set_xlabel("L2 distance input - reconstruction", fontsize=FONT)
        ax.set_ylabel("images", fontsize=FONT)
        style_axes(ax)
        ax.legend(fontsize=FONT - 1, frameon=False)
    for ax in axes[len(combos):]:
        ax.set_visible(False)
    fig.tight_layout()
    caption = (f"Reconstruction distances of clean and adversarial inputs, with the detection "
               f"threshold. Details: "
               f"Reconstruction distances, {prefix}clean images (all) vs successful adversarial "
               f"examples (misclassified, originally correct) at eps = {hist_eps:g}, per attack; "
               f"dashed: the detection threshold, inputs to its right are flagged. {detection} "
               f"{text}")
    return figures + figure_pair(fig, "distances", caption, svg_size=False)


def _examples_figure(arrays, params, ctx, prefix, has_decoder) -> list[Figure]:
    clean = np.asarray(arrays["example_clean"], np.float64)
    if clean.ndim != 4 or len(clean) == 0:
        return []
    names = tuple(getattr(ctx, "class_names", ()) or ())
    label = lambda k: names[k] if 0 <= k < len(names) else str(k)        # noqa: E731
    threshold = float(np.asarray(arrays["threshold"]))
    hist_eps = float(params.histogram_epsilon)
    columns = [("clean", clean, None, None)]
    if has_decoder:
        columns.append(("clean recon.", np.asarray(arrays["example_clean_reconstruction"]),
                        None, np.asarray(arrays["example_clean_distance"])))
    for t, target, a, attack in _combos(params):
        short = f"{ATTACK_LABELS[attack]}/{'votes' if target == 'votes' else 'caps'}"
        pred = np.asarray(arrays["example_predicted"])[t, a]
        columns.append((f"{short} adv.", np.asarray(arrays["example_adversarial"])[t, a], pred,
                        None))
        if has_decoder:
            columns.append((f"{short} recon.", np.asarray(arrays["example_reconstruction"])[t, a],
                            None, np.asarray(arrays["example_distance"])[t, a]))
    rows = len(clean)
    fig = new_figure(1.05 * len(columns), 1.35 * rows + 0.4, dpi=DPI)
    axes = np.asarray(fig.subplots(rows, len(columns))).reshape(rows, len(columns))
    labels = np.asarray(arrays["example_labels"])
    for r in range(rows):
        for c, (title, images, pred, dist) in enumerate(columns):
            ax = axes[r, c]
            image = np.clip(np.asarray(images[r], np.float64), 0.0, 1.0)
            if image.shape[-1] == 1:
                ax.imshow(image[..., 0], cmap="gray", vmin=0, vmax=1, interpolation="nearest")
            else:
                ax.imshow(image[..., :3], interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(title, fontsize=FONT - 1)
            if c == 0:
                ax.set_ylabel(f"true {label(int(labels[r]))}", fontsize=FONT - 1)
            if pred is not None:
                wrong = int(pred[r]) != int(labels[r])
                ax.set_xlabel(f"pred {label(int(pred[r]))}", fontsize=FONT - 1,
                              color="#c0392b" if wrong else "#333333")
            elif dist is not None and np.isfinite(dist[r]):
                flagged = float(dist[r]) > threshold
                ax.set_xlabel(f"d {float(dist[r]):.2f}{' flag' if flagged else ''}",
                              fontsize=FONT - 1, color="#c0392b" if flagged else "#333333")
    fig.suptitle(f"{prefix}examples at eps {hist_eps:g}", fontsize=FONT + 1)
    fig.tight_layout()
    recon = (" and its reconstruction from the predicted class capsule (d = L2 distance to the "
             "input; 'flag' = above the detection threshold)" if has_decoder else "")
    caption = (f"What the attacks do to one image per class. Details: "
               f"Adversarial examples, {prefix}one originally-correct image per class (rows): "
               f"the clean input, then for each attack and target the adversarial image at eps "
               f"= {hist_eps:g} with the real model's prediction (red when wrong){recon}.")
    return [png_figure(fig, "examples.png", caption)]


# --- over training steps and across models ------------------------------------------------------

def render_trend(history, params, ctx) -> list[Figure]:
    """Accuracy per eps over training steps, one panel per attack and target."""
    history = list(history)
    if not history:
        return []
    steps = [str(s) for s, _ in history]
    x = np.arange(len(steps))
    combos = _combos(params)
    cols = min(2, len(combos))        # two abreast: the supplement prints at the text width
    rows = -(-len(combos) // cols)
    fig = new_figure(3.2 * cols, 2.8 * rows + 0.6, dpi=DPI)
    grid = np.asarray(fig.subplots(rows, cols, squeeze=False))
    for extra in grid.flat[len(combos):]:
        extra.set_axis_off()
    axes = grid.reshape(-1)[:len(combos)]
    colors = _eps_colors(params.epsilons)
    for ax, (_, target, _, attack) in zip(axes, combos):
        for epsilon, color in zip(params.epsilons, colors):
            key = metric_key("accuracy", target, attack, epsilon)
            ax.plot(x, [summary_value(s, key) for _, s in history], marker="o", markersize=3,
                    color=color, label=f"eps {epsilon:g}" + (" (clean)" if epsilon == 0 else ""))
            band(ax, x, *interval_bounds([s for _, s in history], key), color)
        chance_line(ax, len(getattr(ctx, "class_names", ()) or ()))
        ax.set_title(_combo_label(target, attack), fontsize=FONT + 1)
        ax.set_ylim(0, 1.02)
        ax.set_xticks(x)
        ax.set_xticklabels(steps, rotation=90 if len(steps) > 6 else 0, fontsize=FONT - 1)
        ax.set_xlabel("training step", fontsize=FONT)
        style_axes(ax)
    for ax in grid[:, 0]:
        ax.set_ylabel("accuracy", fontsize=FONT)
    model = getattr(ctx, "model", "")
    fig.suptitle(f"{model + ': ' if model else ''}adversarial accuracy over training",
                 fontsize=FONT + 2)
    legend_below(fig)
    images = history[-1][1].get("images", "?")
    caption = (f"Adversarial robustness over training steps{' of ' + model if model else ''}: "
               f"accuracy at each eps, one panel per attack and attack target. "
               f"{procedure(params, images, getattr(ctx, 'description', None))} {GU_2022}")
    keys = [metric_key("accuracy", target, attack, e) for _, target, _, attack in combos
            for e in params.epsilons]
    note = interval_note([s for _, s in history], keys, "shaded")
    return figure_pair(fig, "trend", f"{caption} {note}".strip(), svg_size=False)


def _eps_colors(epsilons):
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    count = len(epsilons)
    return [cmap(0.9 * i / max(1, count - 1)) for i in range(count)]


def render_compare(entries, params, ctx) -> list[Figure]:
    """Accuracy (and, with a decoder, undetected rate) vs eps, one line per model."""
    entries = list(entries)
    if not entries:
        return []
    combos = _combos(params)
    detection = any(s.get("has_decoder") for _, s in entries)
    rows = 2 if detection else 1
    # a row per attack, a column per measure: two abreast at most (the supplement prints at
    # the text width)
    fig = new_figure(3.2 * rows, 2.4 * len(combos) + 0.6, dpi=DPI)
    axes = np.asarray(fig.subplots(len(combos), rows, squeeze=False)).T
    from matplotlib import colormaps

    palette = colormaps["tab10"]
    epsilons = np.asarray(params.epsilons, np.float64)
    for c, (_, target, _, attack) in enumerate(combos):
        for i, (model, summary) in enumerate(entries):
            for r, metric in enumerate(("accuracy", "undetected")[:rows]):
                keys = [metric_key(metric, target, attack, e) for e in params.epsilons]
                values = [summary_value(summary, key) for key in keys]
                axes[r, c].plot(epsilons, values, marker="o", markersize=3,
                                color=palette(i % 10), label=str(model))
                lows, highs = zip(*(bounds(summary, key) for key in keys))
                band(axes[r, c], epsilons, lows, highs, palette(i % 10))
        for r, metric in enumerate(("accuracy", "undetected success rate")[:rows]):
            axes[r, c].set_title(f"{_combo_label(target, attack)}: {metric}",
                                 fontsize=FONT + 1)
            axes[r, c].set_ylim(0, 1.02)
            if c == len(combos) - 1:
                axes[r, c].set_xlabel("eps", fontsize=FONT)
            style_axes(axes[r, c])
    fig.suptitle("Adversarial robustness across models", fontsize=FONT + 2)
    legend_below(fig)
    models = ", ".join(f"{m} ({s.get('images', '?')} images, clean accuracy "
                       f"{summary_value(s, 'clean_accuracy'):.1%})" for m, s in entries)
    undetected = (" Right column: successful AND undetected adversarial examples among "
                  "originally-correct images (threshold: 95th percentile of each model's clean "
                  "reconstruction distances; models without a decoder have no line)."
                  if detection else "")
    caption = (f"Adversarial robustness across models ({models}): accuracy vs eps, one row per "
               f"attack and attack target.{undetected} {procedure(params, 'the')} {GU_2022}")
    keys = [metric_key(metric, target, attack, e) for _, target, _, attack in combos
            for metric in ("accuracy", "undetected")[:rows] for e in params.epsilons]
    note = interval_note([s for _, s in entries], keys, "shaded")
    return figure_pair(fig, "compare", f"{caption} {note}".strip(), svg_size=False)
