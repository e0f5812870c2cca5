"""A model's index split for the browser: `data.js` without the per-input panels, and one
script per input (`models/SLUG/inputs/KEY.js`) with that input's panels at every step.

Every page of a model loads `data.js` before it is usable; with every step's panels of every
input in it, it grew with steps x inputs (3 MB for MNIST_Demo's 21 steps x 16 inputs). A page
needs one input at a time (the layer pages, the filmstrip; Compare: one input of each model), so
reportgen.js loads the chosen input's script when that input is first shown, with a plain
<script src> (fetch() of local files is blocked on file://).

A script names each heading and caption once: the same "more" text recurs at every step, so
records hold a number into the script's `texts` list, and the script puts the strings back
before the page sees them (a third of the bytes). `index.json` is the index without the
per-input panels, as `data.js` holds it; `read_index` gives tools the whole index back.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from reportgen.pages.urls import file_part

# the keys of panel records whose strings go into the script's `texts` (headings, captions)
PACKED = ("title", "caption", "more")


def _js(value) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("</", "<\\/").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def pack(value, texts: list[str], seen: dict[str, int]):
    """`value` with every string under a PACKED key replaced by its position in `texts`
    (appended in order of first appearance, so the output depends on the input only)."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in PACKED and isinstance(item, str):
                if item not in seen:
                    seen[item] = len(texts)
                    texts.append(item)
                out[key] = seen[item]
            else:
                out[key] = pack(item, texts, seen)
        return out
    if isinstance(value, list):
        return [pack(item, texts, seen) for item in value]
    return value


def unpack(value, texts: list[str]):
    """The inverse of `pack` (what the script's `expand` does in the browser)."""
    if isinstance(value, dict):
        return {key: texts[item] if key in PACKED and isinstance(item, int)
                and not isinstance(item, bool) else unpack(item, texts)
                for key, item in value.items()}
    if isinstance(value, list):
        return [unpack(item, texts) for item in value]
    return value


_EXPAND = (
    "  function expand(value) {\n"
    "    if (Array.isArray(value)) {\n      return value.map(expand);\n    }\n"
    "    if (value && typeof value === \"object\") {\n"
    "      Object.keys(value).forEach(function (key) {\n"
    f"        value[key] = {_js(list(PACKED))}.indexOf(key) >= 0 && typeof value[key] === "
    "\"number\" ? texts[value[key]] : expand(value[key]);\n"
    "      });\n    }\n    return value;\n  }\n")


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
        texts: list[str] = []
        packed = pack(steps, texts, {})
        scripts[path] = (
            "/* reportgen: one input's panels at every step (see reportgen/pages/"
            "input_scripts.py). */\n"
            "(function (data) {\n"
            f"  var model = data[{_js(index['slug'])}];\n"
            f"  var texts = {_js(texts)};\n"
            f"  var steps = {_js(packed)};\n"
            "  if (!model) {\n    return;\n  }\n"
            + _EXPAND +
            "  Object.keys(steps).forEach(function (step) {\n"
            "    if (model.steps[step]) {\n"
            f"      model.steps[step].inputs[{_js(key)}] = expand(steps[step]);\n"
            "    }\n  });\n"
            "})(window.reportgenData = window.reportgenData || {});\n")
    small["input_scripts"] = paths
    return small, scripts


def read_script(text: str) -> dict:
    """{step: panels} of one input script's text (the `texts` put back), as the page sees it."""
    found = {name: re.search(rf"^  var {name} = (.*);$", text, re.M) for name in ("texts", "steps")}
    if not all(found.values()):
        raise ValueError("not a reportgen input script")
    texts, steps = (json.loads(found[name].group(1)) for name in ("texts", "steps"))
    return unpack(steps, texts)


def read_index(model_folder: str | Path) -> dict:
    """The whole index of one model folder of a built site (`site/models/SLUG`): index.json
    with each input's panels put back from its script, as a page sees it once loaded."""
    folder = Path(model_folder)
    index = json.loads((folder / "index.json").read_text("utf-8"))
    site = folder.parents[1]
    for key, path in (index.get("input_scripts") or {}).items():
        for step, panels in read_script((site / path).read_text("utf-8")).items():
            if step in index["steps"]:
                index["steps"][step].setdefault("inputs", {})[key] = panels
    return index
