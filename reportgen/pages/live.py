"""What the Decoder page's live decoder reads besides the weights, one script per (model, step):
`models/SLUG/live/STEP.js`.

For every input at that step it holds the real class capsules (all classes x dims, the
`class_capsules` panel's numbers), their lengths, the predicted class, and the reference
reconstruction of each class's real capsule computed here in Python (NumPy) from the exported
(quantised) weights: the same computation the page's JavaScript runs at its initial slider
values, so the two images side by side must agree (to 1/255 after rounding to 8 bits); how far
the quantised weights are from the float32 Keras decoder is measured when they are exported (the
manifest's "check"). It also holds the standard deviation of each pose dimension that the "±k σ" slider
ranges use: over the evaluation set when the `capsule_semantics` analysis ran at that step (its
summary's `DIMENSION_STD`, reportgen/techniques/capsule_semantics/numbers.py), otherwise over
the chosen inputs (the page says which).

Everything is what the techniques handed on with their panels: the manifest (`Panel.numbers`),
the quantised weights as the script carries them (`Panel.data`, never parsed back from the
script) and the class capsules' numbers; nothing is read back from the docs folder, and a panel
without them counts as not computed.

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

from reportgen.techniques.live_decoder import figures as fmt
from reportgen.pages.sitedata import FigureFile, ModelData, Panel, StepData
from reportgen.techniques.capsule_semantics.numbers import DIMENSION_STD, IMAGES

TECHNIQUE = "live_decoder"
CAPSULES = "class_capsules"
SEMANTICS = "capsule_semantics"


@dataclass
class LiveStep:
    """The live decoder's files of one step (docs-relative paths) and their sizes."""

    step: str
    manifest: dict
    script_bytes: int           # the page's weights script (quantised weights, see its format)
    inputs_script: str          # contents of models/SLUG/live/STEP.js


def find_panel(panels: list[Panel], technique: str) -> Panel | None:
    return next((p for p in panels if p.technique == technique), None)


def stored_file(panel: Panel | None, kind: str) -> Path | None:
    """The store's copy of the panel's file of `kind`, or None when it has none."""
    if panel is None:
        return None
    found: FigureFile | None = next((f for f in panel.figures if f.kind == kind), None)
    return Path(found.source) if found is not None and found.source else None


def live_step(model: ModelData, step: StepData) -> LiveStep | None:
    """The live decoder's data at `step`, or None when its weights were not exported there."""
    panel = find_panel(step.checkpoint_panels, TECHNIQUE)
    if panel is None:
        return None
    manifest, data, script = panel.numbers, panel.data, stored_file(panel, "js")
    if not isinstance(manifest, dict) or not isinstance(data, dict) or script is None:
        return None
    try:
        layers = fmt.unpack(data["weights"], data["tables"], manifest)
        script_bytes = script.stat().st_size      # the file the page loads
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None
    classes, dims = manifest["classes"], manifest["dims"]
    shape = manifest["output_shape"]
    inputs, predicted_vectors = {}, []
    for inp in model.inputs:
        found = find_panel(step.input_panels.get(inp.key, []), CAPSULES)
        numbers = found.numbers if found is not None else None
        try:
            capsules = np.asarray(numbers["capsules"], np.float64)
            lengths = [float(v) for v in numbers["lengths"]]
        except (TypeError, KeyError, ValueError):
            continue
        if capsules.shape != (classes, dims) or len(lengths) != classes:
            continue
        predicted = int(np.argmax(lengths))
        images = fmt.forward(layers, fmt.masked(capsules, np.arange(classes), classes), shape)
        inputs[inp.key] = {
            "capsules": capsules.tolist(), "lengths": lengths, "predicted": predicted,
            "python": base64.b64encode(fmt.to_pixels(images).tobytes()).decode("ascii"),
        }
        predicted_vectors.append(capsules[predicted])
    record = {"model": model.name, "step": step.step, "inputs": inputs,
              "std": dimension_std(step, dims, predicted_vectors)}
    body = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    inputs_text = (
        "/* reportgen live decoder: class capsules and Python reconstructions of every input "
        "at one step (see reportgen/pages/live.py). */\n"
        "(function (registry) {\n"
        f"  var model = {fmt.js_literal(model.name)};\n"
        "  registry.inputs = registry.inputs || {};\n"
        "  registry.inputs[model] = registry.inputs[model] || {};\n"
        f"  registry.inputs[model][{fmt.js_literal(step.step)}] = {fmt.js_safe(body)};\n"
        "})(window.reportgenLive = window.reportgenLive || {});\n")
    return LiveStep(step=step.step, manifest=manifest, script_bytes=script_bytes,
                    inputs_script=inputs_text)


def dimension_std(step: StepData, dims: int, vectors: list) -> dict:
    """{values: [dims] | None, source: "evaluation" | "inputs" | None, note}: the spread of each
    pose dimension of the predicted class capsule."""
    semantics = find_panel(step.dataset_panels, SEMANTICS)
    summary = semantics.numbers if semantics is not None else None
    values = evaluation_std(summary, dims)
    if values is not None:
        count = summary.get(IMAGES)
        over = (f"{count} evaluation images" if isinstance(count, int) and count > 0
                else "the evaluation set")
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


def evaluation_std(summary, dims: int) -> list[float] | None:
    """The capsule semantics summary's `DIMENSION_STD` when it is `dims` finite numbers >= 0."""
    if not isinstance(summary, dict):
        return None
    values = summary.get(DIMENSION_STD)
    if not isinstance(values, list) or len(values) != dims:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
               and v >= 0 for v in values):
        return None
    return [float(v) for v in values]


def summary_line(model: ModelData, steps: list[LiveStep]) -> str:
    """The build summary's line for one model's live decoder."""
    scripts = sorted({s.script_bytes for s in steps})
    bits = sorted({s.manifest.get("bits") for s in steps}, key=str)
    size = f"{scripts[0]:,}" if len(scripts) == 1 else f"{scripts[0]:,} … {scripts[-1]:,}"
    return (f"live decoder {model.name}: {size} bytes per step "
            f"({'/'.join(map(str, bits))}-bit weights, one script) × {len(steps)} "
            f"step{'s' if len(steps) != 1 else ''}")
