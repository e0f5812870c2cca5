"""What the Decoder page's live decoder reads besides the weights (issue 6), one script per
(model, step): `models/SLUG/live/STEP.js`.

For every input at that step it holds the real class capsules (all classes x dims, from the
`class_capsules` panel's JSON export), their lengths, the predicted class, and the reference
reconstruction of each class's real capsule computed here in Python (NumPy) from the exported
float16 weights: the same computation the page's JavaScript runs at its initial slider values, so
the two images side by side must agree (to 1/255 after rounding to 8 bits); how far the float16
weights are from the float32 Keras decoder is measured when they are exported (the manifest's
"check"). It also holds the standard deviation of each pose dimension that the "±k σ" slider
ranges use: over the evaluation set when the `capsule_semantics` analysis ran at that step,
otherwise over the chosen inputs (the page says which).

Like data.js, the script registers itself (`window.reportgenLive.inputs[model][step]`) because
fetch() of local files is blocked on file://. No TensorFlow here.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reportgen.figures import live_decoder as fmt
from reportgen.pages.sitedata import ModelData, Panel, StepData

TECHNIQUE = "live_decoder"
SEMANTICS = "capsule_semantics"


@dataclass
class LiveStep:
    """The live decoder's files of one step (docs-relative paths) and their sizes."""

    step: str
    manifest: dict
    weights_bytes: int          # the float16 binary
    script_bytes: int           # the same weights base64-encoded in the page's script
    inputs_script: str          # contents of models/SLUG/live/STEP.js


def find_panel(panels: list[Panel], technique: str) -> Panel | None:
    return next((p for p in panels if p.technique == technique), None)


def figure_path(panel: Panel | None, kind: str) -> str | None:
    if panel is None:
        return None
    return next((f.path for f in panel.figures if f.kind == kind), None)


def _read_json(docs: Path, path: str | None):
    if not path:
        return None
    try:
        return json.loads((docs / path).read_text("utf-8"))
    except (OSError, ValueError):
        return None


def live_step(docs: Path, model: ModelData, step: StepData) -> LiveStep | None:
    """The live decoder's data at `step`, or None when its weights were not exported there."""
    panel = find_panel(step.checkpoint_panels, TECHNIQUE)
    manifest = _read_json(docs, figure_path(panel, "json"))
    binary, script = figure_path(panel, "bin"), figure_path(panel, "js")
    if manifest is None or binary is None or script is None:
        return None
    try:
        data = (docs / binary).read_bytes()
        layers = fmt.unpack(data, manifest)
        script_bytes = (docs / script).stat().st_size
    except (OSError, ValueError):
        return None
    classes, dims = manifest["classes"], manifest["dims"]
    shape = manifest["output_shape"]
    inputs, predicted_vectors = {}, []
    for inp in model.inputs:
        found = _read_json(docs, figure_path(
            find_panel(step.input_panels.get(inp.key, []), "class_capsules"), "json"))
        capsules = np.asarray(found["capsules"], np.float64) if found else None
        if capsules is None or capsules.shape != (classes, dims):
            continue
        lengths = [float(v) for v in found["lengths"]]
        predicted = int(np.argmax(lengths))
        images = fmt.forward(layers, fmt.masked(capsules, np.arange(classes), classes), shape)
        inputs[inp.key] = {
            "capsules": found["capsules"], "lengths": lengths, "predicted": predicted,
            "python": base64.b64encode(fmt.to_pixels(images).tobytes()).decode("ascii"),
        }
        predicted_vectors.append(capsules[predicted])
    record = {"model": model.name, "step": step.step, "inputs": inputs,
              "std": dimension_std(docs, step, dims, predicted_vectors)}
    body = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    text = ("/* reportgen live decoder: class capsules and Python reconstructions of every input "
            "at one step (see reportgen/pages/live.py). */\n"
            "(function (registry) {\n"
            f"  var model = {fmt.js_literal(model.name)};\n"
            "  registry.inputs = registry.inputs || {};\n"
            "  registry.inputs[model] = registry.inputs[model] || {};\n"
            f"  registry.inputs[model][{fmt.js_literal(step.step)}] = {fmt.js_safe(body)};\n"
            "})(window.reportgenLive = window.reportgenLive || {});\n")
    return LiveStep(step=step.step, manifest=manifest, weights_bytes=len(data),
                    script_bytes=script_bytes, inputs_script=text)


def dimension_std(docs: Path, step: StepData, dims: int, vectors: list) -> dict:
    """{values: [dims] | None, source: "evaluation" | "inputs" | None, note}: the spread of each
    pose dimension of the predicted class capsule."""
    summary = _read_json(docs, figure_path(find_panel(step.dataset_panels, SEMANTICS), "json"))
    values = _std_from_summary(summary, dims) if summary is not None else None
    if values is not None:
        count = _first_number(summary, ("images", "count", "n", "evaluation_images"))
        over = f"{int(count)} evaluation images" if count else "the evaluation set"
        return {"values": values, "source": "evaluation",
                "note": f"σ of each dimension of the predicted class capsule over {over} "
                        "(capsule semantics analysis at this step)."}
    if len(vectors) >= 2:
        std = np.std(np.asarray(vectors, np.float64), axis=0)
        return {"values": [round(float(v), 6) for v in std], "source": "inputs",
                "note": f"σ of each dimension of the predicted class capsule over the "
                        f"{len(vectors)} chosen inputs only: the evaluation-set σ needs the "
                        "capsule semantics analysis at this step (build with --analyses all)."}
    return {"values": None, "source": None,
            "note": "No σ at this step: it needs the capsule semantics analysis (build with "
                    "--analyses all) or at least two inputs."}


def _std_from_summary(summary, dims: int) -> list[float] | None:
    """The first list of `dims` numbers under a key naming a standard deviation (std, sigma) or,
    failing that, a variance (var; square-rooted), searched depth-first."""
    found: dict[str, list] = {}

    def walk(value, key=""):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k).lower())
        elif isinstance(value, list):
            if len(value) == dims and all(isinstance(v, (int, float)) and not
                                          isinstance(v, bool) for v in value):
                for word in ("std", "sigma", "var"):
                    if word in key and word not in found:
                        found[word] = value
            else:
                for v in value:
                    walk(v, key)

    walk(summary)
    for word in ("std", "sigma"):
        if word in found and all(math.isfinite(v) and v >= 0 for v in found[word]):
            return [float(v) for v in found[word]]
    if "var" in found and all(math.isfinite(v) and v >= 0 for v in found["var"]):
        return [round(math.sqrt(v), 6) for v in found["var"]]
    return None


def _first_number(summary, keys) -> float | None:
    if isinstance(summary, dict):
        for key in keys:
            value = summary.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                return float(value)
    return None


def summary_line(model: ModelData, steps: list[LiveStep]) -> str:
    """The build summary's line for one model's live decoder."""
    sizes = sorted({s.weights_bytes for s in steps})
    scripts = sorted({s.script_bytes for s in steps})
    size = f"{sizes[0]:,}" if len(sizes) == 1 else f"{sizes[0]:,} … {sizes[-1]:,}"
    script = f"{scripts[0]:,}" if len(scripts) == 1 else f"{scripts[0]:,} … {scripts[-1]:,}"
    return (f"live decoder {model.name}: {size} bytes per step (float16 weights; {script} bytes "
            f"as the page's base64 script) × {len(steps)} step{'s' if len(steps) != 1 else ''}")
