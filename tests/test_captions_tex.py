"""captions.tex of the paper supplement (reportgen/commands/captions_tex.py), compiled with
pdflatex as the README documents it: every figure placed (its \\label in the .aux; its PNG or
PDF an XObject of the PDF), none wider or taller than the page (LaTeX's own "Float too large"
and "Overfull" warnings), any number of figures (200, and without the \\clearpage barriers the
same file fails), every character of a caption safe, formulas set as math."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from reportgen.figures.encode import png_size

PDFLATEX = shutil.which("pdflatex")
needs_pdflatex = pytest.mark.skipif(
    PDFLATEX is None,
    reason="pdflatex is not installed (Debian: apt-get install texlive-latex-base)")
# the document the README's "Paper supplement" section documents, nothing added
DOCUMENT = ("\\documentclass{article}\\usepackage{graphicx}\\begin{document}\\input{captions}"
            "\\end{document}\n")
PDFLATEX_TIMEOUT_S = 300


@dataclass
class Compiled:
    pdf: bytes
    log: str
    labels: list[tuple[str, int]]      # (label, figure number), in the .aux's order
    fonts: set[str]                    # embedded font files (cmr10, cmmi7, ...)


def compile_captions(folder: Path, document: str = DOCUMENT) -> Compiled:
    """pdflatex on `document` (which inputs captions.tex) in `folder`, once: the .aux has every
    label after one run, and the figures need no other pass."""
    (folder / "supplement-test.tex").write_text(document)
    run = subprocess.run([PDFLATEX, "-interaction=nonstopmode", "-halt-on-error",
                          "-no-shell-escape", "supplement-test.tex"], cwd=folder,
                         stdin=subprocess.DEVNULL, capture_output=True,
                         timeout=PDFLATEX_TIMEOUT_S)
    log_file = folder / "supplement-test.log"
    log = log_file.read_text("latin-1") if log_file.exists() else run.stdout.decode("latin-1")
    errors = [line for line in log.splitlines() if line.startswith("!")]
    assert run.returncode == 0, f"pdflatex failed: {errors or log[-2000:]}"
    aux = (folder / "supplement-test.aux").read_text("latin-1")
    labels = [(m[1], int(m[2])) for m in re.finditer(r"\\newlabel\{([^}]*)\}\{\{(\d+)\}", aux)]
    fonts = set(re.findall(r"/([a-z]+\d+)\.pfb>", log))
    return Compiled((folder / "supplement-test.pdf").read_bytes(), log, labels, fonts)


def pdf_xobjects(pdf: bytes) -> tuple[list[str], list[tuple[int, int]]]:
    """(the file names of the PDF pages pdfTeX included as Form XObjects, (width, height) of
    every Image XObject), read from the stream objects' dictionaries, which pdfTeX writes
    uncompressed (a stream cannot go into an object stream)."""
    forms, images = [], []
    for obj in re.finditer(rb"\d+ \d+ obj\s*(<<(?:(?!endobj).)*?>>)\s*stream\r?\n", pdf,
                           flags=re.S):
        head = obj.group(1)
        if re.search(rb"/Subtype\s*/Form", head):
            name = re.search(rb"/PTEX\.FileName\s*\(([^)]*)\)", head)
            if name:
                forms.append(name.group(1).decode().removeprefix("./"))
        elif re.search(rb"/Subtype\s*/Image", head):
            width = int(re.search(rb"/Width\s+(\d+)", head).group(1))
            height = int(re.search(rb"/Height\s+(\d+)", head).group(1))
            images.append((width, height))
    return forms, images


def check_every_figure(compiled: Compiled, folder: Path, stems: list[str],
                       words_fit: bool = True) -> None:
    """Each figure (zip path without extension, in captions.tex's order) was typeset once, in
    order, with its own file in the PDF (a plot as its PDF, a mosaic as its PNG), and none
    overflows the page (nor a line, with `words_fit`: captions without unbreakable runs)."""
    tex = (folder / "captions.tex").read_text()
    labels = re.findall(r"\\label\{([^}]*)\}", tex)
    assert len(labels) == len(stems)
    assert compiled.labels == [(label, n) for n, label in enumerate(labels, 1)]
    forms, images = pdf_xobjects(compiled.pdf)
    assert sorted(forms) == sorted(f"{s}.pdf" for s in stems if (folder / f"{s}.pdf").exists())
    mosaics = Counter(png_size((folder / f"{s}.png").read_bytes()) for s in stems
                      if not (folder / f"{s}.pdf").exists())
    assert not mosaics - Counter(images), "a PNG figure is missing from the PDF"
    assert "Float too large" not in compiled.log
    assert "Overfull \\vbox" not in compiled.log
    assert not words_fit or "Overfull \\hbox" not in compiled.log


# --------------------------------------------------------------------------------- no pdflatex


def test_formulas_become_math_and_identifiers_stay_text():
    from reportgen.commands.captions_tex import latex_escape

    assert latex_escape("H_i = -Σ_j c_ij log c_ij (argmax_j c_ij)") == \
        r"$H_{i}$ = -$\Sigma_{j}$ $c_{ij}$ log $c_{ij}$ ($\mathrm{argmax}_{j}$ $c_{ij}$)"
    assert latex_escape("vote û_j|i = W_ij u_i, length |û_j|i|; u_hat[j|i]") == \
        r"vote $\hat{u}_{j|i}$ = $W_{ij}$ $u_{i}$, length $|\hat{u}_{j|i}|$; $\hat{u}_{j|i}$"
    assert latex_escape("m = l_i (c_ij l_j)^2, f(x_0) - f(x_k)") == \
        r"m = $l_{i}$ ($c_{ij}$ $l_{j}$)${}^{2}$, f($x_{0}$) - f($x_{k}$)"
    assert latex_escape("p_d = var_d / Σ var; m·σ_d; x ← x·p/|x|; max |Δ|") == \
        (r"$p_{d}$ = $\mathrm{var}_{d}$ / $\Sigma$ var; m$\cdot \sigma_{d}$; "
         r"x $\leftarrow$ x$\cdot$p/$|x|$; max $|\Delta|$")
    # identifiers: layer names, factors, colour maps, option ids are text
    for name in ("primary_conv", "shear_x", "RdBu_r", "per_class", "test_0", "MNIST_LPcaps"):
        assert latex_escape(name) == name.replace("_", r"\_")
    assert latex_escape("c_ij", formulas=False) == r"c\_ij"
    # a base LaTeX has no letter for stays text
    assert latex_escape("ж_i") == r"U+0436\_i"


def test_latex_escape_leaves_only_ascii_and_balanced_math():
    from reportgen.commands.captions_tex import latex_escape

    nasty = "".join(chr(c) for c in range(0x110)) + "中🙂ש½ﬁ\u200b\u0302x̄ ‖ δ² 50%"
    out = latex_escape(nasty)
    assert out.isascii()
    assert len(re.findall(r"(?<!\\)\$", out)) % 2 == 0
    assert "U+4E2D" in out and "U+1F642" in out and "U+00BD" in out and r"\={x}" in out
    assert "fi" in out and re.fullmatch(r"[ -~]*", out)            # no control characters
    # a minus sign is math's minus ("log 10 − H" printed an en dash), a dash stays a dash
    assert latex_escape("log10 − H") == "log10 $-$ H"
    assert latex_escape("2–4 points") == "2--4 points"


def test_figures_are_bounded_by_width_and_height_with_barriers():
    from reportgen.commands.captions_tex import FLOAT_BARRIER, captions_tex
    from reportgen.commands.supplement import SupplementFigure

    figures = [SupplementFigure(stem=f"figures/M/f{i}", title=f"F{i}", caption="x " * i,
                                width=100 * i, height=50) for i in range(1, 2 * FLOAT_BARRIER + 2)]
    tex = captions_tex(figures)
    graphics = re.findall(r"\\includegraphics\[width=([0-9.]+)\\linewidth,"
                          r"height=\\reportgenheight\{(\d+)\},keepaspectratio\]\{([^}]*)\}", tex)
    assert [g[2] for g in graphics] == [f.stem for f in figures]
    assert [float(g[0]) for g in graphics] == [min(1.0, max(0.25, round(f.width / 480, 2)))
                                               for f in figures]
    assert [int(g[1]) for g in graphics] == sorted(int(g[1]) for g in graphics)  # longer caption
    blocks = re.split(r"^\\clearpage$", tex, flags=re.M)
    assert len(blocks) == 3 and all(b.count("\\begin{figure}") == FLOAT_BARRIER
                                    for b in blocks[:2])


# ------------------------------------------------------------------------------ with pdflatex


def _png(rng, width: int, height: int) -> bytes:
    from reportgen.figures.encode import png_bytes

    return png_bytes(rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8),
                     palette=False)


@pytest.mark.slow
@needs_pdflatex
def test_two_hundred_figures_of_any_shape_compile_and_only_with_the_barriers(tmp_path):
    from reportgen.commands.captions_tex import captions_tex
    from reportgen.commands.supplement import SupplementFigure

    rng = np.random.default_rng(0)
    detail = ("Details: the cosine of v_j and û_j|i = W_ij u_i, mean |û_j|i| per bin, "
              "H_i = -Σ_j c_ij log c_ij, 50% of primary_conv & shear_x #3 {x} ~ ^. ")
    figures = []
    for i in range(200):
        # tall strips, wide strips, squares; up to three times the page in either direction
        width, height = [(40 + i, 1800), (2400, 30 + i), (300 + i, 300)][i % 3]
        stem = f"figures/M.v{i % 4}/{i // 10}-{i % 10}/fig_{i}"
        figures.append(SupplementFigure(
            stem=stem, title=f"Figure {i} (per_layer)", caption=detail * (1 + 12 * (i % 5 == 0)),
            width=width // 2, height=height // 2, files={"png": _png(rng, width, height)}))
        (tmp_path / stem).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f"{stem}.png").write_bytes(figures[-1].files["png"])
    tex = captions_tex(figures)
    (tmp_path / "captions.tex").write_text(tex)
    compiled = compile_captions(tmp_path)
    check_every_figure(compiled, tmp_path, [f.stem for f in figures])
    assert "cmmi7" in compiled.fonts                   # subscripts set as math

    unbarred = tmp_path / "unbarred"
    unbarred.mkdir()
    (unbarred / "figures").symlink_to(tmp_path / "figures")
    (unbarred / "captions.tex").write_text(tex.replace("\\clearpage\n", ""))
    with pytest.raises(AssertionError, match="dead cycles|Too many unprocessed floats"):
        compile_captions(unbarred)


@pytest.mark.slow
@needs_pdflatex
def test_every_character_of_a_caption_compiles(tmp_path):
    """Every character up to U+017F, the ones captions use, other scripts, control and
    combining characters, in a title and a caption."""
    from reportgen.commands.captions_tex import _MATH, _TEXT, captions_tex
    from reportgen.commands.supplement import SupplementFigure

    characters = ("".join(chr(c) for c in range(0x180)) + "".join(_TEXT) + "".join(_MATH)
                  + "中🙂ש½ﬁ\u200b\u2009\ufeff e\u0301 \u0302 x̄ ç å ŏ ő ǎ ȯ")
    figure = SupplementFigure(stem="figures/chars", title=characters, caption=" ".join(
        [characters, "c_ij^2 |v| u_hat[j|i] σ_d", characters[::-1]]), width=30, height=20,
        files={"png": _png(np.random.default_rng(1), 60, 40)}, cite=("key",))
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures/chars.png").write_bytes(figure.files["png"])
    (tmp_path / "captions.tex").write_text(captions_tex([figure]))
    compiled = compile_captions(tmp_path)
    check_every_figure(compiled, tmp_path, [figure.stem], words_fit=False)


@pytest.mark.slow
@needs_pdflatex
def test_a_caption_longer_than_latex_can_measure_compiles_as_a_paragraph(tmp_path):
    """LaTeX's \\caption sets its text on one line first: 4,500 characters make that line
    longer than TeX's largest dimension ("Dimension too large", or a wrapped-around width that
    sets the caption as one overfull line); the rest of such a caption follows the \\caption."""
    from reportgen.commands.captions_tex import captions_tex
    from reportgen.commands.supplement import SupplementFigure

    caption = "The class capsule v_j and its votes. " * 120
    figure = SupplementFigure(stem="figures/long", title="Long", caption=caption, width=30,
                              height=21, files={"png": _png(np.random.default_rng(2), 60, 42)})
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures/long.png").write_bytes(figure.files["png"])
    tex = captions_tex([figure])
    (tmp_path / "captions.tex").write_text(tex)
    compiled = compile_captions(tmp_path)
    assert compiled.labels == [("fig:long", 1)]
    assert (60, 42) in pdf_xobjects(compiled.pdf)[1]
    assert "Overfull \\hbox" not in compiled.log
    assert tex.count("$v_{j}$") == 120                          # all of it, formulas as math
