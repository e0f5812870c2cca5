"""From stored arrays to site data: draw figures (or reuse drawn ones) and place them in docs/.

Figures are cached separately from arrays, so a drawing change redraws without recomputing.
Every panel carries the numbers its technique hands on (`Panel.numbers`, and bulky `Panel.data`:
computed with the figures and kept in their store entry, never parsed back from a figure or
download) and the store path of each file (`FigureFile.source`): nothing is read back
from the docs folder. Files are hard-linked from the store into the MkDocs docs folder (copied where
links fail), and from there into the site (reportgen.pages.linked_figures), only when the pages
are rendered (`place_files`): a build whose site is up to date links nothing.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np

from reportgen.cache.keys import hash_json
from reportgen.engine.code_identity import drawing_code
from reportgen.techniques import origin as technique_origin
from reportgen.errors import ReportgenError
from reportgen.figures.encode import json_floats
from reportgen.pages.analyses import NUMBER_COLUMNS, number_rows
from reportgen.pages.captions import with_interval_words
from reportgen.pages.sitedata import FigureFile, Panel, Prediction
from reportgen.techniques.base import Figure, RenderContext
from reportgen.techniques.compute import params_dict, variant_label

# bump when reportgen's shared drawing code changes: figures are redrawn, arrays are kept (a
# technique's own drawing modules are keyed by their source: code_identity.drawing_code)
FIGURES_VERSION = 29
# What a panel hands on (`Technique.numbers` and `.data`): a file of the figures' entry (not
# placed in docs); for figures an older reportgen stored without it, an entry of its own.
HANDED_ON_VERSION = 2
HANDED_ON_FILE = "handed_on.json"
_ATTEMPTS = 2            # a figure entry removed between listing and reading: draw it again
_SERIES_MARK = "~"      # "3~rpv.png": panel 3's file in a series entry (panel_series)


class MissingResult(ReportgenError):
    """A stored result a panel is drawn from is gone (removed, or found damaged and discarded)
    after the engine saw it; computing the step again brings it back."""

    def __init__(self, what: str, key: str):
        super().__init__(f"The stored result of {what} is missing or damaged "
                         f"(artifact {key[:12]})",
                         fix="build again; if it persists, run `reportgen cache clear`")
        self.key = key


class Assembler:
    """Places the figures of one build into `docs`, counting what had to be drawn.

    `entries` records which figure entries of the store the site shows (each entry's key and
    listing: its content, wherever the store is), so a build can tell whether its site is up
    to date without linking anything.
    """

    def __init__(self, store, docs: Path):
        self.store = store
        self.docs = docs
        self.drawn = 0
        self.entries: dict[str, str] = {}               # entry key -> digest of its listing
        self._links: dict[Path, Path] = {}              # docs target -> store file
        self._inputs: dict[Path, np.ndarray] = {}       # docs target -> input image
        self._lock = threading.Lock()
        self.step_keys: dict[tuple[str, str], object] = {}   # (model, step) -> its array keys
        self.drawing = None         # the build's reportgen.pages.drawing_pool.DrawingPool

    # -- reading the store ---------------------------------------------------------------------
    def arrays(self, key: str, what: str) -> dict[str, np.ndarray]:
        """The stored arrays of `key`; MissingResult (never None) when they are gone."""
        arrays = self.store.get_arrays(key)
        if arrays is None:
            raise MissingResult(what, key)
        return arrays

    @staticmethod
    def figure_key(tech, params, array_key: str, ctx: RenderContext) -> str:
        """The store key of the figures `tech` draws from one stored result in one context
        (with the digest of its drawing code, reportgen.engine.code_identity)."""
        return hash_json({"arrays": array_key, "figures": FIGURES_VERSION,
                          "drawing": drawing_code(tech, technique_origin(tech)),
                          "model": ctx.model, "step": ctx.step, "input": ctx.input_label,
                          "classes": ctx.class_names, "params": params_dict(params),
                          **({"range": list(ctx.value_range)} if ctx.value_range else {}),
                          **({"thumbnail": True} if ctx.thumbnail else {})})

    def draw_ahead(self, tech, params, array_key: str, arrays: dict,
                   ctx: RenderContext) -> None:
        """Start drawing the panel of arrays just computed in the build's drawing pool (if it
        has one and the figures are not stored yet); `panel` takes what it drew."""
        if self.drawing is None or not self.drawing.processes:
            return
        fig_key = self.figure_key(tech, params, array_key, ctx)
        if self.store.get_figures(fig_key) is None:
            self.drawing.submit(fig_key, tech.name, arrays, params, ctx)

    def panel(self, tech, params, array_key: str, ctx: RenderContext, out_dir: Path, *,
              draw: bool = True) -> Panel | None:
        """The panel of one stored result: drawn once, then reused (`draw=False`: None when
        it has not been drawn yet)."""
        fig_key = self.figure_key(tech, params, array_key, ctx)
        what = f"{tech.name} ({ctx.model}, step {ctx.step}" + (
            f", {ctx.input_label})" if ctx.input_label else ")")
        for attempt in range(_ATTEMPTS):
            figures, handed_on = self.store.get_figures(fig_key), None
            if figures is None:
                if not draw:
                    return None
                arrays = self.arrays(array_key, what)
                drawn = self.drawing.take(fig_key) if self.drawing is not None else None
                if drawn is None:
                    drawn = list(tech.render(arrays, params, ctx))
                summary = tech.summarize(arrays, params) if tech.summarize is not None else None
                if summary is not None:
                    drawn += export_figures(tech.name, summary)
                handed_on, record = _handed_on_record(tech, params, ctx, arrays, summary)
                if record is not None:      # in the figures' own entry: no second entry
                    drawn.append(Figure(name=HANDED_ON_FILE, data=record, kind="json"))
                figures = self.store.put_figures(fig_key, drawn, about=what)
                with self._lock:
                    self.drawn += 1
            try:
                if handed_on is None:
                    handed_on = self._handed_on(tech, params, ctx, fig_key, what, figures,
                                                lambda: self.arrays(array_key, what))
                self._remember(figures)
            except OSError:
                if attempt + 1 == _ATTEMPTS:
                    raise MissingResult(f"the figures of {what}", fig_key) from None
                continue
            panel = self._place(tech, params,
                                [f for f in figures if f["name"] != HANDED_ON_FILE], out_dir)
            panel.numbers, panel.data = handed_on
            panel.caption = with_interval_words(panel.caption, panel.numbers)
            return panel
        raise AssertionError("unreachable")

    def derived_panel(self, tech, params, series: list, draw, title_suffix: str,
                      out_dir: Path) -> Panel | None:
        """A panel drawn from the summaries of several steps or models (trends, comparisons),
        cached by those summaries: `draw(series)` runs only when they changed."""
        key = hash_json({"derived": tech.name, "version": tech.version, "suffix": title_suffix,
                         "figures": FIGURES_VERSION, "drawing": drawing_code(tech, technique_origin(tech)),
                         "params": params_dict(params),
                         "series": series})
        for attempt in range(_ATTEMPTS):
            figures = self.store.get_figures(key)
            if figures is None:
                drawn = list(draw(series))
                if not drawn:
                    return None
                figures = self.store.put_figures(key, drawn,
                                                 about=f"{tech.name} {title_suffix}".strip())
                with self._lock:
                    self.drawn += 1
            if not figures:
                return None
            try:
                self._remember(figures)
            except OSError:
                if attempt + 1 == _ATTEMPTS:
                    raise MissingResult(f"the {tech.name} figures {title_suffix}", key) from None
                continue
            panel = self._place(tech, params, figures, out_dir)
            panel.title = f"{panel.title} {title_suffix}".strip()
            return panel
        raise AssertionError("unreachable")

    def panel_series(self, tech, params, key: str, draw, out_dirs: list[Path], about: str,
                     prefix: str = "") -> tuple[list[Panel | None], dict[str, str]]:
        """Panels of one technique drawn together and kept as one store entry, `key` (the
        filmstrip's frames of one input, a step each, on one colour scale: one entry instead
        of one per frame). `draw()` gives a list of figures per panel (one per out_dir) and
        figures of the whole series; it runs only when the entry is not stored. Returns the
        panels (None where `draw` gave no figures; their files named with `prefix`) and
        {name: store path} of the series' own files."""
        for attempt in range(_ATTEMPTS):
            figures = self.store.get_figures(key)
            if figures is None:
                per_panel, own = draw()
                drawn = list(own) + [replace(fig, name=f"{i}{_SERIES_MARK}{fig.name}")
                                     for i, figs in enumerate(per_panel) for fig in figs]
                figures = self.store.put_figures(key, drawn, about=about)
                with self._lock:
                    self.drawn += len(per_panel)
            try:
                self._remember(figures)
            except OSError:
                if attempt + 1 == _ATTEMPTS:
                    raise MissingResult(about, key) from None
                continue
            panels = []
            for i, out_dir in enumerate(out_dirs):
                mark = f"{i}{_SERIES_MARK}"
                mine = [{**fig, "name": fig["name"][len(mark):]} for fig in figures
                        if fig["name"].startswith(mark)]
                panels.append(self._place(tech, params, mine, out_dir, prefix) if mine else None)
            own = {fig["name"]: fig["path"] for fig in figures
                   if _SERIES_MARK not in fig["name"]}
            return panels, own
        raise AssertionError("unreachable")

    # -- what a panel hands on to other pages: numbers and data, not read from its figures ----
    def _hand_on(self, tech, params, ctx, fig_key: str, what: str,
                 arrays) -> tuple[dict | None, dict | None]:
        """(numbers, data) of a result from its arrays, for figures stored without them (by
        an older reportgen): kept in an entry of their own beside the figures' entry, so that
        a later build reads them without the arrays."""
        handed_on, record = _handed_on_record(tech, params, ctx, arrays)
        if record is not None:
            self.store.put_figures(_handed_on_key(fig_key), [Figure(
                name=HANDED_ON_FILE, data=record, kind="json")], about=f"the numbers of {what}")
        return handed_on

    def _handed_on(self, tech, params, ctx, fig_key: str, what: str, figures: list[dict],
                   load) -> tuple[dict | None, dict | None]:
        """(numbers, data) of a result whose figures were drawn before: from their entry
        (`figures`, its listing), else from an entry of their own (figures drawn by an older
        reportgen), else (removed meanwhile) from its arrays (`load()`)."""
        if tech.numbers is None and tech.summarize is None and tech.data is None:
            return None, None
        listing = [f for f in figures if f["name"] == HANDED_ON_FILE] or self.store.get_figures(
            _handed_on_key(fig_key))
        if listing:
            try:
                record = json.loads(Path(listing[0]["path"]).read_bytes())
                return record["numbers"], record["data"]
            except (OSError, ValueError, KeyError, TypeError):
                pass                  # removed meanwhile: made again from the arrays
        return self._hand_on(tech, params, ctx, fig_key, what, load())

    def _remember(self, figures: list[dict]) -> None:
        """Note the figures' store entry by its key (a hash of what it is drawn from) and its
        listing; OSError when the entry is gone meanwhile (its files are linked later)."""
        if not figures:
            return
        folder = Path(figures[0]["path"]).parent
        os.stat(folder / "meta.json")
        listing = hash_json([{k: v for k, v in fig.items() if k != "path"} for fig in figures])
        with self._lock:
            self.entries[folder.name] = listing

    # -- placing files -------------------------------------------------------------------------
    def _place(self, tech, params, figures: list[dict], out_dir: Path, prefix: str = ""):
        label = variant_label(params)
        stem = prefix + tech.name + (f"-{label}" if label else "")
        files = []
        links = {}
        for fig in figures:
            name = Path(fig["name"])
            target = out_dir / (f"{stem}{name.suffix}" if name.stem == tech.name
                                else f"{stem}-{fig['name']}")
            source = os.path.abspath(fig["path"])
            links[target] = Path(source)
            files.append(FigureFile(kind=fig["kind"], path=target.relative_to(self.docs).as_posix(),
                                    width=fig["width"], height=fig["height"], source=source))
        with self._lock:
            self._links.update(links)
        files.sort(key=lambda f: f.kind != "png")   # the first file is the one shown
        caption = next((f["caption"] for f in figures if f["caption"]), "")
        return Panel(technique=tech.name, variant=label,
                     title=tech.title_of(params) + (f" ({label})" if label else ""),
                     layer=tech.layer_for(params),
                     caption=caption, figures=files, experimental=tech.experimental)

    def add_input(self, image: np.ndarray, path: Path) -> str:
        """An input image, written as PNG into docs by `place_files`; its docs-relative path."""
        with self._lock:
            self._inputs[path] = image
        return path.relative_to(self.docs).as_posix()

    def input_images(self) -> list[tuple[str, np.ndarray]]:
        """(docs-relative path, image) of every input placed, sorted by path."""
        return sorted(((p.relative_to(self.docs).as_posix(), image)
                       for p, image in self._inputs.items()), key=lambda item: item[0])

    def place_files(self) -> None:
        """Link every figure file into docs and write the input PNGs."""
        folders = {target.parent for target in self._links} | {p.parent for p in self._inputs}
        for folder in sorted(folders):
            folder.mkdir(parents=True, exist_ok=True)
        for target, source in self._links.items():
            link_or_copy(source, target)
        for path, image in self._inputs.items():
            write_input_png(image, path)


def _handed_on_record(tech, params, ctx, arrays, summary=None
                      ) -> tuple[tuple[dict | None, dict | None], bytes | None]:
    """((numbers, data), their JSON record, None when the technique hands on nothing) of a
    result from its arrays (`summary`: tech.summarize's, when already made)."""
    if tech.numbers is not None:
        numbers = plain(tech.numbers(arrays, params, ctx))
    elif tech.summarize is not None:
        numbers = plain(summary if summary is not None else tech.summarize(arrays, params))
    else:
        numbers = None
    data = plain(tech.data(arrays, params, ctx)) if tech.data is not None else None
    if numbers is None and data is None:
        return (None, None), None
    record = json.dumps({"numbers": numbers, "data": data}, separators=(",", ":"))
    return (numbers, data), record.encode("utf-8")


def _handed_on_key(fig_key: str) -> str:
    return hash_json({"handed_on": fig_key, "version": HANDED_ON_VERSION})


def plain(value):
    """`value` as JSON-ready data, equal to what `json.loads(json.dumps(value, sort_keys=True))`
    gives (NumPy numbers and arrays as Python ones, tuples as lists, keys sorted and as text),
    without writing and parsing the text."""
    if isinstance(value, dict):
        return {_json_key(k): plain(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (np.ndarray, np.generic)):   # float32 with its own digits (json_floats)
        return plain(json_floats(value)) if isinstance(value, np.ndarray) or \
            value.dtype.kind == "f" else plain(value.item())
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float32_digits(float(value))
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def float32_digits(value: float) -> float:
    """A Python float that is exactly a float32 (a summary's `float(array.mean())` of the
    network's float32 numbers) with the shortest digits reading back to that float32 (0.8, not
    0.800000011920929), as `json_floats` prints arrays; any other float as it is."""
    single = np.float32(value)
    if not math.isfinite(value) or float(single) != value:
        return value
    return float(str(single))


def _json_key(key) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        return json.dumps(key)           # what json writes for such a key: null, true, 1, 0.5
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def export_figures(name: str, summary: dict) -> list[Figure]:
    """The headline numbers of a dataset analysis as JSON and as a flat CSV (key, value and
    the score's 95% interval: low, high, n, method; analyses.number_rows)."""
    data = json.dumps(plain(summary), indent=1).encode()     # plain sorts the keys
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    writer.writerow(NUMBER_COLUMNS)
    for row in number_rows(plain(summary)):
        writer.writerow(row)
    return [Figure(name=f"{name}.json", data=data, kind="json"),
            Figure(name=f"{name}.csv", data=rows.getvalue().encode(), kind="csv")]


def link_or_copy(source: Path, target: Path) -> None:
    if target.exists():
        target.unlink()
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def write_input_png(image: np.ndarray, path: Path) -> None:
    """The input as the model saw it (after conversion and transforms)."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.clip(np.round(np.asarray(image) * 255), 0, 255).astype(np.uint8)
    # a new file replaces the old one (never rewritten in place: the site may link it)
    tmp = path.with_name(path.name + ".tmp")
    if pixels.shape[-1] == 1:
        Image.fromarray(pixels[..., 0], "L").save(tmp, format="PNG")
    else:
        Image.fromarray(pixels, "RGB").save(tmp, format="PNG")
    tmp.replace(path)


def prediction(lengths: np.ndarray, true_class: int | None, class_names,
               true_classes: tuple[int, ...] = ()) -> Prediction:
    """The predicted class; for an image of two digits (`true_classes`), the top-2 pair,
    correct when it is the true pair, its confidence the shorter of the two."""
    if len(true_classes) == 2:
        top2 = [int(k) for k in np.argsort(-np.asarray(lengths), kind="stable")[:2]]
        return Prediction(predicted=" and ".join(class_names[k] for k in top2),
                          confidence=float(lengths[top2[1]]),
                          correct=sorted(top2) == sorted(true_classes))
    predicted = int(np.argmax(lengths))
    return Prediction(predicted=class_names[predicted], confidence=float(lengths[predicted]),
                      correct=None if true_class is None else predicted == true_class)


def predicted_pairs(lengths: np.ndarray, labels: np.ndarray) -> dict | None:
    """For images of two digits (labels (N, 2)): the evaluation's size and the unordered pair
    its top-2 names most often, {"images": N, "pair": [i, j] (i < j), "predicted": images
    given that pair, "labelled": images whose true pair it is}; the untrained-step banner reads
    it (reportgen.results.findings.untrained_pair_verdict). None for one class per image."""
    labels = np.asarray(labels)
    if labels.ndim != 2 or not len(labels):
        return None
    top2 = np.sort(np.argsort(-np.asarray(lengths), axis=1, kind="stable")[:, :2], axis=1)
    pairs, counts = np.unique(top2, axis=0, return_counts=True)
    most = int(np.argmax(counts))          # ties: the lowest pair, as np.unique sorts them
    pair = pairs[most]
    labelled = int((np.sort(labels, axis=1) == pair).all(axis=1).sum())
    return {"images": int(len(labels)), "pair": [int(pair[0]), int(pair[1])],
            "predicted": int(counts[most]), "labelled": labelled}


def evaluation_tables(lengths: np.ndarray, labels: np.ndarray, classes: int):
    """(accuracy, per-class accuracy, confusion matrix rows=true, cols=predicted).

    Images of two digits (labels (N, 2)): top-2 accuracy, per class the share of its images
    whose top-2 holds it, and no confusion matrix (a pair of predictions has no one cell)."""
    labels = np.asarray(labels)
    if labels.ndim == 2:
        top2 = np.argsort(-np.asarray(lengths), axis=1, kind="stable")[:, :2]
        found = (top2[:, :, None] == labels[:, None, :]).any(axis=1)      # (N, 2)
        per_class = []
        for c in range(classes):
            holds = labels == c
            per_class.append(float(found[holds].mean()) if holds.any() else 0.0)
        return float(found.all(axis=1).mean()) if len(labels) else 0.0, per_class, None
    predicted = lengths.argmax(axis=1)
    matrix = np.zeros((classes, classes), dtype=int)
    np.add.at(matrix, (labels.astype(int), predicted), 1)
    totals = matrix.sum(axis=1)
    per_class = [float(matrix[c, c] / totals[c]) if totals[c] else 0.0 for c in range(classes)]
    return float(np.trace(matrix) / max(1, matrix.sum())), per_class, matrix.tolist()


def architecture_rows(net):
    """(layer, kind, output shape, trainable params, other params) of every layer, the
    decoder's expanded: the rows' trainable parameters add up to the model's."""
    from reportgen.pages.sitedata import ArchitectureRow

    def size(weights) -> int:
        return int(sum(math.prod(w.shape) for w in weights))

    rows = []
    for layer in net.model.layers:
        for sub in (getattr(layer, "layers", None) or [layer]):
            if sub.__class__.__name__ == "InputLayer":
                continue
            outs = sub.output if isinstance(sub.output, (list, tuple)) else [sub.output]
            rows.append(ArchitectureRow(
                layer=sub.name, kind=sub.__class__.__name__,
                output_shape=" + ".join(str(tuple(o.shape)) for o in outs),
                params=size(sub.trainable_weights),
                non_trainable=size(sub.non_trainable_weights)))
    return rows
