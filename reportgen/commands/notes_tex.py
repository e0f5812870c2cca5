"""The authors' notes on their models (each model folder's README.md) as LaTeX for the
supplement's `notes.tex`: one unnumbered subsection per model, for pdflatex without packages.

Only the Markdown a paragraph about a model uses is converted: headings, paragraphs, bullet and
numbered lists, **bold**, *emphasis*, `code` and [links](url) (set as "text (url)"); anything
else is kept as escaped text, so nothing an author writes breaks the document.
"""

from __future__ import annotations

import re

from reportgen.commands.captions_tex import latex_escape

_INLINE = re.compile(r"\*\*(.+?)\*\*|__(.+?)__|\*(.+?)\*|_(.+?)_|`(.+?)`|\[(.+?)\]\((.+?)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+]|(\d+)[.)])\s+(.*)$")


def inline_tex(text: str) -> str:
    """One line of Markdown text as LaTeX (escaped; emphasis, code and links converted)."""
    out, last = [], 0
    for match in _INLINE.finditer(text):
        out.append(latex_escape(text[last:match.start()], formulas=False))
        bold, bold2, em, em2, code, label, href = match.groups()
        if bold or bold2:
            out.append(r"\textbf{" + inline_tex(bold or bold2) + "}")
        elif em or em2:
            out.append(r"\emph{" + inline_tex(em or em2) + "}")
        elif code:
            out.append(r"\texttt{" + latex_escape(code, formulas=False) + "}")
        else:
            out.append(inline_tex(label) + r" (\texttt{" + latex_escape(href, formulas=False)
                       + "})")
        last = match.end()
    out.append(latex_escape(text[last:], formulas=False))
    return "".join(out)


def markdown_tex(text: str) -> list[str]:
    """The lines of LaTeX of one Markdown text."""
    lines: list[str] = []
    paragraph: list[str] = []
    lists: list[str] = []                     # the open list environment, if any

    def flush() -> None:
        if paragraph:
            lines.append(" ".join(inline_tex(p) for p in paragraph))
            lines.append("")
            paragraph.clear()

    def close_list() -> None:
        if lists:
            lines.append(rf"\end{{{lists.pop()}}}")
            lines.append("")

    for raw in text.splitlines():
        heading, bullet = _HEADING.match(raw), _BULLET.match(raw)
        if not raw.strip():
            flush()
            close_list()
        elif heading:
            flush()
            close_list()
            lines += [r"\paragraph{" + inline_tex(heading.group(2)) + "}", ""]
        elif bullet:
            flush()
            kind = "enumerate" if bullet.group(1) else "itemize"
            if lists and lists[-1] != kind:
                close_list()
            if not lists:
                lists.append(kind)
                lines.append(rf"\begin{{{kind}}}")
            lines.append(r"\item " + inline_tex(bullet.group(2)))
        elif lists:                            # a list item's continuation line
            lines[-1] += " " + inline_tex(raw.strip())
        else:
            paragraph.append(raw.strip())
    flush()
    close_list()
    return lines


def notes_tex(notes: dict[str, str]) -> str:
    """`notes.tex`: {model name: Markdown} as one subsection each, in the given order."""
    lines = ["% The authors' notes on their models (each model folder's README.md), written by",
             "% `reportgen export`; main.tex inputs it before the figures.", ""]
    for name, text in notes.items():
        lines += [r"\subsection*{" + latex_escape(name, formulas=False) + "}", "",
                  *markdown_tex(text)]
    return "\n".join(lines).rstrip() + "\n"
