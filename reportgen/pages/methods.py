"""The "About the methods" page: every technique of the site with what it shows and the full
references it declares (`Technique.citations`, handed on in SiteData.techniques), the model
families of the built models with theirs (`Family.citations`, in ModelData.citations), written
out as plain text (no links: the site makes no remote request), and the thresholds behind the
findings (reportgen/results/findings.py). A technique or family that declares no citation shows
none.
"""

from __future__ import annotations

from reportgen import bibtex
from reportgen.pages.captions import readable
from reportgen.results import findings

METHODS_STEM, METHODS_TITLE = "methods", "About the methods"


def reference(entry: str) -> str:
    """One BibTeX entry as a plain-text reference (reportgen.bibtex.reference)."""
    return bibtex.reference(entry, readable)


def methods_view(techniques: list[dict], scope_of=lambda name: "input") -> list[dict]:
    """[{name, title, page, description, experimental, references}] of the site's techniques
    (SiteData.techniques), in page order; `page` says where its figures are (`scope_of(name)`
    is the technique's scope)."""
    from reportgen.pages.page_table import ANALYSES_TITLE, BESIDE_EVERY_LAYER, LAYER_TITLES

    rows = []
    for t in techniques:
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
    """The thresholds the findings state, as [{what, value}]."""
    return [
        {"what": "accuracy above chance (1/K)",
         "value": f"{findings.CHANCE_SIGMAS} standard errors of a chance-level classifier"},
        {"what": "a step's analyses describe an untrained network (banner)",
         "value": f"one class predicted for at least {100 * findings.ONE_CLASS_SHARE:g}% of the "
                  f"evaluation images, or accuracy within {findings.CHANCE_SIGMAS} standard "
                  f"errors above chance (images of two digits: one pair of classes, top-2 "
                  f"accuracy against 1/C(K, 2))"},
        {"what": "routing counts as uniform",
         "value": f"mean coupling entropy within {findings.ROUTING_NATS:g} nats of log K"},
        {"what": "dead units worth flagging",
         "value": f"more than {100 * findings.DEAD_SHARE:g}% of a conv layer's filters, or of the "
                  f"primary capsule types"},
        {"what": "two explanation methods tie",
         "value": f"deletion AOPC or insertion AUC closer than {findings.AOPC_MARGIN:g}"},
        {"what": "two saliency maps agree",
         "value": f"mean Spearman correlation at least {findings.AGREEMENT:g}"},
        {"what": "accuracy holds under a transform",
         "value": f"within {100 * findings.AFFINE_POINTS:g} points of clean"},
        {"what": "ours matches a published accuracy",
         "value": f"within {100 * findings.REFERENCE_POINTS:g} points"},
        {"what": "compactness says something",
         "value": "above the 95th percentile of an isotropic random change"},
    ]
