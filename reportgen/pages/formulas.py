"""Formulas in captions: the captions are plain text and write their formulas as code would
(`c_ij`, `H_i = -Σ_j c_ij log c_ij`, `u_hat[j|i]`, `û_j|i`, `(c_ij l_j)^2`, `|v|`); this is the
one grammar that finds them, for the site (Unicode sub- and superscripts, reportgen.pages.captions)
and for the paper supplement (LaTeX math, reportgen.commands.captions_tex).

A formula is a short base (one or two letters, a Greek letter, a hatted letter, or an operator
name: argmax, max, min, sum, prod, var), `_` and an index of at most three lowercase letters or
digits (or `j|i`, a vote's index), optionally `^power`; or `^power` after anything (`(…)^2`);
either inside bars (`|x|`, a length). Longer names with an underscore are identifiers (layer
names `primary_conv`, factors `shear_x`, colour maps `RdBu_r`) and stay text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OPERATORS = ("argmax", "max", "min", "sum", "prod", "var")
_HAT = r"u_hat(?:\[[a-z]\|[a-z]\]|\b)"               # the votes û of Sabour et al. 2017, Eq. 2
_SUB = rf"(?:[^\W\d_]{{1,2}}|{'|'.join(OPERATORS)})_[0-9a-z]{{1,3}}(?:\|[a-z])?\b"
_POWER = r"\^-?[0-9n]+"
_TOKEN = re.compile(rf"\|(?:{_HAT}|{_SUB}|[^\W\d_])\|"         # |x|, |û_j|i|
                    rf"|\b(?:{_HAT}|{_SUB})(?:{_POWER}\b)?"   # c_ij, u_hat[j|i], x_i^2
                    rf"|{_POWER}\b")                             # (…)^2
_PARTS = re.compile(r"(?P<base>[^_^]*)(?:_(?P<index>[^^]*))?(?:\^(?P<power>.*))?", re.S)


@dataclass(frozen=True)
class Formula:
    written: str          # as the caption writes it
    base: str = ""        # "c", "Σ", "û", "argmax"; "" for a power after a bracket
    index: str = ""       # "ij", "j|i"
    power: str = ""       # "2", "-1"
    norm: bool = False    # |…|


def _formula(written: str) -> Formula:
    norm = len(written) > 2 and written[0] == written[-1] == "|"
    inner = written[1:-1] if norm else written
    hat = re.fullmatch(r"u_hat(?:\[([a-z])\|([a-z])\])?(.*)", inner, flags=re.S)
    if hat:                                            # u_hat[j|i] is û_j|i
        index = f"{hat.group(1)}|{hat.group(2)}" if hat.group(1) else ""
        inner = "û" + (f"_{index}" if index else "") + hat.group(3)
    parts = _PARTS.fullmatch(inner)
    return Formula(written, parts["base"], parts["index"] or "", parts["power"] or "", norm)


def split_formulas(text: str) -> list[str | Formula]:
    """`text` as its pieces in order: plain strings and the Formulas between them."""
    out: list[str | Formula] = []
    end = 0
    for found in _TOKEN.finditer(text):
        if found.start() > end:
            out.append(text[end:found.start()])
        out.append(_formula(found.group(0)))
        end = found.end()
    if end < len(text):
        out.append(text[end:])
    return out
