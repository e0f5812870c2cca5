"""From stored arrays to site data: draw figures (or reuse drawn ones) and place them in docs/.

Figures are cached separately from arrays, so a drawing change redraws without recomputing.
Files are hard-linked from the store into the MkDocs docs folder (copied where links fail).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import threading
from pathlib import Path

import numpy as np

from reportgen.cache.keys import hash_json
from reportgen.pages.analyses import flatten
from reportgen.pages.sitedata import FigureFile, Panel, Prediction
from reportgen.techniques.base import Figure, RenderContext
from reportgen.techniques.compute import params_dict, variant_label

FIGURES_VERSION = 2      # bump when drawing changes: figures are redrawn, arrays are kept


class Assembler:
    """Places the figures of one build into `docs`, counting what had to be drawn."""

    def __init__(self, store, docs: Path):
        self.store = store
        self.docs = docs
        self.drawn = 0
        self._lock = threading.Lock()

    def panel(self, tech, params, array_key: str, ctx: RenderContext, out_dir: Path) -> Panel:
        """The panel of one stored result: drawn once, then reused."""
        fig_key = hash_json({"arrays": array_key, "figures": FIGURES_VERSION,
                             "model": ctx.model, "step": ctx.step, "input": ctx.input_label,
                             "classes": ctx.class_names, "params": params_dict(params)})
        figures = self.store.get_figures(fig_key)
        if figures is None:
            arrays = self.store.get_arrays(array_key)
            drawn = list(tech.render(arrays, params, ctx))
            if tech.summarize is not None:
                drawn += export_figures(tech.name, tech.summarize(arrays, params))
            figures = self.store.put_figures(fig_key, drawn)
            with self._lock:
                self.drawn += 1
        return self._place(tech, params, figures, out_dir)

    def derived_panel(self, tech, params, series: list, draw, title_suffix: str,
                      out_dir: Path) -> Panel | None:
        """A panel drawn from the summaries of several steps or models (trends, comparisons),
        cached by those summaries: `draw(series)` runs only when they changed."""
        key = hash_json({"derived": tech.name, "version": tech.version, "suffix": title_suffix,
                         "figures": FIGURES_VERSION, "params": params_dict(params),
                         "series": series})
        figures = self.store.get_figures(key)
        if figures is None:
            drawn = list(draw(series))
            if not drawn:
                return None
            figures = self.store.put_figures(key, drawn)
            with self._lock:
                self.drawn += 1
        if not figures:
            return None
        panel = self._place(tech, params, figures, out_dir)
        panel.title = f"{panel.title} {title_suffix}".strip()
        return panel

    def _place(self, tech, params, figures: list[dict], out_dir: Path):
        label = variant_label(params)
        stem = tech.name + (f"-{label}" if label else "")
        out_dir.mkdir(parents=True, exist_ok=True)
        files = []
        for fig in figures:
            name = Path(fig["name"])
            target = out_dir / (f"{stem}{name.suffix}" if name.stem == tech.name
                                else f"{stem}-{fig['name']}")
            link_or_copy(Path(fig["path"]), target)
            files.append(FigureFile(kind=fig["kind"], path=target.relative_to(self.docs).as_posix(),
                                    width=fig["width"], height=fig["height"]))
        files.sort(key=lambda f: f.kind != "png")   # the first file is the one shown
        caption = next((f["caption"] for f in figures if f["caption"]), "")
        return Panel(technique=tech.name, variant=label,
                     title=tech.title + (f" ({label})" if label else ""), layer=tech.layer,
                     caption=caption, figures=files, experimental=tech.experimental)


def export_figures(name: str, summary: dict) -> list[Figure]:
    """The headline numbers of a dataset analysis as JSON and as a flat CSV (key, value)."""
    data = json.dumps(summary, indent=1, sort_keys=True, default=_json_default).encode()
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    writer.writerow(["key", "value"])
    for key, value in flatten(json.loads(data)):
        writer.writerow([key, value])
    return [Figure(name=f"{name}.json", data=data, kind="json"),
            Figure(name=f"{name}.csv", data=rows.getvalue().encode(), kind="csv")]


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


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
    if pixels.shape[-1] == 1:
        Image.fromarray(pixels[..., 0], "L").save(path)
    else:
        Image.fromarray(pixels, "RGB").save(path)


def prediction(lengths: np.ndarray, true_class: int | None, class_names) -> Prediction:
    predicted = int(np.argmax(lengths))
    return Prediction(predicted=class_names[predicted], confidence=float(lengths[predicted]),
                      correct=None if true_class is None else predicted == true_class)


def evaluation_tables(lengths: np.ndarray, labels: np.ndarray, classes: int):
    """(accuracy, per-class accuracy, confusion matrix rows=true, cols=predicted)."""
    predicted = lengths.argmax(axis=1)
    matrix = np.zeros((classes, classes), dtype=int)
    np.add.at(matrix, (labels.astype(int), predicted), 1)
    totals = matrix.sum(axis=1)
    per_class = [float(matrix[c, c] / totals[c]) if totals[c] else 0.0 for c in range(classes)]
    return float(np.trace(matrix) / max(1, matrix.sum())), per_class, matrix.tolist()


def architecture_rows(net):
    """(layer, kind, output shape, params) of every layer, the decoder's expanded."""
    from reportgen.pages.sitedata import ArchitectureRow

    rows = []
    for layer in net.model.layers:
        for sub in (getattr(layer, "layers", None) or [layer]):
            if sub.__class__.__name__ == "InputLayer":
                continue
            outs = sub.output if isinstance(sub.output, (list, tuple)) else [sub.output]
            rows.append(ArchitectureRow(
                layer=sub.name, kind=sub.__class__.__name__,
                output_shape=" + ".join(str(tuple(o.shape)) for o in outs),
                params=int(sub.count_params())))
    return rows
