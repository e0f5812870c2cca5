"""`reportgen export` on a real build of a tiny model: the same bytes twice; one LaTeX figure per
figure with escaped captions and formulas as math, which pdflatex compiles with every figure;
CSV numbers equal to the stored arrays and the history; PDFs that parse; PNGs at twice their
layout size; one-line errors naming the command to run first. Plus the pieces on their own:
plot PNGs at 2x, LaTeX escaping, the references."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from reportgen.cli import main
from reportgen.figures.encode import PIXEL_RATIO, png_size
from test_captions_tex import (PDFLATEX, PDFLATEX_TIMEOUT_S, check_every_figure,
                               compile_captions, needs_pdflatex)
from trained_tiny import copy_trained_tiny

TECHNIQUES = ("predictions", "gradcam_pp", "conv_feature_maps", "class_capsules", "rpv",
              "affine_robustness")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A tiny model trained one epoch and built (every step, 2 inputs, one dataset analysis
    at every step, so there are trends): (root, models dir, site dir, cache dir)."""
    from reportgen.catalog import Catalog
    from reportgen.commands.build import BuildOptions, build

    root = tmp_path_factory.mktemp("export")
    models = root / "models"
    copy_trained_tiny(tmp_path_factory, models / "Tiny")
    summary = build(Catalog(models), BuildOptions(
        models="Tiny", steps="all", images="test:0-1", analyses="all", techniques=TECHNIQUES,
        eval_images=30, cache_dir=str(root / "cache"), site_dir=str(root / "site")))
    assert summary.ok, summary.failed
    return root, models, root / "site", root / "cache"


def _export(built, out: Path, *args) -> zipfile.ZipFile:
    root, _, site, cache = built
    result = CliRunner().invoke(main, ["export", "--site-dir", str(site), "--cache-dir",
                                       str(cache), "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    return zipfile.ZipFile(out)


@pytest.fixture(scope="module")
def supplement(built, tmp_path_factory):
    return _export(built, tmp_path_factory.mktemp("zip") / "supplement.zip", "--steps", "all")


def _figures(archive) -> dict[str, set[str]]:
    """figure stem -> its formats."""
    found: dict[str, set[str]] = {}
    for name in archive.namelist():
        if name.startswith("figures/"):
            stem, kind = name.rsplit(".", 1)
            found.setdefault(stem, set()).add(kind)
    return found


@pytest.mark.slow
def test_two_exports_are_byte_identical(built, supplement, tmp_path):
    again = _export(built, tmp_path / "again.zip", "--steps", "all")
    assert Path(again.filename).read_bytes() == Path(supplement.filename).read_bytes()
    names = supplement.namelist()
    assert names == sorted(names)
    assert {info.date_time for info in supplement.infolist()} == {(1980, 1, 1, 0, 0, 0)}


@pytest.mark.slow
def test_every_figure_has_its_formats_and_the_plots_their_numbers(supplement):
    figures = _figures(supplement)
    steps = ("0-0", "1-2", "1-4", "1-5")
    assert figures["figures/Tiny/training_curves"] == {"png", "pdf", "svg"}
    for step in steps:
        assert figures[f"figures/Tiny/{step}/confusion_matrix"] == {"png", "pdf", "svg"}
        assert figures[f"figures/Tiny/{step}/dataset/affine_robustness"] == {"png", "pdf", "svg"}
        for key in ("test-0", "test-1"):
            # image mosaics: PNG only (no plot to vectorise)
            assert figures[f"figures/Tiny/{step}/{key}/gradcam_pp-conv1"] == {"png"}
            assert f"data/Tiny/{step}/{key}/class_capsules.csv" in supplement.namelist()
        assert f"data/Tiny/{step}/confusion_matrix.csv" in supplement.namelist()
        assert f"data/Tiny/{step}/dataset/affine_robustness.csv" in supplement.namelist()
    assert figures["figures/Tiny/trends/affine_robustness-trend"] == {"png", "pdf", "svg"}
    assert "data/Tiny/trends/affine_robustness.csv" in supplement.namelist()
    bib = supplement.read("references.bib").decode()
    for key in ("sabour2017dynamic", "chattopadhay2018gradcampp", "gu2022explainability"):
        assert f"{{{key}," in bib
    assert "hinton2018matrix" not in bib          # no EM model in this supplement


def _balanced(text: str) -> bool:
    depth = 0
    for ch in re.sub(r"\\[{}%_&#$]", "", text):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


@pytest.mark.slow
def test_captions_tex_has_one_figure_per_figure_with_escaped_captions(supplement):
    tex = supplement.read("captions.tex").decode("utf-8")
    figures = _figures(supplement)
    graphics = re.findall(r"\\includegraphics\[width=[0-9.]+\\linewidth,height=\\reportgenheight"
                          r"\{\d+\},keepaspectratio\]\{([^}]*)\}", tex)
    assert tex.count("\\begin{figure}") == tex.count("\\end{figure}") == len(figures)
    assert sorted(graphics) == sorted(figures)            # one environment per figure
    labels = re.findall(r"\\label\{([^}]*)\}", tex)
    assert len(set(labels)) == len(labels) == len(figures)
    assert _balanced(tex)
    captions = re.findall(r"^  \\caption\[\{[^\n]*\}\]\{(.*)\}$", tex, flags=re.M)
    assert len(captions) == len(figures)
    for caption in captions:
        assert _balanced(caption)
        text = re.sub(r"\\cite\{[^}]*\}", "", caption)
        maths = re.findall(r"(?<!\\)\$([^$]*)\$", text)
        text = re.sub(r"(?<!\\)\$[^$]*\$", "", text)
        assert not re.search(r"(?<!\\)[%&_#$]", text), caption       # escaped specials
        assert not re.search(r"[^\x00-\x7f]", caption), caption        # pdflatex-safe
        for math in maths:                                            # math: commands, letters
            assert re.fullmatch(r"[\\{}_^|A-Za-z0-9 ]*", math), math
    assert any("\\%" in c for c in captions) and any("primary\\_conv" in c for c in captions)
    gradcam = next(c for c in captions if "Grad-CAM++ (conv1)" in c)
    # the technique's reference, then the model's family's (Tiny is a CapsNet)
    assert "Tiny, step 1-5, input test \\#1." in tex and \
        "\\cite{chattopadhay2018gradcampp,sabour2017dynamic}" in gradcam
    assert all("sabour2017dynamic" in c for c in captions)       # every figure is Tiny's


@pytest.mark.slow
@needs_pdflatex
def test_captions_tex_compiles_with_every_figure_and_its_formulas(supplement, tmp_path):
    """The README's document around the real supplement's captions.tex: pdflatex places every
    figure, none too large for the page, and sets the captions' formulas as math."""
    supplement.extractall(tmp_path)
    tex = (tmp_path / "captions.tex").read_text()
    stems = re.findall(r"keepaspectratio\]\{([^}]*)\}", tex)
    assert sorted(stems) == sorted(_figures(supplement))
    compiled = compile_captions(tmp_path)
    check_every_figure(compiled, tmp_path, stems)
    # the class capsules' caption writes |v|, the RPV captions l_i c_ij l_j
    assert "$|v|$" in tex and "$l_{i}$ $c_{ij}$ $l_{j}$" in tex and "c\\_ij" not in tex
    assert "cmmi7" in compiled.fonts                   # subscripts set in math italic


@pytest.mark.slow
@needs_pdflatex
def test_main_tex_compiles_with_its_bibliography_as_shipped(supplement, tmp_path):
    """The shipped main.tex, as its first line says: pdflatex, bibtex, pdflatex twice. Every
    \\cite of captions.tex resolves (0 undefined citations, BibTeX finds every entry and warns
    of no missing field) and no entry asks the author to complete it."""
    import shutil

    supplement.extractall(tmp_path)
    bibtex_program = shutil.which("bibtex")
    assert bibtex_program, "bibtex is missing (texlive-latex-base brings it)"

    def run(*command):
        done = subprocess.run(command, cwd=tmp_path, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=PDFLATEX_TIMEOUT_S)
        assert done.returncode == 0, done.stdout.decode("latin-1")[-3000:]
        return done.stdout.decode("latin-1")

    latex = (PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape",
             "main.tex")
    run(*latex)
    bibtex_log = run(bibtex_program, "main")
    run(*latex)
    run(*latex)
    log = (tmp_path / "main.log").read_text("latin-1")
    cited = set(re.findall(r"\\cite\{([^}]*)\}", (tmp_path / "captions.tex").read_text()))
    assert cited, "captions.tex cites nothing"
    assert "undefined" not in log.lower().replace("undefined references", ""), \
        [line for line in log.splitlines() if "undefined" in line.lower()]
    assert "Warning--" not in bibtex_log and "I didn't find" not in bibtex_log, bibtex_log
    bbl = (tmp_path / "main.bbl").read_text("latin-1")
    keys = set(re.findall(r"\\bibitem\{([^}]*)\}", bbl))
    assert {k.strip() for c in cited for k in c.split(",")} <= keys
    assert "does not know" not in bbl and "complete the entry" not in bbl
    assert (tmp_path / "main.pdf").stat().st_size > 10_000


@pytest.mark.slow
@needs_pdflatex
def test_a_two_model_supplement_compiles(tmp_path, tmp_path_factory):
    """A site of two models: its supplement adds the comparisons across models, and its
    captions.tex still compiles with every figure placed."""
    from reportgen.catalog import Catalog
    from reportgen.commands.build import BuildOptions, build

    models = tmp_path / "models"
    for name, seed in (("TinyA", 0), ("TinyB", 1)):
        copy_trained_tiny(tmp_path_factory, models / name, seed=seed)
    summary = build(Catalog(models), BuildOptions(
        models="TinyA,TinyB", steps="last", images="test:0", analyses="last",
        techniques=("predictions", "class_capsules", "rpv", "affine_robustness"),
        eval_images=10, cache_dir=str(tmp_path / "cache"), site_dir=str(tmp_path / "site")))
    assert summary.ok, summary.failed
    archive = _export((tmp_path, models, tmp_path / "site", tmp_path / "cache"),
                      tmp_path / "supplement.zip")
    folder = tmp_path / "unzipped"
    archive.extractall(folder)
    tex = (folder / "captions.tex").read_text()
    stems = re.findall(r"keepaspectratio\]\{([^}]*)\}", tex)
    assert {s.split("/")[1] for s in stems} >= {"TinyA", "TinyB"}
    assert any("TinyA" not in s and "TinyB" not in s for s in stems), stems   # across models
    check_every_figure(compile_captions(folder), folder, stems)


def _evaluation_arrays(cache: Path, step: str) -> dict:
    """The stored evaluation of `step`, found by its sidecar alone (not through reportgen)."""
    for meta in (cache / "arrays").glob("*/*/meta.json"):
        info = json.loads(meta.read_text())
        if info.get("technique") == "evaluation" and info.get("step") == step:
            with np.load(meta.parent / "arrays.npz") as data:
                return {k: data[k] for k in data.files}
    raise AssertionError(f"no stored evaluation of step {step}")


def _csv(archive, name) -> list[list[str]]:
    return list(csv.reader(io.StringIO(archive.read(name).decode())))


@pytest.mark.slow
def test_csv_numbers_are_the_stored_numbers(built, supplement):
    _, models, _, cache = built
    for step in ("0-0", "1-5"):
        arrays = _evaluation_arrays(cache, step)
        predicted = np.asarray(arrays["lengths"]).argmax(axis=1)
        labels = np.asarray(arrays["labels"]).astype(int)
        expected = np.zeros((3, 3), dtype=int)
        np.add.at(expected, (labels, predicted), 1)
        rows = _csv(supplement, f"data/Tiny/{step}/confusion_matrix.csv")
        assert [r[0] for r in rows[1:]] == ["0", "1", "2"]
        assert np.array_equal(np.array([[int(v) for v in r[1:]] for r in rows[1:]]), expected)
    history = json.loads((models / "Tiny" / "history.json").read_text())["records"]
    rows = _csv(supplement, "data/Tiny/training_curves.csv")
    header, body = rows[0], rows[1:]
    assert [r[header.index("step")] for r in body] == [r["step"] for r in history]
    for key in ("loss", "val_accuracy"):
        got = [float(r[header.index(key)]) if r[header.index(key)] else None for r in body]
        want = [r.get(key) for r in history]
        assert got == pytest.approx(want, nan_ok=True) if None not in want else \
            [g is None for g in got] == [w is None for w in want]


def _pdf_pages(data: bytes) -> int:
    """Pages of a PDF by its objects (no PDF library): /Type /Page, not /Pages."""
    assert data.startswith(b"%PDF-1.") and data.rstrip().endswith(b"%%EOF")
    offset = int(re.search(rb"startxref\s+(\d+)\s+%%EOF\s*$", data).group(1))
    assert data[offset:offset + 4] == b"xref"                     # the trailer points at it
    return len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", data))


@pytest.mark.slow
def test_pdfs_parse_and_carry_no_dates_or_versions(supplement):
    pdfs = [n for n in supplement.namelist() if n.endswith(".pdf")]
    assert len(pdfs) >= 9
    for name in pdfs:
        data = supplement.read(name)
        assert _pdf_pages(data) == 1, name
        assert b"/CreationDate" not in data and b"Matplotlib" not in data, name
    for name in (n for n in supplement.namelist() if n.endswith(".svg")):
        assert b"<dc:date>" not in supplement.read(name), name


@pytest.mark.slow
def test_pngs_are_twice_their_layout_size(built, supplement):
    from reportgen.cache.store import ArtifactStore
    from reportgen.commands.supplement import collect, load_site_record

    _, _, site_dir, cache = built
    site = load_site_record(site_dir, ArtifactStore(cache))
    figures = collect(site, site.models, steps="all").figures
    assert figures
    for fig in figures:
        assert fig.width and fig.height, fig.stem
        assert png_size(fig.files["png"]) == (PIXEL_RATIO * fig.width, PIXEL_RATIO * fig.height)
        assert supplement.read(f"{fig.stem}.png") == fig.files["png"]
    # on the site, plots are drawn at 2x already, image mosaics at their layout size
    step = site.models[0].steps[-1]
    for panel in [*step.dataset_panels, *step.input_panels["test-0"]]:
        png = next(f for f in panel.figures if f.kind == "png")
        ratio = PIXEL_RATIO if any(f.kind == "pdf" for f in panel.figures) else 1
        assert png_size(Path(png.source).read_bytes()) == (ratio * png.width,
                                                           ratio * png.height), panel.technique


@pytest.mark.slow
def test_choices_and_errors_are_one_line(built, tmp_path):
    root, _, site, cache = built
    one = _export(built, tmp_path / "one.zip", "--inputs", "test-1", "--models", "T*")
    stems = _figures(one)
    assert not any("/test-0/" in s for s in stems) and any("/1-5/test-1/" in s for s in stems)
    assert not any("/0-0/" in s for s in stems)                       # --steps last
    runner = CliRunner()

    def fails(*args) -> str:
        result = runner.invoke(main, ["export", "--out", str(tmp_path / "x.zip"), *args])
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
        return lines[0]

    common = ["--site-dir", str(site), "--cache-dir", str(cache)]
    assert "built models: Tiny" in fails(*common, "--models", "Nope*")
    assert "reportgen build" in fails(*common, "--steps", "9-9")
    assert "reportgen build" in fails("--site-dir", str(tmp_path), "--cache-dir", str(cache))
    empty = tmp_path / "empty-cache"
    assert "reportgen build" in fails("--site-dir", str(site), "--cache-dir", str(empty))
    other = tmp_path / "other-cache"          # a store without this build's record
    shutil.copytree(cache, other, ignore=shutil.ignore_patterns("figures"))
    assert "reportgen build" in fails("--site-dir", str(site), "--cache-dir", str(other))
    assert not (tmp_path / "x.zip").exists()


# --------------------------------------------------------------------------------- the pieces


def test_plot_pngs_are_drawn_at_twice_their_layout_size():
    from reportgen.figures.encode import new_figure
    from reportgen.figures.plots import figure_pair

    fig = new_figure(3.0, 2.0, dpi=100)
    fig.add_subplot().plot([0, 1], [1, 0])
    png, svg, pdf = figure_pair(fig, "line", "a caption")
    assert (png.width, png.height) == (300, 200) == (pdf.width, pdf.height)
    assert png_size(png.data) == (600, 400)
    assert pdf.data.startswith(b"%PDF") and _pdf_pages(pdf.data) == 1
    assert pdf.data == figure_pair(fig, "line", "a caption")[2].data    # deterministic


def test_upscaled_pngs_keep_every_pixel_as_a_square():
    from PIL import Image

    from reportgen.figures.encode import png_bytes, upscale_png

    pixels = np.arange(12, dtype=np.uint8).reshape(3, 4) * 20
    big = upscale_png(png_bytes(pixels), 2)
    with Image.open(io.BytesIO(big)) as image:
        arr = np.asarray(image)
    assert arr.shape == (6, 8)
    assert np.array_equal(arr[::2, ::2], pixels) and np.array_equal(arr[1::2, 1::2], pixels)


def test_latex_escape():
    from reportgen.commands.captions_tex import latex_escape

    assert latex_escape("50% of abc_b & c #1 {x} $y ~ ^ \\") == (
        r"50\% of abc\_b \& c \#1 \{x\} \$y \textasciitilde{} \textasciicircum{} "
        r"\textbackslash{}")
    assert latex_escape("δ ∈ ±0.25 … 1 → 2") == \
        r"$\delta$ $\in$ $\pm$0.25 \ldots{} 1 $\rightarrow$ 2"
    assert latex_escape("cos(v, û)² x̄ é") == r"cos(v, \^{u})${}^2$ \={x} \'{e}"


def test_references_are_what_the_techniques_families_and_data_declare():
    """The supplement cites what each technique and family declares (their BibTeX entries),
    and the data set's paper; no family falls back to another's paper."""
    from reportgen import bibtex
    from reportgen.results import references
    from reportgen.settings.families import example_params, family
    from reportgen.settings.model_params import parse_model_params
    from reportgen.techniques import get_technique

    em = parse_model_params(example_params("em"))
    entries = [*get_technique("adversarial_robustness").citations,
               *family("em").citations_for(em), *references.dataset_entries("Fashion-MNIST")]
    bib = bibtex.bibliography(entries)
    keys = set(re.findall(r"^@\w+\{([^,]+),", bib, flags=re.M))
    assert {"goodfellow2015explaining", "madry2018towards", "hinton2018matrix",
            "xiao2017fashion"} <= keys
    assert _balanced(bib) and "lecun1998gradient" not in bib and "sabour2017dynamic" not in keys
    sr = parse_model_params(example_params("self_routing"))
    assert [bibtex.entry_key(e) for e in family("self_routing").citations_for(sr)] == \
        ["hahn2019self"]
    every = bibtex.bibliography(references.ENTRIES.values())
    assert len(re.findall(r"^@", every, flags=re.M)) == len(references.ENTRIES)
    assert _balanced(every)


def test_write_zip_marks_its_zips_and_replaces_nothing_else(tmp_path):
    """The marker is the first entry (so a killed write is recognisable from its first bytes);
    a file without it is never replaced, one with it only with force."""
    from reportgen.commands.supplement import (SUPPLEMENT_MARKER, written_by_export,
                                               write_zip)
    from reportgen.errors import ReportgenError

    out = tmp_path / "s.zip"
    write_zip(out, {"b.csv": b"1,2\n", "a.png": b"\x89PNG"})
    with zipfile.ZipFile(out) as archive:
        assert archive.namelist() == [SUPPLEMENT_MARKER, "a.png", "b.csv"]
        assert json.loads(archive.read(SUPPLEMENT_MARKER)) == {
            "written_by": "reportgen export", "format": 1}
    assert written_by_export(out)
    with pytest.raises(ReportgenError, match="pass --force"):
        write_zip(out, {"c.csv": b""})
    write_zip(out, {"c.csv": b""}, force=True)
    assert zipfile.ZipFile(out).namelist() == [SUPPLEMENT_MARKER, "c.csv"]

    theirs = tmp_path / "theirs.zip"
    with zipfile.ZipFile(theirs, "w") as archive:
        archive.writestr("thesis.tex", "mine")
        archive.writestr("notes/.reportgen-supplement.json", "{}")   # not the marker's place
    before = theirs.read_bytes()
    for force in (False, True):
        with pytest.raises(ReportgenError, match="not a supplement reportgen wrote"):
            write_zip(theirs, {"c.csv": b""}, force=force)
    assert theirs.read_bytes() == before and not written_by_export(theirs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.zip", "theirs.zip"]   # no temp


def test_leftovers_of_dead_exports_go_and_nothing_else(tmp_path):
    import subprocess
    import sys

    from reportgen.commands.supplement import remove_leftovers, write_zip

    out = tmp_path / "s.zip"
    write_zip(tmp_path / "model.zip", {"a.csv": b"1\n"})
    ours = (tmp_path / "model.zip").read_bytes()
    gone = []                                             # ids of processes that ended
    for _ in range(3):
        process = subprocess.Popen([sys.executable, "-c", "pass"])
        process.wait()
        gone.append(process.pid)
    files = {f".s.zip.{gone[0]}.tmp": ours[:200],        # a killed export's: goes
             f".s.zip.{gone[1]}.tmp": b"",                # killed before its first write
             f".s.zip.{os.getppid()}.tmp": ours,          # its process lives: stays
             f".s.zip.{gone[2]}.tmp": b"PK\x03\x04 somebody else's zip",   # stays
             f".other.zip.{gone[0]}.tmp": ours,           # another --out's: stays
             f"s.zip.{gone[0]}.tmp": ours}                # not the pattern: stays
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    removed = remove_leftovers(out)
    assert sorted(p.name for p in removed) == sorted(list(files)[:2])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["model.zip", *list(files)[2:]])


@pytest.mark.slow
def test_the_figures_a_paper_uses_make_a_small_supplement_of_exactly_those(built, supplement,
                                                                          tmp_path):
    """`--figures` with glob patterns over the names the full supplement's README lists: the
    zip holds exactly the matching figures, their captions, their numbers and only the
    references those captions cite; a pattern that matches nothing writes nothing."""
    readme = supplement.read("README.txt").decode()
    names = readme.split("Figures (names for `reportgen export --figures`):\n")[1].split()
    assert sorted(names) == sorted(stem.removeprefix("figures/") for stem in _figures(supplement))
    rpv = [n for n in names if "/test-0/" in n and n.rsplit("/", 1)[1].startswith("rpv")]
    curves = [n for n in names if n.endswith("/training_curves")]
    assert rpv and curves
    small = _export(built, tmp_path / "paper.zip", "--figures",
                    "Tiny/*/test-0/rpv*, */training_curves", "--steps", "all")
    chosen = sorted(stem.removeprefix("figures/") for stem in _figures(small))
    assert chosen == sorted(rpv + curves)
    tex = small.read("captions.tex").decode()
    assert sorted(re.findall(r"keepaspectratio\]\{figures/([^}]*)\}", tex)) == chosen
    data = [n for n in small.namelist() if n.startswith("data/")]
    assert data and all(n in supplement.namelist() for n in data)
    assert any("training_curves" in n for n in data)
    assert not any("confusion" in n or "class_capsules" in n for n in data), data
    cited = {k for c in re.findall(r"\\cite\{([^}]*)\}", tex) for k in c.split(",")}
    bib = small.read("references.bib").decode()
    assert set(re.findall(r"^@\w+\{([^,]+),", bib, re.M)) == cited
    assert "bhullar2020rpv" in cited and "chattopadhay2018gradcampp" not in cited
    assert "main.tex" in small.namelist()
    # a pattern that matches nothing: refused, nothing written
    root, _, site, cache = built
    result = CliRunner().invoke(main, ["export", "--site-dir", str(site), "--cache-dir",
                                       str(cache), "--out", str(tmp_path / "none.zip"),
                                       "--figures", "Tiny/*/rpv*,nothing-like-this"])
    assert result.exit_code == 2 and "'nothing-like-this' matches no figure" in result.output
    assert not (tmp_path / "none.zip").exists()
