"""A model's index split for the browser: `data.js` without the per-input panels, and one
script per input (`models/SLUG/inputs/KEY.js`) with that input's panels at every step.

Every page of a model loads `data.js` before it is usable; with every step's panels of every
input in it, it grew with steps x inputs (3 MB for MNIST_Demo's 21 steps x 16 inputs). A page
needs one input at a time (the layer pages, the filmstrip; Compare: one input of each model), so
reportgen.js loads the chosen input's script when that input is first shown, with a plain
<script src> (fetch() of local files is blocked on file://). `index.json` keeps the whole
index for other readers.
"""

from __future__ import annotations

import copy
import json

from reportgen.pages.urls import file_part


def _js(value) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("</", "<\\/").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def split_index(index: dict, folder: str) -> tuple[dict, dict[str, str]]:
    """(the index without steps' per-input panels but with `input_scripts` {input key: docs-
    relative path}, {path: script text}). `index` is left as it was."""
    small = copy.copy(index)
    small["steps"] = {}
    per_input: dict[str, dict] = {}
    for step, record in index.get("steps", {}).items():
        small["steps"][step] = {**record, "inputs": {}}
        for key, panels in (record.get("inputs") or {}).items():
            per_input.setdefault(key, {})[step] = panels
    paths, scripts = {}, {}
    for key, steps in per_input.items():
        path = f"{folder}/inputs/{file_part(key)}.js"
        paths[key] = path
        scripts[path] = (
            "/* reportgen: one input's panels at every step (see reportgen/pages/"
            "input_scripts.py). */\n"
            "(function (data) {\n"
            f"  var model = data[{_js(index['slug'])}];\n"
            f"  var steps = {_js(steps)};\n"
            "  if (!model) {\n    return;\n  }\n"
            "  Object.keys(steps).forEach(function (step) {\n"
            "    if (model.steps[step]) {\n"
            f"      model.steps[step].inputs[{_js(key)}] = steps[step];\n"
            "    }\n  });\n"
            "})(window.reportgenData = window.reportgenData || {});\n")
    small["input_scripts"] = paths
    return small, scripts
