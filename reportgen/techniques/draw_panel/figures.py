"""The draw panel's files: the network as a script a page opened from file:// can load, and its
manifest. No TensorFlow here.

`draw_panel.js` registers window.reportgenDraw[model][step] = {manifest, onnx: base64 of the
ONNX model}. The manifest ("reportgen-draw-panel" version 1) says what the page needs to read
the outputs whatever the family:
- input: [H, W, C] of the "image" input (float32 in [0, 1], light ink on dark);
- outputs: "scores" (what the model predicts by, and how: "length", "activation" or
  "probability"), "routing" (the routed layer, its grid and its types: children are
  row-major with types fastest), "reconstruction" where the model has a decoder, "poses"
  (dimensions: the class capsules' poses laid end to end) where the class capsules have one;
- pose_point: the output that is the image's point in the pose-space chart ("poses", or
  "scores" for class capsules without a pose, as pose_space analyses them; null for a CNN);
- classes (names) and chance (1 / classes);
- check: seeded images (float32, base64) and Keras's outputs on them, which the page runs
  again to show its own largest difference from Keras.
"""

from __future__ import annotations

import base64
import json

import numpy as np

from reportgen.techniques.draw_panel.export import OPSET, routed_into_classes
from reportgen.techniques.live_decoder.figures import js_literal, js_safe

FORMAT = "reportgen-draw-panel"
FORMAT_VERSION = 1
OUTPUTS = ("scores", "routing", "reconstruction", "poses")


def _floats(array) -> str:
    return base64.b64encode(np.ascontiguousarray(array, "<f4").tobytes()).decode("ascii")


def score_kind(description) -> str:
    if description is None:
        return "score"
    if description.head.kind == "logits" or description.head.readout == "learnt":
        return "probability"
    return "activation" if description.head.readout == "activation" else "length"


def manifest(result, ctx) -> dict:
    """What draw_panel.js needs besides the ONNX bytes (see the module's docstring)."""
    description = getattr(ctx, "description", None)
    names = list(getattr(ctx, "class_names", ()) or ())
    checks = np.asarray(result["check_inputs"], np.float32)
    outputs = {"scores": {"kind": score_kind(description)}}
    routed = routed_into_classes(description) if description is not None else None
    if "check_routing" in result and routed is not None:
        outputs["routing"] = {"layer": routed.name, "types": int(routed.types),
                              "grid": list(routed.grid) if routed.grid else [1, 1]}
    if "check_reconstruction" in result:
        outputs["reconstruction"] = {"shape": list(np.shape(result["check_reconstruction"])[1:])}
    if "check_poses" in result:
        outputs["poses"] = {"dimensions": int(np.shape(result["check_poses"])[1])}
    # the pose-space chart's point: the exported poses where there are, else (class capsules
    # without a pose) the scores, as pose_space analyses them; what the result holds decides
    point = "poses" if "check_poses" in result else \
        ("scores" if getattr(description, "class_capsules", None) is not None else None)
    classes = int(np.shape(result["check_scores"])[1])
    if len(names) != classes:
        names = [str(i) for i in range(classes)]
    return {"format": FORMAT, "version": FORMAT_VERSION,
            "model": getattr(ctx, "model", ""), "step": getattr(ctx, "step", ""),
            "input": list(checks.shape[1:]), "opset": OPSET,
            "onnx_bytes": int(np.size(result["onnx"])),
            "outputs": outputs, "pose_point": point if point in outputs else None,
            "classes": names, "chance": 1.0 / classes,
            "check": {"count": int(len(checks)), "inputs": _floats(checks),
                      "outputs": {name: _floats(result[f"check_{name}"]) for name in outputs}}}


def script(record: dict, onnx: bytes) -> str:
    """`draw_panel.js`: the manifest and the ONNX model, registered under model and step."""
    body = json.dumps({"manifest": record, "onnx": base64.b64encode(onnx).decode("ascii")},
                      separators=(",", ":"))
    return ("/* reportgen draw panel: the network in ONNX for onnxruntime-web (see the "
            "manifest). */\n(function (registry) {\n"
            f"  var model = {js_literal(record['model'])};\n"
            "  registry[model] = registry[model] || {};\n"
            f"  registry[model][{js_literal(record['step'])}] = {js_safe(body)};\n"
            "})(window.reportgenDraw = window.reportgenDraw || {});\n")


def draw_manifest(result, params, ctx) -> dict:
    """The draw panel's numbers (`Panel.numbers`): the manifest without the check arrays."""
    record = manifest(result, ctx)
    record["check"] = {"count": record["check"]["count"]}
    return record


def render_draw_panel(result, params, ctx) -> list:
    """The page's script (the network) and its manifest (JSON)."""
    from reportgen.figures.figure import Figure

    record = manifest(result, ctx)
    onnx = np.asarray(result["onnx"], np.uint8).tobytes()
    text = script(record, onnx).encode("utf-8")
    shown = [name for name in OUTPUTS if name in record["outputs"]]
    caption = (f"The network at step {record['step']} as ONNX (opset {OPSET}, float32, "
               f"{len(onnx) / 1e6:.2f} MB; {len(text) / 1e6:.2f} MB as the page's script), "
               f"run in the browser by onnxruntime-web: {', '.join(shown)}.")
    data = json.dumps(draw_manifest(result, params, ctx), indent=1, sort_keys=True).encode()
    return [Figure(name="draw_panel.json", data=data + b"\n", kind="json", caption=caption),
            Figure(name="draw_panel.js", data=text, kind="js", caption=caption)]
