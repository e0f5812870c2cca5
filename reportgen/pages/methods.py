"""The "About the methods" page: every technique the site built (a figure, or a failure it
reports, for some model: `built_techniques`) with what it shows and the full references it
declares (`Technique.citations`, handed on in SiteData.techniques), the others of the build's
technique list in one line each saying why they are not there (they did not apply to the
models, with the reason; or were not run at the built steps), the model families of the built
models with theirs (`Family.citations`, in ModelData.citations), written out as plain text (no
links: the site makes no remote request), and the thresholds behind the findings
(reportgen/results/findings.py). A technique or family that declares no citation shows none.
Home's techniques table lists the same built techniques.
"""

from __future__ import annotations

from reportgen import bibtex
from reportgen.pages.captions import readable
from reportgen.results import findings

METHODS_STEM, METHODS_TITLE = "methods", "About the methods"


def reference(entry: str) -> str:
    """One BibTeX entry as a plain-text reference (reportgen.bibtex.reference)."""
    return bibtex.reference(entry, readable)


def _panels_of(site):
    for model in site.models:
        yield from model.trend_panels
        for step in model.steps:
            yield from step.checkpoint_panels
            yield from step.dataset_panels
            for panels in step.input_panels.values():
                yield from panels
    yield from site.compare_panels


def built_techniques(site) -> frozenset[str]:
    """The techniques the site built: those with a panel (its figures, or the failure its card
    reports) for some model, step or input, or across models."""
    return frozenset(p.technique for p in _panels_of(site) if p.figures or p.failed)


def built_list(site) -> list[dict]:
    """SiteData.techniques (the build's list, in page order) cut to the built ones."""
    built = built_techniques(site)
    return [t for t in site.techniques if t["name"] in built]


def not_built_view(site) -> list[dict]:
    """[{name, title, why}] of the build's techniques the site did not build, in page order:
    "did not apply to M1, M2: it has no …" when every model lists it as not applicable
    (ModelData.not_applicable, its reasons grouped), else that no built step ran it."""
    built = built_techniques(site)
    rows = []
    for t in site.techniques:
        if t["name"] in built:
            continue
        reasons: dict[str, list[str]] = {}
        for model in site.models:
            for n in model.not_applicable:
                if n.get("technique") == t["name"]:
                    reasons.setdefault(str(n.get("reason", "")).strip().rstrip("."),
                                       []).append(model.name)
        models = [name for names in reasons.values() for name in names]
        if site.models and len(models) == len(site.models):
            why = "did not apply to " + "; to ".join(
                f"{', '.join(names)}{': ' + reason if reason else ''}"
                for reason, names in reasons.items())
        else:
            why = "not run at the built steps (no model has a figure of it)"
        rows.append({"name": t["name"], "title": t.get("title", t["name"]), "why": why})
    return rows


def methods_view(techniques: list[dict], scope_of=lambda name: "input",
                 built: frozenset[str] | None = None) -> list[dict]:
    """[{name, title, page, description, experimental, references}] of the site's techniques
    (SiteData.techniques), in page order, only the `built` ones when given
    (`built_techniques`); `page` says where its figures are (`scope_of(name)` is the
    technique's scope)."""
    from reportgen.pages.page_table import ANALYSES_TITLE, BESIDE_EVERY_LAYER, LAYER_TITLES

    rows = []
    for t in techniques:
        if built is not None and t["name"] not in built:
            continue
        name = t["name"]
        layer = t.get("layer", "")
        page = (f"the {ANALYSES_TITLE} page" if scope_of(name) == "dataset"
                else "beside every layer page" if layer == BESIDE_EVERY_LAYER
                else f"the {LAYER_TITLES.get(layer, layer)} page")
        refs = [reference(e) for e in bibtex.unique(t.get("citations", ()))]
        rows.append({"name": name, "title": t.get("title", name), "page": page,
                     "description": t.get("description", ""),
                     "experimental": bool(t.get("experimental")), "references": refs})
    return rows


def families_view(models) -> list[dict]:
    """[{kind, models, references}]: each kind of model built (Gu 2022's names, "CapsNet",
    "Self-Routing", ...) with the models of that kind and the references its family declares."""
    kinds: dict[str, dict] = {}
    for model in models:
        row = kinds.setdefault(model.kind or model.name, {"kind": model.kind or model.name,
                                                         "models": [], "entries": []})
        row["models"].append(model.name)
        row["entries"] += list(model.citations)
    return [{"kind": r["kind"], "models": r["models"],
             "references": [reference(e) for e in bibtex.unique(r["entries"])]}
            for r in kinds.values()]


def thresholds() -> list[dict]:
    """The thresholds the findings state, as [{what, value}]: every comparison is decided by
    the 95% interval of its score over the images it was computed on."""
    decided = "decided by the 95% interval over the images (Wilson for proportions, a seeded " \
              "BCa bootstrap otherwise; a paired one for two scores on the same images)"
    return [
        {"what": "every comparison below",
         "value": f"{decided}; where the interval holds the reference, the finding says the two "
                  f"cannot be told apart on that many images and about how many would tell them"},
        {"what": "accuracy above chance (1/K)", "value": "chance below the interval"},
        {"what": "a step's analyses describe an untrained network (banner)",
         "value": f"one class predicted for at least {100 * findings.ONE_CLASS_SHARE:g}% of the "
                  f"evaluation images, or an accuracy interval not above chance over at least "
                  f"{findings.TELLING_IMAGES:,} images (the held-out accuracy training measured, "
                  f"or the evaluation set's; fewer: \"cannot be told from chance on N "
                  f"images\", and no property findings; images of two digits: one pair of "
                  f"classes, top-2 accuracy against 1/C(K, 2))"},
        {"what": "routing counts as uniform",
         "value": f"the interval of the gap between log K and the mean entropy of the routing "
                  f"weights (each family's: coupling coefficients, EM assignments, ...) below "
                  f"{findings.ROUTING_NATS:g} nats; departs: above it"},
        {"what": "dead units worth flagging",
         "value": f"more than {100 * findings.DEAD_SHARE:g}% of a conv layer's filters, or of the "
                  f"primary capsule types (counts over the evaluation set, no interval)"},
        {"what": "one explanation method beats another, or a random order",
         "value": "the paired difference of deletion AOPC or insertion AUC excludes 0"},
        {"what": "two saliency maps agree",
         "value": f"the interval of the mean Spearman correlation at or above "
                  f"{findings.AGREEMENT:g}"},
        {"what": "accuracy holds under a transform",
         "value": f"the interval of the paired drop below clean within "
                  f"{100 * findings.AFFINE_POINTS:g} points"},
        {"what": "ours is above or below a published accuracy",
         "value": "the published figure outside the interval"},
        {"what": "compactness says something",
         "value": "the interval above the 95th percentile of an isotropic random change"},
    ]
