"""The reference page of params.toml: every key of every table, with its type, default and
meaning, generated from the settings dataclasses (reportgen.settings.model_params for the tables
every family shares, each family's `settings` for its own table), so that it cannot fall behind
the code that reads the file."""

from __future__ import annotations

import typing
from dataclasses import MISSING, fields, is_dataclass

from reportgen.docs_reference.field_docs import default_of, field_meanings
from reportgen.docs_reference.markdown import table

# ModelParams' fields that are tables, in the order a params.toml lists them.
_SHARED = (("conv", "[[conv]]", "one table per convolutional layer before the capsules, in "
            "order"),
           ("primary", "[primary]", "the primary capsules: the convolution that forms them"),
           ("class_caps", "[class_caps]", "the class capsules and their routing"),
           ("decoder", "[decoder]", "the reconstruction decoder (Sabour et al. 2017)"),
           ("loss", "[loss]", "the margin loss and the reconstruction term"),
           ("training", "[training]", "the defaults of `reportgen train` (its options win)"))
_INTERNAL = {"family_settings"}     # the parsed family table, not a key of the file


def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def _table_class(hint):
    """The dataclass of a table (`X`) or of an array of tables (`tuple[X, ...]`), else None."""
    if is_dataclass(hint):
        return hint
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and args and is_dataclass(args[0]):
        return args[0]
    return None


def type_words(hint, f) -> str:
    """The TOML type a field takes, in words (what parse_section accepts)."""
    allowed = f.metadata.get("choices")
    if allowed:
        return "one of " + ", ".join(f'`"{v}"`' for v in allowed)
    if hint is bool:
        return "`true` or `false`"
    if hint is int:
        return "integer ≥ 1"
    if hint is float:
        return "number ≥ 0"
    if hint is str:
        return "string"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and args and args[0] is int:
        return "list of integers ≥ 1"
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        return " or ".join(type_words(a, f) for a in args)
    if _table_class(hint) is not None:
        return "array of tables" if origin is tuple else "table"
    return f"`{getattr(hint, '__name__', hint)}`"


def toml_value(value) -> str:
    if value is MISSING:
        return "required"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if is_dataclass(value):
        return "the table's defaults"
    if isinstance(value, tuple):
        if value and is_dataclass(value[0]):
            return f"{len(value)} table{'s' * (len(value) != 1)} at the defaults"
        return "`[" + ", ".join(str(v) for v in value) + "]`"
    return f"`{value!r}`"


def key_rows(cls, prefix: str = "") -> tuple[list[list[str]], list[tuple[str, type]]]:
    """Rows (key, type, default, meaning) of dataclass `cls`, and its nested tables
    [(TOML name, dataclass)]."""
    meanings, hints = field_meanings(cls), _hints(cls)
    rows, nested = [], []
    for f in fields(cls):
        if f.name in _INTERNAL:
            continue
        hint = hints[f.name]
        sub = _table_class(hint)
        if sub is not None and prefix:
            nested.append((f"{prefix}.{f.name}", sub, typing.get_origin(hint) is tuple))
        rows.append([f"`{f.name}`", type_words(hint, f), toml_value(default_of(f)),
                     meanings[f.name] or ""])
    return rows, nested


def _section(title: str, anchor: str, intro: str, cls, prefix: str) -> list[str]:
    rows, nested = key_rows(cls, prefix)
    out = [f"## `{title}` {{#{anchor}}}", "", intro, "",
           table(["key", "type", "default", "meaning"], rows), ""]
    for name, sub, array in nested:
        heading = f"[[{name}]]" if array else f"[{name}]"
        out += _section(heading, name.replace(".", "-"), f"Within `[{prefix}]`.", sub, "")
    return out


def _top_level() -> list[str]:
    from reportgen.data.datasets import known_datasets
    from reportgen.settings.families import registered
    from reportgen.settings.model_params import ModelParams

    rows, _ = key_rows(ModelParams)
    tables = {name: heading for name, heading, _ in _SHARED}
    for row in rows:
        key = row[0].strip("`")
        if key in tables:
            row[1] = f"[{row[1]}](#{key})"
        if key == "dataset":
            row[1] = "one of " + ", ".join(f'`"{d}"`' for d in known_datasets()) + \
                " or a path"
        if key == "family":
            row[1] = "one of " + ", ".join(f'`"{n}"`' for n in registered())
    return ["## Top level {#top-level}", "",
            table(["key", "type", "default", "meaning"], rows), ""]


def params_page() -> str:
    """The whole page as Markdown."""
    from reportgen.settings import model_params as mp
    from reportgen.settings.families import family, registered

    classes = {"conv": mp.ConvParams, "primary": mp.PrimaryCapsParams,
               "class_caps": mp.ClassCapsParams, "decoder": mp.DecoderParams,
               "loss": mp.LossParams, "training": mp.TrainingParams}
    out = ["# params.toml", "",
           "A model is a folder `models/NAME/` with one human-edited `params.toml`. Every key "
           "below is read and checked once, when the file is loaded: an unknown key or a value "
           "of the wrong type stops with one line naming the key, what was expected and what "
           "was found. Keys left out take the default. This page is generated from the "
           "settings dataclasses (`reportgen/settings/model_params.py`, and each model "
           "family's own table from its plug-in), so it lists exactly what the installed "
           "reportgen reads.", ""]
    out += _top_level()
    for key, heading, intro in _SHARED:
        out += _section(heading, key, intro[0].upper() + intro[1:] + ".", classes[key], key)
    own = [(name, family(name)) for name in registered() if family(name).table is not None]
    if own:
        out += ["## The families' own tables {#family-tables}", "",
                "A model family may own one table, read only when `family` names it "
                "([model families](families.md)).", ""]
        for name, fam in own:
            out += _section(f"[{fam.table}]", fam.table,
                            f"Family `{name}` (`family = \"{name}\"`).", fam.settings, fam.table)
    return "\n".join(out) + "\n"
