"""The reference pages of the techniques and the model families, generated from their
registries (reportgen.techniques.all_techniques(), reportgen.settings.families) and the
plug-in records `reportgen plugins` prints: what each shows or is, its equation and
description, the papers it cites, what it needs of a model, and the package it comes from.
Installed plug-in packages appear as reportgen's own do."""

from __future__ import annotations

from reportgen import bibtex
from reportgen.docs_reference.markdown import table

SCOPE_WORDS = {"input": "per input image, at each chosen step",
               "checkpoint": "once per training step (reads the weights)",
               "dataset": "over the evaluation set, at the steps with dataset analyses"}
_SCOPE_SHORT = {"input": "per image and step", "checkpoint": "per step",
                "dataset": "over the evaluation set"}
_LABEL_WORDS = {(1,): "images of one class", (2,): "images of two overlapping digits "
                "(MultiMNIST)", (1, 2): "any"}


def _readable(text: str) -> str:
    from reportgen.pages.captions import readable

    return readable(text)


def _origins(records) -> dict[str, str]:
    return {p.name: p.origin for p in records if not p.problem}


def _module_summary(records, name: str) -> str:
    """The first paragraph of the docstring of the module declaring plug-in `name`: what the
    family is, in its authors' words."""
    import importlib

    target = next((p.target for p in records if p.name == name and not p.problem), None)
    if target is None:
        return ""
    doc = importlib.import_module(target.partition(":")[0]).__doc__ or ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def _page_of(technique) -> str:
    from reportgen.pages.page_table import ANALYSES_TITLE, BESIDE_EVERY_LAYER, LAYER_TITLES

    if technique.scope == "dataset":
        return f"{ANALYSES_TITLE} (and Compare)"
    if technique.layer == BESIDE_EVERY_LAYER:
        return "beside every layer page"
    return LAYER_TITLES.get(technique.layer, technique.layer)


def _needs(technique) -> str:
    if callable(technique.needs):
        return "depends on its options and the model"
    return ", ".join(f"`{n}`" for n in sorted(technique.needs)) or "none"


def _references(entries) -> list[str]:
    refs = [_readable(bibtex.reference(e)) for e in bibtex.unique(entries)]
    return [f"- {r}" for r in refs] or ["- (it declares no citation)"]


def _problems(records) -> list[str]:
    broken = [p for p in records if p.problem]
    if not broken:
        return []
    return ["## Plug-ins that did not load", ""] + [f"- {p.problem_line()}" for p in broken] + [""]


def techniques_page() -> str:
    """Every registered technique, in page order."""
    from reportgen.capsnet.description import feature_words
    from reportgen.techniques import all_techniques, plugin_records

    origins = _origins(plugin_records())
    words = feature_words()
    techniques = all_techniques()
    out = ["# Techniques", "",
           "Every technique `reportgen build` computes, in the order of the site's pages "
           "(`--technique NAME` chooses some; `reportgen plugins` lists them with their "
           "packages). Generated from the technique registry, "
           "`reportgen.techniques.all_techniques()`, so a plug-in package's techniques appear "
           "here once it is installed. Each site's \"About the methods\" page shows the same "
           "descriptions and references for the techniques it built.", "",
           table(["technique", "id", "computed", "shown on", "package"],
                 [[f"[{t.title}](#{t.name})", f"`{t.name}`", _SCOPE_SHORT[t.scope],
                   _page_of(t), origins.get(t.name, "registered in code")]
                  for t in techniques]), ""]
    for t in techniques:
        needs = [words.get(f, f) for f in sorted(t.applies_to)]
        out += [f"## {t.title} {{#{t.name}}}", "",
                f"`{t.name}`" + (" · **experimental** (`--experimental`)" if t.experimental
                                 else "") + f" · computed {SCOPE_WORDS[t.scope]} · shown on "
                f"{_page_of(t)} · from {origins.get(t.name, 'code')}", "",
                _readable(t.description) or "(no description declared)", "",
                "**What it needs of a model**: " + ("; ".join(needs) if needs else
                                                    "nothing beyond a classifier") +
                (". Computed only at the last step built." if t.last_step_only else
                 ". Computed only at the steps with dataset analyses." if t.analysed_steps_only
                 else "."), "",
                f"**Probe tensors it reads**: {_needs(t)}. **Models**: "
                f"{_LABEL_WORDS.get(tuple(t.labels), str(t.labels))}.", "",
                "**References**", ""] + _references(t.citations) + [""]
    return "\n".join(out + _problems(plugin_records())) + "\n"


def families_page() -> str:
    """Every registered model family, with what `reportgen plugins` says of it."""
    from reportgen.contract import CAPABILITIES
    from reportgen.settings import families

    records = families.plugin_records()
    origins = _origins(records)
    names = families.registered()
    out = ["# Model families", "",
           "A family is a kind of network, chosen by `family` in a model's `params.toml` "
           f"(default `\"{families.DEFAULT_FAMILY}\"`). Generated from the family registry "
           "(`reportgen.settings.families`) and the plug-in records that `reportgen plugins` "
           "prints: an installed family package appears here as reportgen's own do. "
           "[Write a family or technique package](../how-to/write-a-plugin.md) says how to "
           "add one.", "",
           table(["family", "package", "its own params.toml table", "capabilities",
                  "cites"],
                 [[f"[`{n}`](#{n})", origins.get(n, "registered in code"),
                   _table_link(families.family(n)),
                   ", ".join(sorted(families.family(n).capabilities)) or "—",
                   "; ".join(bibtex.short(e) for e in bibtex.unique(
                       families.family(n).citations)) or "—"] for n in names]), ""]
    for n in names:
        fam = families.family(n)
        out += [f"## `{n}` {{#{n}}}", "", _readable(_module_summary(records, n)), "",
                f"From {origins.get(n, 'code')}. Its params.toml table: {_table_link(fam)}.",
                ""]
        if fam.routing:
            out += ["**Routing weights** (what routing analyses read):", ""]
            out += [f"- `{w.kind}`: {_flat(w.words)} (each {_sums(w)})" for w in fam.routing]
            out += [""]
        if fam.capabilities:
            out += ["**Capabilities beyond the network contract**:", ""]
            out += [f"- `{c}`: {_flat(_readable(CAPABILITIES[c]))}"
                    for c in sorted(fam.capabilities)]
            out += [""]
        if fam.outputs:
            out += ["**Outputs of its own** (its techniques read them):", ""]
            out += [f"- `{k}`: {_flat(v)}" for k, v in sorted(fam.outputs.items())] + [""]
        out += [f"**XLA**: forward passes {'compiled' if fam.xla.forward else 'not compiled'}, "
                f"gradient passes {'compiled' if fam.xla.gradients else 'not compiled'} "
                "(decided by `python bench/bench_xla.py`).", "",
                "**References**", ""] + _references(fam.citations) + [""]
    return "\n".join(out + _problems(families.plugin_records())) + "\n"


def _flat(text: str) -> str:
    return " ".join(str(text).split())


def _table_link(fam) -> str:
    return f"[`[{fam.table}]`](params.md#{fam.table})" if fam.table else "none"


def _sums(weights) -> str:
    return ("child's weights sum to 1 over its parents" if weights.sums_over == "parents"
            else "parent's weights sum to 1 over its children")
