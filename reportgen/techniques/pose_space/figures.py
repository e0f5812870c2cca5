"""The pose-space chart (reportgen.techniques.pose_space): one Vega-Lite spec per step, drawn
for the paper (PNG, SVG, PDF through reportgen.figures.vega) and, with the images' thumbnails
in its tooltips, live on the page by assets/pose-space.js, which loads the step's script:

`pose_space.js` registers window.reportgenPoseSpace[model][step] = {spec, projection}: the
spec is the same as
the paper's, whose rows also hold `image` (the evaluation image as a PNG data URI; vega-tooltip
shows a tooltip entry named "image" as the picture) and `digest` (reportgen.figures.encode
.pixel_digest, which the model index gives its inputs too: the page links a point to the input
page of the same image), and which zooms and pans. `projection` = {dimensions: D, mean,
components: base64 of the stored float32 arrays (D,) and (2, D), little-endian}: the page
projects the reader's drawn digit with them, (pose - mean) . components^T, exactly
numbers.project (the draw panel's class poses, reportgen/techniques/draw_panel). Kept as
float32 bytes rather than decimal text: exact, and 3 x D x 4 bytes (2.6 kB in base64 for
MNIST_Demo's 160 pose values) beside the step's thumbnails.
No TensorFlow here."""

from __future__ import annotations

import base64
import json

import numpy as np

from reportgen.figures.figure import Figure
from reportgen.results import intervals as iv
from reportgen.techniques.pose_space import numbers as nb

WIDTH, HEIGHT = 420, 340
MARKS = ("correct", "misclassified")


def pixel_digest(image: np.ndarray) -> str:
    from reportgen.figures.encode import pixel_digest as digest

    return digest(image)


def _thumbnail(image: np.ndarray) -> str:
    from reportgen.figures.encode import png_bytes

    return "data:image/png;base64," + base64.b64encode(png_bytes(image)).decode("ascii")


def _round(values, digits: int = 4) -> list[float]:
    """Coordinates with `digits` significant digits: the chart needs no more (and the step's
    script stays small)."""
    return [float(f"{v:.{digits}g}") for v in np.asarray(values, np.float64).tolist()]


def share_interval(arrays, k: int) -> iv.Interval:
    return iv.Interval(float(arrays[nb.SHARES][k]), float(arrays[nb.SHARE_LOW][k]),
                       float(arrays[nb.SHARE_HIGH][k]), int(len(arrays[nb.LABELS])),
                       iv.BOOTSTRAP_STATISTIC)


def axis_title(arrays, k: int) -> str:
    """"PC1: 45.2% of the variance (95% CI 41.0–49.3%; isotropic 1/D 0.6%)"."""
    share = share_interval(arrays, k)
    dims = int(np.asarray(arrays[nb.DIMENSIONS]))
    return (f"PC{k + 1}: {100 * share.value:.1f}% of the variance "
            f"({iv.ci_text(share, 100, 1, '%')}; isotropic 1/D {100 / dims:.1f}%)")


def rows(arrays, class_names, images: bool) -> list[dict]:
    """One row per evaluation image: its coordinates, classes, mark (and thumbnail)."""
    projection = np.asarray(arrays[nb.PROJECTION], np.float64)
    labels = np.asarray(arrays[nb.LABELS], np.int64)
    predicted = np.asarray(arrays[nb.PREDICTED], np.int64)
    names = list(class_names) if len(class_names) > max(labels.max(initial=0),
                                                         predicted.max(initial=0)) else \
        [str(k) for k in range(int(max(labels.max(initial=0), predicted.max(initial=0))) + 1)]
    pc1, pc2 = _round(projection[:, 0]), _round(projection[:, 1])
    thumbs = np.asarray(arrays[nb.THUMBNAILS]) if images else None
    out = []
    for i in range(len(labels)):
        row = {"pc1": pc1[i], "pc2": pc2[i], "true": names[labels[i]],
               "predicted": names[predicted[i]],
               "mark": MARKS[int(labels[i] != predicted[i])], "index": i}
        if thumbs is not None:
            row["image"] = _thumbnail(thumbs[i])
            row["digest"] = pixel_digest(thumbs[i])
        out.append(row)
    return out


def chart_spec(arrays, class_names, live: bool) -> dict:
    """The chart as Vega-Lite: points on PC1 x PC2, colour = true class, a cross = a
    misclassified image; `live` adds the thumbnails, the tooltips and zooming."""
    from reportgen.figures.vega import CONFIG

    values = rows(arrays, class_names, images=live)
    domain = list(dict.fromkeys(sorted({r["true"] for r in values},
                                       key=lambda n: list(class_names).index(n)
                                       if n in class_names else len(class_names))))
    encoding = {
        "x": {"field": "pc1", "type": "quantitative", "title": axis_title(arrays, 0),
              "scale": {"zero": False, "nice": True}},
        "y": {"field": "pc2", "type": "quantitative", "title": axis_title(arrays, 1),
              "scale": {"zero": False, "nice": True}},
        "color": {"field": "true", "type": "nominal", "title": "true class",
                  "scale": {"domain": domain,
                            "scheme": "category10" if len(domain) <= 10 else "tableau20"}},
        "shape": {"field": "mark", "type": "nominal", "title": "prediction",
                  "scale": {"domain": list(MARKS), "range": ["circle", "cross"]}},
        "order": {"field": "mark", "type": "nominal", "sort": "ascending"},
    }
    spec = {"$schema": "https://vega.github.io/schema/vega-lite/v5.json",
            "width": WIDTH, "height": HEIGHT, "config": CONFIG,
            "data": {"values": values},
            "mark": {"type": "point", "filled": True, "opacity": 0.8, "size": 45},
            "encoding": encoding}
    if live:
        encoding["tooltip"] = [{"field": "image", "title": "image"},
                               {"field": "true", "title": "true class"},
                               {"field": "predicted", "title": "predicted"},
                               {"field": "pc1", "title": "PC1", "format": ".4~g"},
                               {"field": "pc2", "title": "PC2", "format": ".4~g"},
                               {"field": "index", "title": "evaluation image #"}]
        # assets/pose-space.js sets `href` on the rows of images that have a page of their own
        # (an input of the model with the same pixels, `digest`): a click opens it
        encoding["href"] = {"field": "href"}
        spec["params"] = [{"name": "zoom", "select": "interval", "bind": "scales"}]
    return spec


def _floats(array) -> str:
    return base64.b64encode(np.ascontiguousarray(array, "<f4").tobytes()).decode("ascii")


def projection_record(arrays) -> dict:
    """The stored mean and axes a new point is projected with (numbers.project)."""
    return {"dimensions": int(np.asarray(arrays[nb.DIMENSIONS])),
            "mean": _floats(arrays[nb.MEAN]), "components": _floats(arrays[nb.COMPONENTS])}


def script(model: str, step: str, spec: dict, projection: dict | None = None) -> bytes:
    """`pose_space.js`: the live spec (and the projection's mean and axes) registered under
    model and step (a page opened from file:// cannot fetch a file, but can load a script)."""
    from reportgen.techniques.live_decoder.figures import js_literal, js_safe

    body = json.dumps({"spec": spec, **({"projection": projection} if projection else {})},
                      separators=(",", ":"))
    return ("/* reportgen pose space: the step's chart (Vega-Lite) with its thumbnails. */\n"
            "(function (registry) {\n"
            f"  var model = {js_literal(model)};\n"
            "  registry[model] = registry[model] || {};\n"
            f"  registry[model][{js_literal(step)}] = {js_safe(body)};\n"
            "})(window.reportgenPoseSpace = window.reportgenPoseSpace || {});\n").encode()


def _points_words(ctx, poses: bool) -> str:
    if not poses:
        return "one logistic activation per class: the class capsules have no pose"
    layer = ctx.description.class_capsules if ctx.description is not None else None
    if layer is not None and layer.pose.startswith("matrix"):
        return (f"all {layer.types} class capsules' pose matrices, each flattened row-major "
                f"to {layer.pose_size} values, laid end to end")
    if layer is not None:
        return (f"all {layer.types} class capsules' {layer.pose_size}-dimensional pose vectors "
                f"laid end to end")
    return "all class capsules' poses laid end to end"


def caption(arrays, ctx) -> str:
    from reportgen.results.intervals import ci_text

    dims = int(np.asarray(arrays[nb.DIMENSIONS]))
    images = int(len(arrays[nb.LABELS]))
    first, second = share_interval(arrays, 0), share_interval(arrays, 1)
    poses = bool(int(np.asarray(arrays[nb.CLASS_POSES])))
    wrong = int(np.sum(np.asarray(arrays[nb.LABELS]) != np.asarray(arrays[nb.PREDICTED])))
    what = ("the class capsules' poses" if poses else
            "the class layer's activations (its capsules have no pose)")
    top = nb.isotropic_top_share(dims, images)
    return (f"The {images} evaluation images in the space of {what}: PC1 explains "
            f"{100 * first.value:.1f}% of the variance ({ci_text(first, 100, 1, '%')}) and PC2 "
            f"{100 * second.value:.1f}% ({ci_text(second, 100, 1, '%')}), against "
            f"{100 / dims:.1f}% (1/D) for an isotropic cloud. Details: "
            f"Each point is one image's {dims} values ({_points_words(ctx, poses)}"
            f"), centred and projected on the first two principal components fitted at step "
            f"{ctx.step} (PCA, Pearson 1901: SVD of the centred values; each axis's largest "
            f"loading positive). Colour: true class; a cross: misclassified ({wrong} of "
            f"{images}). A component's share is its variance over the total; interval: "
            f"{iv.BOOTSTRAP_STATISTIC}, {iv.RESAMPLES} resamples of the images, along these axes "
            f"held fixed. Reference: any component of an "
            f"isotropic cloud explains 1/D = {100 / dims:.2f}%; a sample of {images} "
            f"isotropic points shows a top share up to about (1 + sqrt(D/N))^2 / D = "
            f"{100 * top:.1f}% by chance (Marchenko-Pastur). On the page: hover a point for "
            f"its image and values; wheel and drag zoom and pan.")


def render_pose_space(arrays, params, ctx) -> list[Figure]:
    """The chart's PNG, SVG and PDF (no thumbnails), its numbers (JSON) and the page's
    script (the live chart)."""
    from reportgen.figures.vega import paper_files

    names = tuple(ctx.class_names)
    text = caption(arrays, ctx)
    figures = paper_files(chart_spec(arrays, names, live=False), "pose_space", text)
    numbers = {"step": ctx.step, "images": int(len(arrays[nb.LABELS])),
               "dimensions": int(np.asarray(arrays[nb.DIMENSIONS])),
               "shares": _round(arrays[nb.SHARES], 6),
               "pc_share_low": _round(arrays[nb.SHARE_LOW], 6),
               "pc_share_high": _round(arrays[nb.SHARE_HIGH], 6),
               "mean": _round(arrays[nb.MEAN], 7),
               "components": [_round(c, 7) for c in np.asarray(arrays[nb.COMPONENTS])],
               "points": rows(arrays, names, images=False)}
    figures.append(Figure(name="pose_space_points.json", kind="json", caption=text,
                          data=json.dumps(numbers, separators=(",", ":")).encode() + b"\n"))
    figures.append(Figure(name="pose_space.js", kind="js", caption=text,
                          data=script(ctx.model, ctx.step,
                                      chart_spec(arrays, names, live=True),
                                      projection_record(arrays))))
    return figures


TREND_KEYS = (("pc1_share", "PC1"), ("pc2_share", "PC2"))


def render_trend(series, params, ctx) -> list[Figure]:
    """PC1's and PC2's share of the pose variance against training step, with their 95%
    intervals as bands and the isotropic reference 1/D dashed."""
    from reportgen.figures.plots import figure_pair, legends_outside, lines_over_steps, styled
    from reportgen.figures.encode import new_figure

    if len(series) < 2:
        return []
    fig = new_figure(4.8, 3.0)
    reference = float(series[-1][1].get("isotropic_share", 0.0))
    with styled():
        ax = fig.subplots(1, 1)
        lines_over_steps(ax, series, TREND_KEYS)
        ax.axhline(reference, color="0.4", linestyle="--", linewidth=0.8,
                   label=f"isotropic 1/D = {100 * reference:.1f}%")
        ax.set_ylim(0, 1)
        ax.set_ylabel("share of the pose variance")
        fig.suptitle(f"Pose space over training, {ctx.model}".strip(", "), fontsize=9)
        legends_outside(fig)
    caption = (f"How much of the class capsules' pose variance the first two principal "
               f"components explain over {len(series)} training steps, each fitted on the same "
               f"evaluation images, beside 1/D, an isotropic cloud's share. Details: bands: 95% "
               f"{iv.BOOTSTRAP_STATISTIC} over the images, along each step's axes held fixed.")
    return figure_pair(fig, "pose_space_trend", caption)
