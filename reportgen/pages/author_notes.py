"""The author's own words about a model (its folder's README.md) as the HTML its pages show.

Markdown (Python-Markdown with its "extra" extensions: tables, fenced code, footnotes) is
rendered here rather than by MkDocs, because the pages are one raw HTML block MkDocs passes
through as is. Raw HTML in the notes is shown as text, not run: a note is words and figures of
speech, and a `<script>` or an unclosed `<div>` in it must not break the page it sits on.
Headings go two levels down (a note's `#` is an h3), below the page's own h1 and h2.
"""

from __future__ import annotations

import re

from markupsafe import Markup

_HEADING = re.compile(r"<(/?)h([1-6])\b")


def _demoted(match: re.Match) -> str:
    return f"<{match.group(1)}h{min(6, int(match.group(2)) + 2)}"


def notes_html(text: str) -> Markup:
    """The HTML of the Markdown `text` ("" for none), safe to put in a page as is."""
    if not text.strip():
        return Markup("")
    import markdown

    md = markdown.Markdown(extensions=["extra", "sane_lists"], output_format="html")
    # raw HTML is escaped, never passed through (the block and the inline pattern)
    md.preprocessors.deregister("html_block")
    md.inlinePatterns.deregister("html")
    return Markup(_HEADING.sub(_demoted, md.convert(text)))
