"""The "About the methods" page: every technique of the site with what it shows and its full
references, read from the BibTeX entries of reportgen/results/references.py (the papers a
technique comes from), written out as plain text (no links: the site makes no remote request),
and the thresholds behind the findings (reportgen/results/findings.py).
"""

from __future__ import annotations

import re

from reportgen.pages.captions import readable
from reportgen.results import findings
from reportgen.results.references import ENTRIES, technique_keys

METHODS_STEM, METHODS_TITLE = "methods", "About the methods"

# Techniques whose view comes from the capsule network itself (Sabour et al. 2017) or is a
# standard look at a convolutional layer, beside those references.py names.
EXTRA = {"predictions": ("sabour2017dynamic",), "class_capsules": ("sabour2017dynamic",),
         "primary_heatmaps": ("sabour2017dynamic",), "live_decoder": ("sabour2017dynamic",)}
STANDARD = {"conv_feature_maps": "the activations of a convolutional layer, shown as images",
            "conv_kernels": "the learned weights of a convolutional layer, shown as images"}

_ACCENTS = {"\\'e": "é", '\\"a': "ä", '\\"u': "ü", '\\"o': "ö", "\\'a": "á", "\\`e": "è"}


def _fields(entry: str) -> dict[str, str]:
    """The fields of one BibTeX entry (values with their braces removed)."""
    kind = re.match(r"@(\w+)\{", entry)
    out = {"type": kind.group(1).lower() if kind else ""}
    for match in re.finditer(r"(\w+)\s*=\s*\{", entry):
        depth, start = 1, match.end()
        i = start
        while i < len(entry) and depth:
            depth += {"{": 1, "}": -1}.get(entry[i], 0)
            i += 1
        out[match.group(1).lower()] = _plain(entry[start:i - 1])
    return out


def _plain(value: str) -> str:
    for tex, char in _ACCENTS.items():
        value = value.replace("{" + tex + "}", char).replace(tex, char)
    value = value.replace("--", "–").replace("$", "")
    value = re.sub(r"[{}]", "", value)
    return re.sub(r"\s+", " ", value).strip()


def _authors(text: str) -> str:
    names = []
    for name in text.split(" and "):
        last, _, first = name.partition(", ")
        initials = " ".join("-".join(f"{piece[0]}." for piece in part.split("-") if piece)
                            for part in first.split() if part[0].isalpha())
        names.append(f"{last}, {initials}".strip(", "))
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def reference(key: str) -> str:
    """One entry as a plain-text reference: authors (year). Title. Venue, pages. Identifier.
    Notes (what reportgen could not complete) follow."""
    f = _fields(ENTRIES[key])
    venue = f.get("booktitle") or f.get("journal") or f.get("school") or f.get("institution") \
        or ""
    if f.get("journal") and f.get("volume"):
        venue += f" {f['volume']}" + (f"({f['number']})" if f.get("number") else "")
    if f["type"] == "phdthesis":
        venue = f"PhD thesis, {venue}"
    elif f["type"] == "techreport":
        venue = f"Technical report{' ' + f['number'] if f.get('number') else ''}, {venue}"
    parts = [f"{_authors(f.get('author', ''))} ({f.get('year', 'n.d.')}). {f.get('title', '')}."]
    if venue:
        parts.append(venue + (f", pp. {f['pages']}" if f.get("pages") else "") + ".")
    if f.get("doi"):
        parts.append(f"doi:{f['doi']}.")
    if f.get("eprint"):
        parts.append(f"arXiv:{f['eprint']}.")
    if f.get("note"):
        parts.append(f"Note: {readable(f['note'])}")
    return " ".join(parts)


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
        keys = technique_keys(name) or EXTRA.get(name, ())
        refs = [reference(k) for k in keys if k in ENTRIES]
        if not refs and name in STANDARD:
            refs = [f"No single source: {STANDARD[name]}."]
        rows.append({"name": name, "title": t.get("title", name), "page": page,
                     "description": t.get("description", ""),
                     "experimental": bool(t.get("experimental")), "references": refs})
    return rows


def thresholds() -> list[dict]:
    """The thresholds the findings state, as [{what, value}]."""
    return [
        {"what": "accuracy above chance (1/K)",
         "value": f"{findings.CHANCE_SIGMAS} standard errors of a chance-level classifier"},
        {"what": "a step's analyses describe an untrained network (banner)",
         "value": f"one class predicted for at least {100 * findings.ONE_CLASS_SHARE:g}% of the "
                  f"evaluation images, or accuracy within {findings.CHANCE_SIGMAS} standard "
                  f"errors above chance over at least {findings.TELLING_IMAGES:,} images (the "
                  f"held-out accuracy training measured, or the evaluation set's; fewer: "
                  f"\"cannot be told from chance on N images\"; images of two digits: one pair "
                  f"of classes, top-2 accuracy against 1/C(K, 2))"},
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
