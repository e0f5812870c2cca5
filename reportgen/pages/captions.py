"""Words on the cards: plain headings, short captions with the rest behind "more", and formulas
written with Unicode sub- and superscripts (no MathML or web fonts needed, so they read the same
offline, in search results and in a copied caption).

- `heading(title, variant, several)`: a technique's title without its option ids
  ("Primary-capsule heatmaps", not "… (per_layer)"); when a model shows several variants of the
  technique, they are told apart in words ("Grad-CAM++, layer conv1").
- `split_caption(caption, options)`: at most `CAPTION_WORDS` words up front (the part before
  "Details:", else whole sentences while they fit, else cut at a clause), the rest — and the
  option ids — as the details.
- `readable(text)`: c_ij → cᵢⱼ, x^2 → x², u_hat[j|i] → û(j|i).
- `interval_words(summary)`: how the 95% intervals of a panel's numbers were made, for its
  caption ("95% intervals: Wilson for accuracies, BCa bootstrap over the 1,000 images
  otherwise").
"""

from __future__ import annotations

import re

from reportgen.pages.formulas import Formula, split_formulas

CAPTION_WORDS = 40

_SUB = dict(zip("0123456789aehijklmnoprstuvx+-=()", "₀₁₂₃₄₅₆₇₈₉ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ₊₋₌₍₎"))
_SUP = dict(zip("0123456789+-n()", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻ⁿ⁽⁾"))

# Option values as words (a variant label is its options' values joined by "-").
WORDS = {"modified": "modified method", "original": "original method",
         "per_layer": "one scale per layer", "per_map": "one scale per map",
         "absolute": "absolute scale", "argmax": "grouped by strongest class",
         "weighted": "weighted by routing weight", "true": "true class", "predicted": "predicted class",
         "blur": "blurred start", "blank": "blank start", "per_class": "per class",
         "pooled": "pooled", "first": "first images"}


def _unicode(formula: Formula) -> str:
    """A formula with Unicode sub- and superscripts where every character has one (a vote's
    index as û(j|i)); else as written."""
    index, power = formula.index, formula.power
    if "|" in index:
        index = f"({index})"
    elif all(c in _SUB for c in index):
        index = "".join(_SUB[c] for c in index)
    else:
        return formula.written
    if all(c in _SUP for c in power):
        power = "".join(_SUP[c] for c in power)
    else:
        return formula.written
    text = formula.base + index + power
    return f"|{text}|" if formula.norm else text


def readable(text: str) -> str:
    """Formulas in `text` (reportgen.pages.formulas) with Unicode sub- and superscripts where
    every character has one (l_i c_ij l_j → lᵢ cᵢⱼ lⱼ, f(x_0) → f(x₀), (…)^2 → (…)²,
    u_hat[j|i] → û(j|i)); anything else is left as written."""
    if not text:
        return text
    return "".join(p if isinstance(p, str) else _unicode(p) for p in split_formulas(text))


def heading(title: str, variant: str, several: bool = False) -> str:
    """A card's heading: the technique's title without " (variant)"; with the variant in words
    when the model shows several of the technique."""
    suffix = f" ({variant})" if variant else ""
    plain = title[:-len(suffix)] if suffix and title.endswith(suffix) else title
    if suffix and suffix in plain:      # " (variant) over training" and the like
        plain = plain.replace(suffix, "")
    if not (several and variant):
        return plain
    words = ", ".join(WORDS.get(part, f"layer {part}" if re.fullmatch(r"[a-z_]*\d", part)
                                else part.replace("_", " "))
                      for part in variant.split("-"))
    return plain if plain.endswith(f": {words}") else f"{plain}: {words}"


def _words(text: str) -> int:
    return len(text.split())


def split_caption(caption: str, options: str = "", limit: int = CAPTION_WORDS
                  ) -> tuple[str, str]:
    """(up-front text of at most `limit` words, the rest). A caption that says "Details:" is
    split there; else whole sentences are kept while they fit, and a first sentence longer than
    `limit` is cut at a word (ending "…"). `options` (the variant's option ids) go first in the
    rest."""
    caption = readable((caption or "").strip())
    extra = f"Options: {options}." if options else ""
    head, marker, tail = caption.partition(" Details: ")
    if marker and _words(head) <= limit:
        return head, " ".join(p for p in (extra, tail) if p)
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z(“\"0-9])", caption)
    kept = []
    for sentence in sentences:
        if _words(" ".join(kept + [sentence])) > limit:
            break
        kept.append(sentence)
    if kept:
        short = " ".join(kept)
        rest = caption[len(short):].strip()
    else:
        short, rest = _clause_cut(caption, limit)
    return short, " ".join(p for p in (extra, rest) if p)


def _clause_cut(sentence: str, limit: int) -> tuple[str, str]:
    """A sentence longer than `limit` words, cut at the last clause boundary (";", ":", ",",
    " (") that keeps at least a third of the limit, else at the limit-th word."""
    words = sentence.split(" ")
    prefix = " ".join(words[:limit])
    cut = max((prefix.rfind(mark) for mark in ("; ", ": ", ", ", " (")), default=-1)
    if cut < 0 or _words(prefix[:cut]) < limit // 3:
        cut = len(prefix)
    head, tail = sentence[:cut].rstrip(" ,;:"), sentence[cut:].lstrip(" ,;:")
    return f"{head} …", f"… {tail}"


def interval_words(summary) -> str:
    """The sentence saying which 95% intervals a summary's numbers carry
    (reportgen.results.intervals: summary["intervals"]), or "" when it records none."""
    from reportgen.results import intervals as iv

    entries = (summary.get(iv.INTERVALS) if isinstance(summary, dict) else None) or {}
    entries = [e for e in entries.values() if isinstance(e, dict)]
    if not entries:
        return ""
    methods = {e.get("method") for e in entries}
    bootstraps = methods & {iv.BOOTSTRAP, iv.BOOTSTRAP_STATISTIC}
    counts = set()                  # the images the bootstraps resample (else the Wilsons')
    for e in entries:
        n = e.get("n")
        if e.get("method") in bootstraps or not bootstraps:
            counts.update(v for v in (n if isinstance(n, list) else [n]) if v)
    over = (f"the {next(iter(counts)):,} images" if len(counts) == 1 else "the images")
    if iv.WILSON in methods and bootstraps:
        text = f"Wilson for accuracies and rates, BCa bootstrap over {over} otherwise"
    elif iv.WILSON in methods:
        text = f"Wilson, over {over}"
    else:
        text = f"BCa bootstrap over {over}"
    if iv.BOOTSTRAP_STATISTIC in methods:
        text += " (a pooled score's whole statistic resampled)"
    if any("value" in e for e in entries):
        text += "; differences paired on the same images"
    return f"95% intervals: {text}."


def with_interval_words(caption: str, summary) -> str:
    """`caption` followed by `interval_words(summary)` (unchanged when that is empty)."""
    words = interval_words(summary)
    if not words or words in (caption or ""):
        return caption
    return f"{caption.rstrip()} {words}" if caption else words
