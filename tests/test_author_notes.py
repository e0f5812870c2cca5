"""The author's own words about a model (its folder's README.md): read by the model folder,
rendered at the top of each of its pages (Markdown, raw HTML shown as text, headings below the
page's own) and carried into the supplement as the file and as LaTeX that pdflatex compiles."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from reportgen.commands.notes_tex import inline_tex, markdown_tex, notes_tex
from reportgen.errors import ReportgenError
from reportgen.model_folder import NOTES_LIMIT, ModelFolder
from reportgen.pages.author_notes import notes_html

NOTES = """# Why this model

We trained **MNIST_Demo** with *3 routing iterations* and `batch_size = 32`; see
[the paper](https://arxiv.org/abs/1710.09829).

- accuracy < 97% & loss_total ~ 0.05 #1
- 50% of the $budget$

<script>alert("x")</script>
"""


def test_the_folder_reads_its_notes_and_names_a_bad_file(tmp_path):
    folder = ModelFolder.at(tmp_path / "M")
    folder.path.mkdir()
    assert folder.notes() == ""                         # no README.md: no notes
    folder.notes_path.write_text(NOTES, encoding="utf-8")
    assert folder.notes() == NOTES
    folder.notes_path.write_bytes(b"caf\xe9")           # Latin-1, not UTF-8
    with pytest.raises(ReportgenError) as info:
        folder.notes()
    assert str(folder.notes_path) in info.value.message and "UTF-8" in str(info.value)
    folder.notes_path.write_bytes(b"x" * (NOTES_LIMIT + 1))
    with pytest.raises(ReportgenError, match="too long"):
        folder.notes()


def test_markdown_becomes_html_below_the_page_headings_and_html_stays_text():
    html = str(notes_html(NOTES))
    assert "<h3>Why this model</h3>" in html            # '#' under the page's h1 and h2
    assert "<strong>MNIST_Demo</strong>" in html and "<em>3 routing iterations</em>" in html
    assert "<code>batch_size = 32</code>" in html
    assert '<a href="https://arxiv.org/abs/1710.09829">the paper</a>' in html
    assert "<li>accuracy &lt; 97% &amp; loss_total ~ 0.05 #1</li>" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert str(notes_html("  \n")) == ""


@pytest.mark.slow
def test_every_page_of_the_model_shows_its_notes_and_no_other_models(tmp_path):
    import re

    from reportgen.pages.render import render_site
    from site_fixture import make_site

    docs = tmp_path / "docs"
    site = make_site(docs)
    site.models[0].notes = NOTES
    render_site(site, docs)
    by_model: dict[str, list[str]] = {}
    for page in docs.rglob("*.md"):
        text = page.read_text()
        owner = re.search(r'<div class="rg-page[^"]*"[^>]*data-rg-model="([^"]*)"', text)
        if owner:
            by_model.setdefault(owner.group(1), []).append(text)
    assert len(by_model) == len(site.models) >= 2
    slugs = sorted(by_model, key=lambda slug: min(len(t) for t in by_model[slug]))
    (own,) = [slug for slug in by_model if all("rg-author-notes" in t for t in by_model[slug])]
    assert len(by_model[own]) >= 4           # overview, analyses, filmstrip, layer pages
    for text in by_model[own]:
        assert "<h3>Why this model</h3>" in text
        assert "&lt;script&gt;" in text and "<script>alert" not in text
    for slug in slugs:
        if slug != own:
            assert not any("rg-author-notes" in t for t in by_model[slug])


def test_markdown_becomes_latex_of_its_structure():
    assert inline_tex("**a_b** and *c* `d%` [e](f_g)") == \
        r"\textbf{a\_b} and \emph{c} \texttt{d\%} e (\texttt{f\_g})"
    lines = markdown_tex("# Head\n\none\ntwo\n\n- x\n- y\n\n1. z\n")
    assert lines == [r"\paragraph{Head}", "", "one two", "", r"\begin{itemize}", r"\item x",
                     r"\item y", r"\end{itemize}", "", r"\begin{enumerate}", r"\item z",
                     r"\end{enumerate}", ""]


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_the_supplement_notes_compile_with_every_special_character(tmp_path):
    from reportgen.commands.supplement import MAIN_TEX

    special = "".join(chr(c) for c in range(0x20, 0x7f)) + " é ü ½ 中 🙂"
    (tmp_path / "notes.tex").write_text(notes_tex({"MNIST_Demo": NOTES, "M#2_&": special}))
    (tmp_path / "captions.tex").write_text("")
    (tmp_path / "main.tex").write_text(MAIN_TEX.replace("\\bibliographystyle{plain}\n"
                                                        "\\bibliography{references}\n", ""))
    run = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error",
                          "-no-shell-escape", "main.tex"], cwd=tmp_path, capture_output=True,
                         stdin=subprocess.DEVNULL, timeout=120)
    log = (tmp_path / "main.log").read_text("latin-1")
    assert run.returncode == 0, [line for line in log.splitlines() if line.startswith("!")]
    assert "Output written on main.pdf (1 page" in log
    if shutil.which("pdftotext"):
        subprocess.run(["pdftotext", "main.pdf"], cwd=tmp_path, check=True)
        text = (tmp_path / "main.txt").read_text()
        assert "About the models" in text and "Why this model" in text
        assert "accuracy < 97% &" in text and "0.05 #1" in text


def test_the_supplement_carries_each_models_notes_as_written():
    from reportgen.commands.supplement import Supplement, entries
    from reportgen.pages.sitedata import ModelData, SiteData

    def model(name, notes):
        return ModelData(name=name, dataset="mnist", description="", params=0,
                         class_names=["0", "1"], architecture=[], history=[], steps=[],
                         inputs=[], notes=notes)

    models = [model("A/1", NOTES), model("B", ""), model("A_1", "Other *words*.")]
    site = SiteData(title="t", models=models, techniques=[])
    files = entries(Supplement(), site, models, "last", "all")
    assert files["notes/A_1.md"] == NOTES.encode()          # as written, byte for byte
    assert files["notes/A_1_2.md"] == b"Other *words*."     # names kept apart
    assert not any(name.startswith("notes/B") for name in files)
    tex = files["notes.tex"].decode()
    assert tex.index(r"\subsection*{A/1}") < tex.index(r"\subsection*{A\_1}")
    assert r"\emph{words}" in tex and "notes/" in files["README.txt"].decode()
    files = entries(Supplement(), site, [models[1]], "last", "all")
    assert "notes.tex" not in files and "notes/" not in files["README.txt"].decode()
