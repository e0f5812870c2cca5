"""What `reportgen build` adds for papers: the overview page's downloads and the site's record.

- `attach`: each model's training curves and the confusion matrix of each step with dataset
  analyses and of the last as paper figures (PNG, SVG, PDF, CSV;
  reportgen.figures.training_curves and model_plots), drawn once into the artifact store (keyed
  by the numbers they show), placed beside the model's other figures and listed in
  `ModelData.downloads` / `StepData.downloads` for the overview page's links.
- `remember_site`: the site data of a build (every panel, caption and store file), kept in the
  artifact store under the site's digest, which the site's marker names. `reportgen export`
  reads the supplement from it (reportgen.commands.supplement), so it shows exactly what the
  site shows without recomputing or redrawing anything.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from reportgen.cache.keys import hash_json
from reportgen.figures.figure import Figure
from reportgen.pages.sitedata import FigureFile

MODEL_FIGURES_VERSION = 5     # bump when model_plots draws differently
SITE_RECORD_VERSION = 1


def attach(assembler, models) -> None:
    """Draw (or reuse) the training curves and confusion matrices of `models` (ModelData) and
    list their files in the models' and steps' `downloads`."""
    from reportgen.figures.model_plots import render_confusion_matrix
    from reportgen.figures.training_curves import render_training_curves
    from reportgen.pages.charts import chance_line
    from reportgen.results.findings import accuracy_name

    for model in models:
        folder = assembler.docs / "artifacts" / model.name
        accuracy = accuracy_name(model.labels_per_image)     # "top-2 accuracy" for two digits
        chance = chance_line(model)
        model.downloads = _placed(
            assembler, {"training_curves": model.history, "model": model.name,
                        "accuracy": accuracy, "chance": list(chance)},
            lambda m=model, a=accuracy, c=chance: render_training_curves(m.history, m.name, a,
                                                                         c),
            folder / "overview")
        # each step's matrix is a table on the page; its paper figure is drawn at the steps
        # with dataset analyses and the last (the supplement's default), which keeps the site
        # light
        last = model.steps[-1] if model.steps else None
        for step in model.steps:
            if not step.confusion_matrix or not (step.dataset_panels or step is last):
                continue
            step.downloads = _placed(
                assembler, {"confusion_matrix": step.confusion_matrix, "model": model.name,
                            "step": step.step, "classes": list(model.class_names)},
                lambda m=model, s=step: render_confusion_matrix(
                    s.confusion_matrix, m.class_names, m.name, s.step),
                folder / step.step / "overview")


def _placed(assembler, numbers: dict, draw, out_dir: Path) -> list[FigureFile]:
    key = hash_json({"paper_figures": numbers, "version": MODEL_FIGURES_VERSION})
    figures = assembler.store.get_figures(key)
    if figures is None:
        drawn = list(draw())
        if not drawn:
            return []
        figures = assembler.store.put_figures(key, drawn)
        with assembler._lock:
            assembler.drawn += 1
    files = []
    for fig in figures:
        target = out_dir / fig["name"]
        source = os.path.abspath(fig["path"])
        with assembler._lock:           # linked into docs with the technique figures
            assembler._links[target] = Path(source)
        files.append(FigureFile(kind=fig["kind"],
                                path=target.relative_to(assembler.docs).as_posix(),
                                width=fig["width"], height=fig["height"], source=source))
    assembler._remember(figures)
    return files


# --------------------------------------------------------------------------------------------
# The record `reportgen export` reads


def site_record_key(digest: str, store) -> str:
    """The store key of the site data of the site whose marker holds `digest`. The digest names
    content only, while the record names the store's files by path: the store's place is part
    of the key, so a store moved elsewhere gets a new record rather than one of stale paths."""
    return hash_json({"site_record": digest, "version": SITE_RECORD_VERSION,
                      "store": str(Path(store.root).resolve())})


def remember_site(store, digest: str, site) -> None:
    """Keep `site` (SiteData) in the store under the site's digest (once per digest)."""
    from reportgen.commands.site_changes import _plain

    key = site_record_key(digest, store)
    if store.get_figures(key) is not None:
        return
    data = json.dumps(site, sort_keys=True, default=_plain, ensure_ascii=False)
    store.put_figures(key, [Figure(name="site.json", data=data.encode("utf-8"), kind="json")])
