"""BibTeX entries, the form every citation takes: a family and a technique declare theirs
(`Family.citations`, `Technique.citations`), and the pages and the supplement's references.bib
read them through these helpers. Plain text only: no entry is fetched or completed.
"""

from __future__ import annotations

import re

_HEAD = re.compile(r"^\s*@(\w+)\s*\{\s*([^,\s]+)\s*,", re.S)
_ACCENTS = {"\\'e": "é", '\\"a': "ä", '\\"u': "ü", '\\"o': "ö", "\\'a": "á", "\\`e": "è"}


def entry_key(entry: str) -> str:
    """The citation key of one BibTeX entry (`@type{key, ...}`); ValueError otherwise."""
    match = _HEAD.match(entry) if isinstance(entry, str) else None
    if match is None:
        raise ValueError("a citation is one BibTeX entry, '@type{key, field = {...}, ...}'; got "
                         f"{str(entry)[:60]!r}")
    return match.group(2)


def check_entries(entries, who: str) -> None:
    """ValueError naming `who` unless `entries` is a sequence of BibTeX entries whose braces
    balance."""
    if isinstance(entries, str):
        raise ValueError(f"{who}: citations is a tuple of BibTeX entries, not one string")
    for entry in entries:
        try:
            key = entry_key(entry)
        except ValueError as exc:
            raise ValueError(f"{who}: {exc}") from None
        if entry.count("{") != entry.count("}"):
            raise ValueError(f"{who}: the braces of BibTeX entry '{key}' do not balance")


def bibliography(entries) -> str:
    """`entries` (repeats allowed) as one .bib text: one entry per key, sorted by key."""
    chosen = {}
    for entry in entries:
        chosen.setdefault(entry_key(entry), entry.strip())
    return "".join(chosen[k] + "\n\n" for k in sorted(chosen))


def unique(entries) -> list[str]:
    """`entries` in order, each key once."""
    seen, out = set(), []
    for entry in entries:
        key = entry_key(entry)
        if key not in seen:
            seen.add(key)
            out.append(entry)
    return out


def fields(entry: str) -> dict[str, str]:
    """The fields of one entry, values in plain text (braces and TeX accents removed), with
    its "type" and "key"."""
    kind = _HEAD.match(entry)
    out = {"type": kind.group(1).lower() if kind else "", "key": kind.group(2) if kind else ""}
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


def reference(entry: str, readable=lambda text: text) -> str:
    """One entry as a plain-text reference: authors (year). Title. Venue, pages. Identifier.
    Its note (what reportgen could not complete) follows, through `readable`."""
    f = fields(entry)
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


def short(entry: str) -> str:
    """"Sabour et al. 2017" (one or two authors named, three or more as "et al.")."""
    f = fields(entry)
    last = [name.partition(",")[0].strip() for name in f.get("author", "").split(" and ")
            if name.strip()]
    who = last[0] if len(last) == 1 else " and ".join(last) if len(last) == 2 else \
        f"{last[0]} et al." if last else f.get("key", "")
    return f"{who} {f.get('year', 'n.d.')}".strip()
