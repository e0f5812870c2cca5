"""`reportgen export`: a built site's figures as a paper supplement, one zip file.

The build keeps its site data (every panel, caption and artifact-store file) in the store under
the site's digest (reportgen.commands.paper_figures); the export reads that record and the
stored files, so the supplement shows exactly what the site shows, recomputes nothing and
imports no TensorFlow. The zip holds:

- `figures/MODEL/...`: each figure as PNG at twice its layout size (plots are drawn so;
  image mosaics are doubled nearest-neighbour, every pixel a sharp square), and as SVG and PDF
  where it is a plot;
- `data/MODEL/...`: the numbers behind each plot as CSV (training history, confusion matrix,
  each analysis's summary, trends and comparisons, a technique's own export);
- `captions.tex`: one `figure` environment per figure (`\\includegraphics` of the figure's path
  without extension, so pdflatex takes the PDF where there is one), captions LaTeX-escaped with
  their formulas as math (reportgen.commands.captions_tex);
- `references.bib`: the papers of the methods, model families and data sets shown;
- `README.txt`: what the files are;
- `.reportgen-supplement.json`: the marker that tells a supplement reportgen wrote from any
  other file. `export` never replaces a file without it, and one with it only with `--force`.

The bytes depend on the record and the files only: entries sorted, fixed timestamps and
permissions, the stored figures' own deterministic bytes (reportgen.figures.encode).

The zip is written to `.NAME.PID.tmp` beside `--out` (the marker first, so the file is
recognisable from its first bytes), flushed to disk and then published: linked into place when
nothing is there (a file that appeared meanwhile is never replaced), renamed over a supplement
only after checking it again. Temporary files a killed export left (`kill -9`) are removed by
the next export to the same `--out`: only names of that pattern whose process is gone and whose
first bytes are the marker's entry.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import zipfile
from dataclasses import dataclass, field, fields
from pathlib import Path, PurePosixPath

from reportgen.commands.captions_tex import captions_tex
from reportgen.commands.notes_tex import notes_tex
from reportgen.errors import ReportgenError, StoreError
from reportgen.os_errors import user_error
from reportgen.figures.encode import PIXEL_RATIO, png_size, upscale_png
from reportgen.pages.sitedata import (BuildFailure, FigureFile, InputInfo, ModelData, Panel,
                                      Prediction, SiteData, StepData)
from reportgen import bibtex
from reportgen.results import references

ZIP_TIME = (1980, 1, 1, 0, 0, 0)       # the earliest time a zip can hold: no build time inside
SUPPLEMENT_MARKER = ".reportgen-supplement.json"   # first in the zip: "." sorts first
SUPPLEMENT_MARKER_DATA = json.dumps({"written_by": "reportgen export", "format": 1}).encode()
PAPER_KINDS = ("png", "pdf", "svg")
NUMBER_KINDS = ("csv", "json")


@dataclass
class SupplementFigure:
    """One figure of the supplement: its files (kind -> bytes), caption and where it came from."""

    stem: str                          # zip path without extension, e.g. figures/M/5-40/x
    title: str
    caption: str
    width: int                         # layout size (px), for \includegraphics' width
    height: int
    files: dict[str, bytes] = field(default_factory=dict)
    cite: tuple[str, ...] = ()
    numbers: tuple[str, ...] = ()      # zip paths of the CSVs holding its numbers

    @property
    def name(self) -> str:
        """The figure's name as `export --figures` matches it: its stem under figures/."""
        return self.stem.removeprefix("figures/")


@dataclass
class Supplement:
    figures: list[SupplementFigure] = field(default_factory=list)
    data: dict[str, bytes] = field(default_factory=dict)        # zip path -> CSV bytes
    # BibTeX key -> entry: what the figures' families, data sets and techniques declare
    references: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# The build's record


def load_site_record(site_dir: str | Path, store) -> SiteData:
    """The site data the build of `site_dir` kept in `store`; ReportgenError (one line, with
    the command to run) when the folder is no built site or the store no longer has it."""
    from reportgen.commands.paper_figures import site_record_key
    from reportgen.pages.site_files import MARKER, read_marker

    marker = read_marker(site_dir)
    if marker is None or not marker.get("digest"):
        raise ReportgenError(f"{site_dir}/ holds no site reportgen built",
                             expected=f"a site folder with its {MARKER}",
                             fix=f"run `reportgen build --site-dir {site_dir}` (or "
                                 f"`reportgen demo`) first")
    figures = store.get_figures(site_record_key(marker["digest"], store))
    if not figures:
        raise ReportgenError(f"The artifact store {store.root} has no record of the build of "
                             f"{site_dir}/ (made before `export` existed, or the store was "
                             f"cleared since)",
                             fix=f"run `reportgen build --site-dir {site_dir}` again, then "
                                 f"export")
    try:
        return _site(json.loads(Path(figures[0]["path"]).read_bytes()))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise StoreError(f"The record of the build of {site_dir}/ in {store.root} is "
                         f"unreadable ({type(exc).__name__})",
                         fix=f"run `reportgen build --site-dir {site_dir}` again") from None


def _make(cls, data: dict, **nested):
    """`cls(**data)` keeping only its fields; `nested` converts the named ones."""
    names = {f.name for f in fields(cls)}
    values = {k: v for k, v in data.items() if k in names}
    for name, convert in nested.items():
        if values.get(name) is not None:
            values[name] = convert(values[name])
    return cls(**values)


def _files(items) -> list[FigureFile]:
    return [_make(FigureFile, f) for f in items]


def _panel(data: dict) -> Panel:
    return _make(Panel, data, figures=_files, shared=_panel)


def _panels(items) -> list[Panel]:
    return [_panel(p) for p in items]


def _step(data: dict) -> StepData:
    return _make(StepData, data, checkpoint_panels=_panels, dataset_panels=_panels,
                 downloads=_files,
                 input_panels=lambda d: {k: _panels(v) for k, v in d.items()},
                 predictions=lambda d: {k: _make(Prediction, v) for k, v in d.items()})


def _model(data: dict) -> ModelData:
    return _make(ModelData, data, steps=lambda s: [_step(x) for x in s],
                 inputs=lambda s: [_make(InputInfo, x) for x in s],
                 trend_panels=_panels, downloads=_files)


def _site(data: dict) -> SiteData:
    return _make(SiteData, data, models=lambda s: [_model(x) for x in s],
                 compare_panels=_panels,
                 failures=lambda s: [_make(BuildFailure, x) for x in s])


# --------------------------------------------------------------------------------------------
# Choosing what goes in


def select_models(site: SiteData, pattern: str, site_dir) -> list[ModelData]:
    from reportgen.catalog import matches

    chosen = [m for m in site.models if matches(m.name, pattern)]
    if not chosen:
        built = ", ".join(m.name for m in site.models) or "none"
        raise ReportgenError(f"No model of the site in {site_dir}/ matches --models "
                             f"{pattern!r}", received=f"built models: {built}",
                             fix="name one of those, or build the model first with "
                                 "`reportgen build --models NAME`")
    return chosen


def select_steps(model: ModelData, steps: str) -> list[StepData]:
    """'last' (the site's default: the last built step), 'all', or 'E-B,E-B'."""
    if steps == "all":
        return list(model.steps)
    if steps == "last":
        return model.steps[-1:]
    wanted = [s.strip() for s in steps.split(",") if s.strip()]
    built = {s.step: s for s in model.steps}
    missing = [s for s in wanted if s not in built]
    if missing:
        raise ReportgenError(f"Step {missing[0]} of {model.name} is not in the built site",
                             expected="last, all or built steps E-B,E-B",
                             received=f"built steps: {', '.join(built) or 'none'}",
                             fix=f"build it first (`reportgen build --models {model.name} "
                                 f"--steps {missing[0]}`) or choose a built step")
    return [built[s] for s in wanted]


def select_inputs(model: ModelData, inputs: str) -> list[str]:
    """'all', 'none' or input keys 'test-3,test-7'."""
    keys = [i.key for i in model.inputs]
    if inputs == "all":
        return keys
    if inputs == "none":
        return []
    wanted = [k.strip() for k in inputs.split(",") if k.strip()]
    unknown = [k for k in wanted if k not in keys]
    if unknown:
        raise ReportgenError(f"Input {unknown[0]} is not in the built site of {model.name}",
                             expected="all, none or input keys as the site names them",
                             received=f"built inputs: {', '.join(keys) or 'none'}",
                             fix="choose built inputs (their keys are in the site's URLs, "
                                 "?input=KEY)")
    return wanted


# --------------------------------------------------------------------------------------------
# Collecting


def collect(site: SiteData, models: list[ModelData], steps: str = "last",
            inputs: str = "all") -> Supplement:
    """Every figure and number of `models` at the chosen steps and inputs, plus the
    comparisons across models when every model of the site is chosen."""
    out = Supplement()
    names = _Names()
    # what each technique declares (Technique.citations, handed on with the site's techniques)
    cites = {t["name"]: tuple(t.get("citations", ())) for t in site.techniques}
    for model in models:
        mdir = names.part(model.name)
        _cite(out, model.citations)
        _cite(out, references.dataset_entries(model.dataset))
        # every figure of the model cites its family beside the technique (Family.citations_for)
        family = _keys(model.citations)
        _downloads(out, model.downloads, f"{mdir}/training_curves", "Training curves", family)
        labels = {i.key: i.label for i in model.inputs}
        chosen_inputs = select_inputs(model, inputs)
        for step in select_steps(model, steps):
            sdir = f"{mdir}/{names.part(step.step)}"
            _downloads(out, step.downloads, f"{sdir}/confusion_matrix", "Confusion matrix",
                       family)
            at_step = f"{model.name}, step {step.step}."
            for panel in step.checkpoint_panels:
                _panel_figures(out, panel, f"{sdir}/checkpoint", at_step, cites=cites,
                               family=family)
            for panel in step.dataset_panels:
                _panel_figures(out, panel, f"{sdir}/dataset", at_step, cites=cites,
                               family=family)
            for key in chosen_inputs:
                for panel in step.input_panels.get(key, []):
                    _panel_figures(out, panel, f"{sdir}/{names.part(key)}",
                                   f"{model.name}, step {step.step}, input "
                                   f"{labels.get(key, key)}.", cites=cites, family=family)
        for panel in model.trend_panels:
            from reportgen.pages.analyses import derived_numbers, trend_sources

            _panel_figures(out, panel, f"{mdir}/trends", f"{model.name}, over training.",
                           numbers=derived_numbers(panel, trend_sources(model, panel), "step"),
                           cites=cites, family=family)
    if {m.name for m in models} == {m.name for m in site.models}:
        from reportgen.pages.analyses import compare_sources, derived_numbers

        # a comparison overlays every model: it cites each compared model's family
        every = _keys(entry for m in site.models for entry in m.citations)
        for panel in site.compare_panels:
            _panel_figures(out, panel, "compare", numbers=derived_numbers(
                panel, compare_sources(site.models, panel), "model"), cites=cites,
                family=every)
    elif site.compare_panels:
        out.notes.append("The comparisons across models are left out: they overlay every "
                         "model of the site, and not all of them were chosen.")
    return out


class _Names:
    """File-name-safe, collision-free path parts (model names may hold any character)."""

    def __init__(self):
        self.taken: dict[str, str] = {}

    def part(self, name: str) -> str:
        if name in self.taken:
            return self.taken[name]
        base = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "item"
        safe, n = base, 1
        while safe in self.taken.values():
            n += 1
            safe = f"{base}_{n}"
        self.taken[name] = safe
        return safe


def _read(fig: FigureFile) -> bytes:
    if not fig.source:
        raise StoreError(f"The build's record lists {fig.path} without its stored file",
                         fix="run `reportgen build` again, then export")
    try:
        return Path(fig.source).read_bytes()
    except OSError:
        raise StoreError(f"A stored figure of the site is gone ({fig.path})",
                         fix="run `reportgen build` again (it draws what is missing), then "
                             "export") from None


def _captions(fig: FigureFile) -> dict[str, str]:
    """Each stored file's own caption (a panel of several figures has one per figure)."""
    try:
        listing = json.loads((Path(fig.source).parent / "meta.json").read_text("utf-8"))
        return {f["name"]: f.get("caption", "") for f in listing["figures"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _paper_png(fig: FigureFile, data: bytes) -> bytes:
    """The PNG at PIXEL_RATIO times its layout size (doubled when stored at layout size)."""
    width, height = png_size(data)
    if fig.width and width < PIXEL_RATIO * fig.width:
        factor = max(1, round(PIXEL_RATIO * fig.width / width))
        return upscale_png(data, factor)
    if not fig.width:
        return upscale_png(data, PIXEL_RATIO)
    return data


def _keys(entries) -> tuple[str, ...]:
    """The BibTeX keys of `entries`, each once, in order."""
    return tuple(bibtex.entry_key(e) for e in bibtex.unique(entries))


def _downloads(out: Supplement, files: list[FigureFile], stem: str, title: str,
               family: tuple[str, ...] = ()) -> None:
    pictures = [f for f in files if f.kind in PAPER_KINDS]
    if not pictures:
        return
    first = pictures[0]
    caption = _captions(first).get(PurePosixPath(first.source).name, "")
    figure = SupplementFigure(stem=f"figures/{stem}", title=title, caption=caption,
                              width=first.width, height=first.height, cite=family)
    for f in pictures:
        data = _read(f)
        figure.files[f.kind] = _paper_png(f, data) if f.kind == "png" else data
    out.figures.append(figure)
    for f in files:
        if f.kind == "csv":
            out.data[f"data/{stem}.csv"] = _read(f)
            figure.numbers += (f"data/{stem}.csv",)


def _cite(out: Supplement, entries) -> None:
    for entry in entries:
        out.references.setdefault(bibtex.entry_key(entry), entry)


def _panel_figures(out: Supplement, panel: Panel, folder: str, context: str = "",
                   numbers: tuple[str, str] | None = None, cites: dict | None = None,
                   family: tuple[str, ...] = ()) -> None:
    """One supplement figure per picture of the panel (its caption after `context`, e.g.
    "MNIST_Demo, step 5-40, input test #3."), citing the technique's references and then the
    model's family's (`family`, BibTeX keys; each key once); its numbers as CSV."""
    from reportgen.pages.analyses import groups, humane

    cites = cites or {}
    cite = tuple(dict.fromkeys((*_keys(cites.get(panel.technique, ())), *family)))
    stem = panel.technique + (f"-{panel.variant}" if panel.variant else "")
    grouped = groups(panel)
    pictured = [(label, files) for label, files in grouped
                if any(f.kind in PAPER_KINDS for f in files)]
    made = []
    for label, files in pictured:
        shown = [f for f in files if f.kind in PAPER_KINDS]
        first = shown[0]
        captions = _captions(first)
        caption = captions.get(PurePosixPath(first.source).name, "") or panel.caption
        # "<technique>_trend" -> "trend"; "<variant>-compactness" -> "compactness"
        label = label.removeprefix(panel.technique + "_")
        label = label.removeprefix(f"{panel.variant}-") if panel.variant else label
        name = f"{stem}-{label}" if label else stem
        title = panel.title + (f": {humane(label)}" if label else "")
        figure = SupplementFigure(stem=f"figures/{folder}/{name}", title=title,
                                  caption=" ".join(p for p in (context, caption) if p),
                                  width=first.width, height=first.height, cite=cite)
        for f in shown:
            if f.kind in figure.files:
                continue
            data = _read(f)
            figure.files[f.kind] = _paper_png(f, data) if f.kind == "png" else data
        out.figures.append(figure)
        made.append(figure)
    if not pictured:
        return              # no figure (the live decoder's weights): nothing for a paper
    before = set(out.data)
    _cite(out, cites.get(panel.technique, ()))
    # the numbers: the panel's CSV, else the numbers its JSON download holds (`Panel.numbers`,
    # handed on as data) flattened to (key, value) rows
    exported = [f for f in panel.figures if f.kind in NUMBER_KINDS]
    csvs = [f for f in exported if f.kind == "csv"]
    for f in csvs:
        out.data[f"data/{folder}/{PurePosixPath(f.path).name}"] = _read(f)
    if not csvs and panel.numbers is not None:
        for f in (f for f in exported if f.kind == "json"):
            out.data[f"data/{folder}/{PurePosixPath(f.path).stem}.csv"] = \
                _numbers_csv(panel.numbers)
    if numbers is not None:
        out.data[f"data/{folder}/{stem}.csv"] = numbers[1].encode()
    # the panel's numbers belong to each of its figures
    added = tuple(sorted(set(out.data) - before))
    for figure in made:
        figure.numbers += added


def choose(supplement: Supplement, patterns: list[str]) -> Supplement:
    """The supplement cut to the figures a paper uses: those whose name (its path under
    figures/, e.g. "MNIST_Demo/5-40/test-3/rpv-modified") matches one of the glob `patterns`,
    with their numbers and only the references their captions cite. A pattern matching no
    figure is refused in one line naming some figures it could have meant."""
    from fnmatch import fnmatchcase

    chosen = [f for f in supplement.figures if any(fnmatchcase(f.name, p) for p in patterns)]
    unmatched = [p for p in patterns
                 if not any(fnmatchcase(f.name, p) for f in supplement.figures)]
    if unmatched:
        names = sorted(f.name for f in supplement.figures)
        raise ReportgenError(
            f"--figures {unmatched[0]!r} matches no figure of the supplement",
            expected="glob patterns over the figures' names, e.g. "
                     + ", ".join(repr(n) for n in names[:3]),
            received=f"{len(names)} figures, none matching",
            fix="export without --figures once: its README.txt lists every figure's name")
    keys = {k for f in chosen for k in f.cite}
    return Supplement(figures=chosen,
                      data={path: data for path, data in supplement.data.items()
                            if any(path in f.numbers for f in chosen)},
                      references={k: e for k, e in supplement.references.items() if k in keys},
                      notes=[*supplement.notes, f"Chosen figures: {', '.join(patterns)} "
                             f"({len(chosen)} of {len(supplement.figures)})."])


def _numbers_csv(numbers: dict) -> bytes:
    """A summary as CSV, each score with its 95% interval (analyses.number_rows)."""
    from reportgen.pages.analyses import NUMBER_COLUMNS, number_rows

    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    writer.writerow(NUMBER_COLUMNS)
    for row in number_rows(numbers):
        writer.writerow(row)
    return rows.getvalue().encode()


# --------------------------------------------------------------------------------------------
# README.txt


# The supplement as a document of its own: every figure of captions.tex and the references
# its captions cite, for pdflatex with graphicx (BibTeX's standard plain style).
MAIN_TEX = r"""% The supplement written by `reportgen export`, as one document:
%   pdflatex main && bibtex main && pdflatex main && pdflatex main
% In a paper of your own: \usepackage{graphicx}, \input{captions} where the figures go, and
% references.bib among your \bibliography files.
\documentclass{article}
\usepackage{graphicx}
\begin{document}
\IfFileExists{notes.tex}{\section*{About the models}\input{notes}}{}
\input{captions}
\bibliographystyle{plain}
\bibliography{references}
\end{document}
"""


def readme(supplement: Supplement, site: SiteData, models: list[ModelData], steps: str,
           inputs: str) -> str:
    lines = [f"Paper supplement of {site.title}, written by `reportgen export`.", "",
             f"Models: {', '.join(m.name for m in models)}; steps: {steps}; inputs: {inputs}.",
             f"{len(supplement.figures)} figures, {len(supplement.data)} CSV files.", "",
             "figures/   each figure as PNG (twice its on-screen size) and, for plots, SVG and "
             "PDF",
             "data/      the numbers behind the plots as CSV, in the figures' folders",
             "captions.tex    one figure environment per figure: \\input{captions} after "
             "\\usepackage{graphicx} (pdflatex, no other package)",
             "references.bib  the papers of the methods, models and data sets shown",
             *(["notes/      each model's notes by its author (its folder's README.md), "
                "and notes.tex, the same as LaTeX"] if any(m.notes.strip() for m in models)
               else []),
             "main.tex   the whole supplement as one document, its bibliography included: "
             "pdflatex main && bibtex main && pdflatex main && pdflatex main",
             f"{SUPPLEMENT_MARKER}  marks the zip as written by reportgen export (which "
             "replaces no other file)", ""]
    lines += supplement.notes
    # the names `export --figures` matches, to choose the few a paper uses
    lines += ["", "Figures (names for `reportgen export --figures`):",
              *(f"  {f.name}" for f in supplement.figures)]
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------------------------
# The zip


def entries(supplement: Supplement, site: SiteData, models, steps: str,
            inputs: str) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for fig in supplement.figures:
        for kind, data in fig.files.items():
            files[f"{fig.stem}.{kind}"] = data
    files.update(supplement.data)
    files["captions.tex"] = captions_tex(supplement.figures).encode("utf-8")
    files["references.bib"] = bibtex.bibliography(supplement.references.values()).encode("utf-8")
    notes = {m.name: m.notes for m in models if m.notes.strip()}
    if notes:                              # the authors' own words: as written, and for LaTeX
        names = _Names()
        for name, text in notes.items():
            files[f"notes/{names.part(name)}.md"] = text.encode("utf-8")
        files["notes.tex"] = notes_tex(notes).encode("utf-8")
    files["main.tex"] = MAIN_TEX.encode("utf-8")
    files["README.txt"] = readme(supplement, site, models, steps, inputs).encode("utf-8")
    return files


def _info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
    # stored: PNGs are compressed already, and the marker's bytes must not depend on zlib
    info.compress_type = (zipfile.ZIP_STORED if name.endswith(".png") or name == SUPPLEMENT_MARKER
                          else zipfile.ZIP_DEFLATED)
    info.create_system = 3                   # Unix, whatever the host
    info.external_attr = 0o644 << 16
    return info


def _marker_entry() -> bytes:
    """The first bytes of every zip `write_zip` writes: the marker's local entry."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(_info(SUPPLEMENT_MARKER), SUPPLEMENT_MARKER_DATA)
        end = buffer.tell()
    return buffer.getvalue()[:end]


def written_by_export(path: Path) -> bool:
    """True when `path` is a zip `reportgen export` wrote (it holds the marker)."""
    try:
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo(SUPPLEMENT_MARKER)
            if info.file_size > 4096:
                return False
            return json.loads(archive.read(info)).get("written_by") == "reportgen export"
    except Exception:  # noqa: BLE001 - not a zip, damaged, no marker: not provably ours
        return False


def check_out(path: str | Path, force: bool) -> None:
    """Refuse (one line) an --out that names anything but a supplement reportgen wrote, and
    that one without --force: export never replaces what it did not write."""
    path = Path(path)
    if path.is_symlink():
        raise ReportgenError(f"--out {path} is a symbolic link, which reportgen export never "
                             f"writes through or replaces",
                             fix="choose another --out (a new file name)")
    if not path.exists():
        return
    if not path.is_file() or not written_by_export(path):
        raise ReportgenError(f"--out {path} exists and is not a supplement reportgen wrote "
                             f"(no {SUPPLEMENT_MARKER} inside); export never replaces it",
                             fix="choose another --out (a new file name)")
    if not force:
        raise ReportgenError(f"--out {path} is a supplement reportgen wrote earlier",
                             fix="pass --force to replace it, or choose another --out")


def _temp_name(path: Path, pid: int) -> Path:
    return path.with_name(f".{path.name}.{pid}.tmp")


def remove_leftovers(path: str | Path) -> list[Path]:
    """Delete the temporary files that killed exports to `path` left: named `.NAME.PID.tmp`,
    their process gone, their first bytes the marker's entry (or a part of it: killed before
    the first write reached the disk). Returns them."""
    from reportgen.cache.workdirs import pid_alive

    path = Path(path)
    pattern = re.compile(rf"^\.{re.escape(path.name)}\.(\d+)\.tmp$")
    entry = _marker_entry()
    removed = []
    try:
        children = list(path.parent.iterdir())
    except OSError:
        return removed
    for child in children:
        found = pattern.match(child.name)
        if not found or (int(found.group(1)) != os.getpid() and pid_alive(int(found.group(1)))):
            continue
        try:
            if child.is_symlink() or not child.is_file():
                continue
            with open(child, "rb") as f:
                head = f.read(len(entry))
            if head != entry[:len(head)]:
                continue                    # not a zip reportgen began: not ours to delete
            child.unlink()
            removed.append(child)
        except OSError:
            continue
    return removed


def _publish(tmp: Path, path: Path, force: bool) -> None:
    """Put the written `tmp` at `path`: linked when nothing is there (never replacing a file
    that appeared meanwhile), else renamed over it after checking it again."""
    if not path.exists() and not path.is_symlink():
        try:
            os.link(tmp, path)
            tmp.unlink()
            return
        except FileExistsError:
            pass                            # appeared meanwhile: checked below
        except OSError:
            pass                            # no hard links here: check, then rename
    check_out(path, force)
    os.replace(tmp, path)


def write_zip(path: str | Path, files: dict[str, bytes], force: bool = False) -> Path:
    """Write `files` as a zip at `path` (the marker first, then sorted names; fixed times and
    permissions), atomically; never over a file it did not write (see `check_out`)."""
    path = Path(path)
    remove_leftovers(path)
    check_out(path, force)
    tmp = _temp_name(path, os.getpid())
    try:
        with open(tmp, "xb") as out, zipfile.ZipFile(out, "w") as archive:
            archive.writestr(_info(SUPPLEMENT_MARKER), SUPPLEMENT_MARKER_DATA)
            out.flush()                     # recognisable from its first bytes from now on
            for name in sorted(files):
                if name != SUPPLEMENT_MARKER:
                    archive.writestr(_info(name), files[name], compresslevel=6)
            archive.close()
            out.flush()
            os.fsync(out.fileno())
        _publish(tmp, path, force)
    except OSError as exc:      # at most the files' own size: PNGs and PDFs barely compress
        raise user_error(exc, sum(map(len, files.values())), "free space on that disk, or "
                         "choose an --out on another disk", path) or ReportgenError(
            f"Cannot write {path}: {exc.strerror or exc}", fix="choose a writable --out path"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)         # written and published, failed, or interrupted
    return path


def export(site_dir: str | Path, store, out: str | Path, models: str = "*",
           steps: str = "last", inputs: str = "all", force: bool = False,
           figures: list[str] | None = None) -> tuple[Path, Supplement]:
    """Write the supplement of the site in `site_dir` (built with `store`) to `out`; an
    existing `out` only when it is a supplement reportgen wrote and `force` is given.
    `figures`: glob patterns of the figures a paper uses (`choose`); None: every figure."""
    check_out(out, force)                   # before any work
    site = load_site_record(site_dir, store)
    chosen = select_models(site, models, site_dir)
    supplement = collect(site, chosen, steps, inputs)
    if figures:
        supplement = choose(supplement, figures)
    return write_zip(out, entries(supplement, site, chosen, steps, inputs), force), supplement
