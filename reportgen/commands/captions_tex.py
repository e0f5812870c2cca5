"""`captions.tex` of the paper supplement (README "Paper supplement"): one `figure` environment
per figure, which pdflatex sets in a document that loads graphicx and nothing else.

- Every figure is at most its own width (reportgen.figures.print_size: LINE_WIDTH_PX layout
  pixels fill \\linewidth) and at most the text height less its caption's lines
  (`keepaspectratio` keeps its shape), so no float is taller than a page.
- A `\\clearpage` after every FLOAT_BARRIER figures: LaTeX holds at most 18 floats it has not
  placed yet, and a document of figures alone has no text to place them between; without the
  barriers a long supplement stops with "Output loop---100 consecutive dead cycles" or "Too
  many unprocessed floats".
- Captions are LaTeX-escaped text with their formulas (reportgen.pages.formulas: c_ij, û_j|i,
  |v|, (…)^2) as math, `$c_{ij}$`; any other character pdflatex cannot set is written as its
  code point (U+4E2D). A caption longer than \\caption can take (CAPTION_CHARACTERS) goes on
  after it, in the figure.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Protocol

from reportgen.figures.print_size import printed_width_share
from reportgen.pages.formulas import Formula, split_formulas


class CaptionedFigure(Protocol):
    """What a figure environment needs of a supplement's figure
    (reportgen.commands.supplement.SupplementFigure, which imports this module)."""

    stem: str
    title: str
    caption: str
    width: int
    cite: tuple[str, ...]

FLOAT_BARRIER = 8                      # figures between two \clearpage (LaTeX holds 18 floats)
# LaTeX's \caption first sets its text on one line to measure it: beyond about 3,000 characters
# that line is longer than TeX's largest dimension (16384pt) and pdflatex stops with "Dimension
# too large". Longer captions go on after the \caption, as a paragraph of the figure.
CAPTION_CHARACTERS = 2500

HEADER = r"""% Figures of the reportgen supplement. In a document: \usepackage{graphicx}
% (pdflatex; no other package), then \input{captions}. Each \includegraphics names the file
% without extension: pdflatex takes the PDF where there is one, else the PNG. A figure is at
% most the text width and the text height less its caption (\reportgenheight{characters of the
% caption}; define it before \input to choose other heights); a \clearpage after every
% {barrier} figures lets LaTeX place any number of them. Cite the methods from references.bib.
%
% The text height less the lines of a caption of #1 characters (half an em each) and 3 more:
\providecommand\reportgenroom[1]{%
  \dimexpr\textheight-\baselineskip*\numexpr#1*\dimexpr.5em\relax/\linewidth+3\relax\relax}
% ... and never less than a fifth of the text height:
\providecommand\reportgenheight[1]{%
  \ifdim\reportgenroom{#1}<.2\textheight .2\textheight\else\reportgenroom{#1}\fi}
"""

GREEK = {"α": r"\alpha", "β": r"\beta", "γ": r"\gamma", "δ": r"\delta", "ε": r"\epsilon",
         "ζ": r"\zeta", "η": r"\eta", "θ": r"\theta", "κ": r"\kappa", "λ": r"\lambda",
         "μ": r"\mu", "ν": r"\nu", "ξ": r"\xi", "π": r"\pi", "ρ": r"\rho", "σ": r"\sigma",
         "τ": r"\tau", "φ": r"\phi", "χ": r"\chi", "ψ": r"\psi", "ω": r"\omega",
         "Γ": r"\Gamma", "Δ": r"\Delta", "Θ": r"\Theta", "Λ": r"\Lambda", "Π": r"\Pi",
         "Σ": r"\Sigma", "Φ": r"\Phi", "Ψ": r"\Psi", "Ω": r"\Omega"}
# characters set in text mode (OT1, LaTeX's default encoding, has no <, >, | glyphs)
_TEXT = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#",
         "^": r"\textasciicircum{}", "_": r"\_", "%": r"\%", "~": r"\textasciitilde{}",
         "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}", "…": r"\ldots{}",
         "–": "--", "—": "---", "’": "'", "‘": "`", "“": "``", "”": "''",
         "\u00a0": "~", "ß": r"\ss{}", "æ": r"\ae{}", "Æ": r"\AE{}", "œ": r"\oe{}",
         "Œ": r"\OE{}", "ø": r"\o{}", "Ø": r"\O{}", "ł": r"\l{}", "Ł": r"\L{}"}
# symbols set as math (no package needed); the minus sign U+2212 as math's minus, not an en dash
_MATH = {**GREEK, "−": "-", "±": r"\pm", "×": r"\times", "°": r"{}^\circ", "→": r"\rightarrow",
         "←": r"\leftarrow", "≥": r"\geq", "≤": r"\leq", "≈": r"\approx", "‖": r"\|",
         "∞": r"\infty", "√": r"\surd", "·": r"\cdot", "∈": r"\in", "¹": "{}^1", "²": "{}^2",
         "³": "{}^3"}
# combining accents (after their letter, as NFD writes them) -> text and math accent commands
_ACCENTS = {"\u0300": "`", "\u0301": "'", "\u0302": "^", "\u0303": "~", "\u0304": "=",
            "\u0306": "u", "\u0307": ".", "\u0308": '"', "\u030a": "r", "\u030b": "H",
            "\u030c": "v", "\u0327": "c"}
_MATH_ACCENTS = {"\u0300": "grave", "\u0301": "acute", "\u0302": "hat", "\u0303": "tilde",
                 "\u0304": "bar", "\u0306": "breve", "\u0307": "dot", "\u0308": "ddot",
                 "\u030c": "check"}
_OPERATORS = {"argmax": r"\mathrm{argmax}", "max": r"\max", "min": r"\min", "sum": r"\sum",
              "prod": r"\prod", "var": r"\mathrm{var}"}


def _symbol(ch: str) -> tuple[bool, str]:
    """(is math, LaTeX) of one character that is no accent; anything pdflatex could not set
    (other scripts, control characters) as a plain-ASCII stand-in."""
    if ch in _TEXT:
        return False, _TEXT[ch]
    if ch in _MATH:
        return True, _MATH[ch]
    if " " <= ch <= "~":
        return False, ch
    if ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf", "Mn"):
        return False, " " if ch.isspace() else ""
    compatible = unicodedata.normalize("NFKD", ch)            # "ﬁ" -> "fi"; "½" has none
    if all(" " <= c <= "~" for c in compatible):
        return False, "".join(_TEXT.get(c, c) for c in compatible)
    return False, f"U+{ord(ch):04X}"


def _text_pieces(text: str) -> list[tuple[bool, str]]:
    pieces: list[tuple[bool, str]] = []
    for ch in unicodedata.normalize("NFD", text):
        if ch in _ACCENTS and pieces and pieces[-1][1]:
            math, last = pieces[-1]
            if not math:
                pieces[-1] = (False, f"\\{_ACCENTS[ch]}{{{last}}}")
            elif ch in _MATH_ACCENTS:
                pieces[-1] = (True, f"\\{_MATH_ACCENTS[ch]}{{{last}}}")
            continue
        pieces.append(_symbol(ch))
    return pieces


def _math_base(base: str) -> str | None:
    """A formula's base as math ("c", "\\hat{u}", "\\Sigma"); None when it is no letter LaTeX
    knows without packages."""
    if base in _OPERATORS:
        return _OPERATORS[base]
    parts: list[str] = []
    for ch in unicodedata.normalize("NFD", base):
        if ch.isascii() and ch.isalpha():
            parts.append(ch)
        elif ch in GREEK:
            parts.append(GREEK[ch])
        elif ch in _MATH_ACCENTS and parts:
            parts[-1] = f"\\{_MATH_ACCENTS[ch]}{{{parts[-1]}}}"
        else:
            return None
    return " ".join(parts)


def _formula_math(formula: Formula) -> str | None:
    base = _math_base(formula.base) if formula.base else "{}"
    if base is None:
        return None
    math = base + (f"_{{{formula.index}}}" if formula.index else "") + \
        (f"^{{{formula.power}}}" if formula.power else "")
    return f"|{math}|" if formula.norm else math


def latex_escape(text: str, formulas: bool = True) -> str:
    """`text` as LaTeX that pdflatex sets without packages: special characters escaped, the
    symbols captions use and (with `formulas`) their formulas as math, accented letters as
    accent commands, anything else as plain ASCII."""
    text = unicodedata.normalize("NFC", text)
    pieces: list[tuple[bool, str]] = []
    for part in split_formulas(text) if formulas else [text]:
        math = None if isinstance(part, str) else _formula_math(part)
        if math is not None:
            pieces.append((True, math))
        else:
            pieces += _text_pieces(part if isinstance(part, str) else part.written)
    out: list[str] = []
    for i, (math, latex) in enumerate(pieces):
        if not math:
            out.append(latex)
        elif i and pieces[i - 1][0]:
            out[-1] = f"{out[-1][:-1]} {latex}$"          # one $…$ for adjacent math
        else:
            out.append(f"${latex}$")
    return "".join(out)


def _label(stem: str) -> str:
    return "fig:" + re.sub(r"[^A-Za-z0-9:.-]+", "-", stem.removeprefix("figures/")).strip("-")


def _split_caption(text: str, limit: int) -> tuple[str, str]:
    """`text` cut after its last sentence (else word) that ends within `limit` characters."""
    if len(text) <= limit:
        return text, ""
    cut = text.rfind(". ", 0, limit) + 1 or text.rfind(" ", 0, limit)
    cut = cut if cut > 0 else limit
    return text[:cut].rstrip(), text[cut:].lstrip()


def figure_tex(fig: CaptionedFigure) -> list[str]:
    """The lines of one figure environment."""
    width = printed_width_share(fig.width)
    title = latex_escape(" ".join(fig.title.split()), formulas=False)
    caption = " ".join(fig.caption.split())
    cite = f" \\cite{{{','.join(fig.cite)}}}" if fig.cite else ""
    # what the caption takes on the page: "Figure 12: ", the title, the text, "[1, 2]"; beyond
    # 5000 it fills any page (and more would overflow TeX's dimensions in \reportgenroom)
    characters = min(5000, 12 + len(fig.title) + len(caption) + 4 * len(fig.cite))
    head, rest = _split_caption(caption, max(500, CAPTION_CHARACTERS - len(fig.title)))
    lines = ["\\begin{figure}[htbp]",
             "  \\centering",
             f"  \\includegraphics[width={width:.2f}\\linewidth,"
             f"height=\\reportgenheight{{{characters}}},keepaspectratio]{{{fig.stem}}}",
             f"  \\caption[{{{title}}}]{{\\textbf{{{title}.}} {latex_escape(head)}"
             f"{'' if rest else cite}}}",
             f"  \\label{{{_label(fig.stem)}}}"]
    if rest:
        lines.append(f"  {latex_escape(rest)}{cite}\\par")
    return lines + ["\\end{figure}"]


def captions_tex(figures: list[CaptionedFigure]) -> str:
    """The header, then one figure environment per figure in the supplement's order, a
    \\clearpage after every FLOAT_BARRIER of them."""
    out = [HEADER.replace("{barrier}", str(FLOAT_BARRIER))]
    for n, fig in enumerate(figures, 1):
        out += figure_tex(fig)
        if n % FLOAT_BARRIER == 0 and n < len(figures):
            out.append("\\clearpage")
        out.append("")
    return "\n".join(out)
