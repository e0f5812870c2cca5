"""Font subsets for PDF figures, made once per set of glyphs.

A PDF with TrueType (Type 42) fonts embeds the subset of DejaVu Sans its text uses; matplotlib
makes that subset with fontTools for every PDF it writes (~0.2 s here, most of a small PDF's
cost), although a build's figures keep using the same few sets of glyphs (axis labels, digits,
the same titles at every step). `install()` wraps matplotlib's subsetting so each set is made
once per process and its bytes reused: the PDF bytes are the same (tests/test_figures.py).

It wraps `matplotlib.backends._backend_pdf_ps.get_glyphs_subset`, a private function: it
installs only where that function returns the `SubsetResults` of matplotlib >= 3.11 and
otherwise leaves matplotlib as it is (slower, same output).
"""

from __future__ import annotations

import os
from collections import OrderedDict

MAX_SUBSETS = 256                # ~20-60 kB each

_subsets: OrderedDict = OrderedDict()
_installed = False
stats = {"made": 0, "reused": 0}


class _SavedFont:
    """What matplotlib does with a subset font before closing it: save it to a file object."""

    def __init__(self, data: bytes):
        self.data = data

    def save(self, file, reorderTables=False):          # noqa: N803 (fontTools' signature)
        file.write(self.data)

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def install() -> bool:
    """Reuse font subsets across PDFs from now on in this process; whether it could."""
    global _installed
    if _installed:
        return True
    from matplotlib.backends import _backend_pdf_ps as pdf_ps

    original = getattr(pdf_ps, "get_glyphs_subset", None)
    results = getattr(pdf_ps, "SubsetResults", None)
    if original is None or results is None or not hasattr(results, "_as_cm") or \
            tuple(getattr(results, "_fields", ())) != ("font", "glyph_index_map"):
        return False

    def get_glyphs_subset(fontfile, glyphs):
        glyphs = frozenset(glyphs)
        key = (os.fspath(fontfile), getattr(fontfile, "face_index", 0), glyphs)
        found = _subsets.get(key)
        if found is None:
            with original(fontfile, set(glyphs)) as made:
                found = (pdf_ps.font_as_file(made.font).getvalue(), dict(made.glyph_index_map))
            _subsets[key] = found
            if len(_subsets) > MAX_SUBSETS:
                _subsets.popitem(last=False)
            stats["made"] += 1
        else:
            _subsets.move_to_end(key)
            stats["reused"] += 1
        data, index_map = found
        return results(_SavedFont(data), dict(index_map))._as_cm()

    pdf_ps.get_glyphs_subset = get_glyphs_subset
    _installed = True
    return True
