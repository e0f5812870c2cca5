"""The settings a group of runs varies (`reportgen train NAME --seeds N --sweep KEY=V1,V2`):
the seeds, and params.toml keys named as the parameter file's errors name them (dotted:
`class_caps.routing_iterations`, `training.learning_rate`, `conv[0].filters`, a family's own
`em.routing_iterations`), each value written as in TOML (`3`, `1e-3`, `true`, `"none"`; a
bare word is a string).

Everything here is checked before anything is written: an unknown key is refused with the
closest keys, and a value is tried by parsing the whole document with it
(reportgen.settings.model_params), so a run's params.toml is one the catalog accepts.
"""

from __future__ import annotations

import copy
import difflib
import re
import tomllib
from dataclasses import asdict, fields, is_dataclass, replace
from typing import Any

from reportgen.errors import ReportgenError
from reportgen.settings import model_params as mp
from reportgen.settings.families import DEFAULT_FAMILY
from reportgen.settings.families import family as find_family
from reportgen.settings.families import registered

SEED_KEY = "seed"                  # the seeds' axis (a training option, not a params.toml key)
_TABLES = {"primary": mp.PrimaryCapsParams, "class_caps": mp.ClassCapsParams,
           "decoder": mp.DecoderParams, "loss": mp.LossParams, "training": mp.TrainingParams}
_TOP = ("dataset", "input_shape", "num_classes", "description", "family")
_CONV_KEY = re.compile(r"^conv\[(\d+)\]\.([a-z_]+)$")
_FIX_SWEEP = "write --sweep KEY=V1,V2,... with a params.toml key, e.g. " \
             "--sweep class_caps.routing_iterations=1,2,3"


def parse_seeds(text: str) -> list[int]:
    """`--seeds N` (seeds 0 ... N-1) or `--seeds 0,1,2` (those seeds), each a whole number >= 0
    and none twice."""
    parts = [p.strip() for p in str(text).split(",")]
    try:
        values = [int(p) for p in parts if p]
    except ValueError:
        values = None
    if not values or any(v < 0 for v in values) or ("," not in text and values[0] < 1):
        raise ReportgenError(f"--seeds {text!r} is not a number of seeds or a list of seeds.",
                             expected="N >= 1 (seeds 0 ... N-1) or seeds >= 0 separated by "
                                      "commas, e.g. 3 or 0,1,2",
                             fix="write --seeds 3 or --seeds 0,1,2")
    if "," not in text:
        values = list(range(values[0]))
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise ReportgenError(f"--seeds {text} names seed {twice[0]} twice.",
                             fix="list each seed once")
    return values


def known_keys(raw: dict) -> list[str]:
    """Every key a sweep may set in the document `raw`: the top-level values, each shared
    table's, each [[conv]] table's (`conv[i].KEY`) and its family's own table's (another
    family's table means nothing to the model)."""
    keys = [k for k in _TOP]
    conv = raw.get("conv", [{}])
    for i in range(len(conv) if isinstance(conv, list) else 1):
        keys += [f"conv[{i}].{f.name}" for f in fields(mp.ConvParams)]
    for table, cls in _TABLES.items():
        keys += [f"{table}.{f.name}" for f in fields(cls)]
    name = raw.get("family", DEFAULT_FAMILY)
    owner = find_family(name) if name in registered() else None
    if owner is not None and owner.table is not None and is_dataclass(owner.settings):
        keys += [f"{owner.table}.{f.name}" for f in fields(owner.settings)]
    return keys


def check_key(key: str, raw: dict) -> str:
    """`key` when a sweep may set it in `raw`, else a one-line refusal naming the closest."""
    key = key.strip()
    known = known_keys(raw)
    if key in known:
        return key
    if key == SEED_KEY:
        raise ReportgenError("--sweep seed=... is not a params.toml key.",
                             fix="give the seeds with --seeds 3 or --seeds 0,1,2")
    plain = key.replace(".", "_").split("]")[-1].lstrip("_")
    close = [k for k in known if k.rsplit(".", 1)[-1] in (plain, key.rsplit(".", 1)[-1])]
    close = close or difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close[:3])}?" if close else _FIX_SWEEP
    raise ReportgenError(f"--sweep: '{key}' is not a params.toml key.",
                         expected="a key as params.toml's errors name it (table.key, "
                                  "conv[0].key)", fix=hint)


def split_values(text: str) -> list[str]:
    """V1,V2,... split at the commas outside brackets and quotes (`[16, 8],[32]` is two)."""
    parts, depth, quote, current = [], 0, None, ""
    for char in text:
        if quote:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        current += char
    parts.append(current.strip())
    return parts


def parse_sweep(text: str, raw: dict) -> tuple[str, list[Any]]:
    """`KEY=V1,V2,...` -> (KEY, [values as TOML reads them]); the key checked against `raw`
    (the base model's document), each value once."""
    if "=" not in text:
        raise ReportgenError(f"--sweep {text!r} names no values.", expected="KEY=V1,V2,...",
                             fix=_FIX_SWEEP)
    key, _, values_text = text.partition("=")
    key = check_key(key, raw)
    pieces = split_values(values_text)
    if not all(pieces):
        raise ReportgenError(f"--sweep {text!r} has an empty value.", expected="KEY=V1,V2,...",
                             fix=_FIX_SWEEP)
    values = [toml_value(p) for p in pieces]
    for i, value in enumerate(values):
        if value in values[:i]:
            raise ReportgenError(f"--sweep {key} gives the value {pieces[i]} twice.",
                                 fix="list each value once")
    return key, values


def toml_value(text: str) -> Any:
    """A value as TOML reads it (3, 1e-3, true, [16, 8], "x"); a bare word as a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def with_setting(raw: dict, key: str, value: Any) -> dict:
    """A copy of the document `raw` with `key` (dotted, or conv[i].key) set to `value`."""
    out = copy.deepcopy(raw)
    conv = _CONV_KEY.match(key)
    if conv:
        tables = out.get("conv", [{}])
        tables = [tables] if isinstance(tables, dict) else tables
        tables[int(conv.group(1))][conv.group(2)] = value
        out["conv"] = tables
        return out
    *parents, leaf = key.split(".")
    table = out
    for parent in parents:
        table = table.setdefault(parent, {})
    table[leaf] = value
    return out


def apply_settings(raw: dict, settings: dict[str, Any], source: str) -> mp.ModelParams:
    """ModelParams of `raw` with `settings` ({key: value}) set, validated; a value params.toml
    refuses is said in one line naming the key, the value and what it accepts."""
    changed = raw
    for key, value in settings.items():
        changed = with_setting(changed, key, value)
    try:
        return mp.parse_model_params(changed, source)
    except ReportgenError as exc:
        said = ", ".join(f"{k}={_shown(v)}" for k, v in settings.items() if k != SEED_KEY)
        raise ReportgenError(f"--sweep {said} is refused: {exc.what}", expected=exc.expected,
                             received=exc.received,
                             fix="sweep over values params.toml accepts for that key (see the "
                                 "params.toml reference)") from exc


def value_of(params: mp.ModelParams, key: str) -> Any:
    """The value of `key` in validated `params`, as JSON holds it (lists for tuples)."""
    data = asdict(replace(params, family_settings=None))
    if params.family_settings is not None and is_dataclass(params.family_settings):
        data[find_family(params.family).table] = asdict(params.family_settings)
    conv = _CONV_KEY.match(key)
    if conv:
        value = data["conv"][int(conv.group(1))][conv.group(2)]
    else:
        value = data
        for part in key.split("."):
            value = value[part]
    return list(value) if isinstance(value, tuple) else value


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return value
    return str(list(value)) if isinstance(value, (list, tuple)) else f"{value!r}"


def differing_settings(groups: list[dict | None]) -> list[str]:
    """The settings that differ between the runs of the groups in `groups` (group records,
    reportgen.commands.run_group; None for a model of its own), in the order the runs record
    them: what a listing of runs shows first."""
    keys: list[str] = []
    for group in groups:
        for key in (group or {}).get("settings", {}):
            if key not in keys:
                keys.append(key)
    return keys


def setting_text(value: Any) -> str:
    """A setting's value as a table shows it: 2, 0.0003, true, none, [16, 8]."""
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)
