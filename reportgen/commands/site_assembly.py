"""Site data from the artifact store, for `reportgen build`: one step's panels, predictions and
evaluation; the input gallery; trends over training and comparisons across models (drawn from
the panels' numbers); the techniques that do not apply to a model; and a model's architecture
table and parameter count (stored by the model's digest, so a rebuild needs no Keras model).

Everything here reads stored results; nothing reads back from the site's folders.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from reportgen.cache.keys import hash_bytes, hash_json, library_versions
from reportgen.data.label_arity import label_arity
from reportgen.engine.model import not_applicable_reason
from reportgen.pages.sitedata import ArchitectureRow, InputInfo, Panel, StepData
from reportgen.techniques.base import Figure, RenderContext

DRAWING_THREADS = min(4, os.cpu_count() or 1)
ARCHITECTURE_VERSION = 2   # 2: trainable and other parameters apart


# --------------------------------------------------------------------------------------------
# The evaluation set and the inputs


@dataclass(frozen=True)
class EvaluationSet:
    """A stratified, seeded sample of test images, and its digest for cache keys."""

    x: np.ndarray
    y: np.ndarray
    class_names: tuple[str, ...]
    digest: str

    def as_tuple(self) -> tuple:
        return self.x, self.y, self.class_names


def evaluation_set(dataset, n: int) -> EvaluationSet:
    """`n` held-out images, the same number per class (the whole test split if smaller)."""
    from reportgen.data.held_out import evaluation_indices

    chosen = evaluation_indices(dataset.y_test, n)
    x, y = dataset.x_test[chosen], dataset.y_test[chosen]
    digest = hash_json({"x": hash_bytes(np.ascontiguousarray(x).tobytes()), "y": y.tolist()})
    return EvaluationSet(x, y, tuple(dataset.class_names), digest)


def input_gallery(assembler, model: str, dataset, inputs) -> list[InputInfo]:
    """Each input as the model saw it (after conversion and transforms), with its label."""
    from reportgen.figures.encode import pixel_digest

    folder = assembler.docs / "artifacts" / model / "inputs"
    return [InputInfo(key=item.key, label=item.label,
                      image=assembler.add_input(item.image, folder / f"{item.key}.png"),
                      true_class=" and ".join(dataset.class_names[k]
                                              for k in item.known_classes) or None,
                      digest=pixel_digest(item.image))
            for item in inputs]


def warn_polarity(inputs, dataset) -> list[str]:
    """A user's dark-on-light image fed to a light-on-dark model (MNIST) mostly shows nothing:
    the notices to print."""
    train_mean = float(np.mean(dataset.x_test[:200])) if len(dataset.x_test) else 0.5
    return [f"{item.label}: mostly light, while {dataset.name} images are light on dark; add "
            f"--transforms invert to see it as the model expects."
            for item in inputs
            if item.key.startswith("file-") and item.transform.is_identity and train_mean < 0.3
            and float(np.mean(item.image)) > 0.5]


# --------------------------------------------------------------------------------------------
# One step


def context(model: str, step: str, description, dataset, item=None) -> RenderContext:
    """What the renderers may know besides the arrays (labels, the input, the grids)."""
    return RenderContext(
        model=model, step=step, class_names=tuple(dataset.class_names),
        input_label="" if item is None else item.label,
        image=None if item is None else np.asarray(item.image),
        receptive_fields=tuple(c.receptive_field.rows for c in description.conv_layers),
        conv_layer_names=tuple(description.conv_layer_names),
        # capsule layers' receptive fields and kinds (e.g. ConvCaps grids, logistic activations)
        description=description,
        true_classes=() if item is None else tuple(item.known_classes),
        labels_per_image=label_arity(dataset.y_test))


def step_data(assembler, model: str, step, description, variants, inputs, dataset,
              keys, seconds: dict | None = None) -> StepData:
    """Panels (figures drawn from stored arrays), predictions and evaluation of one step.
    Raises reportgen.pages.assemble.MissingResult when a stored result is gone. `seconds`, when
    given, receives the time spent on the dataset panels ("dataset") and on the inputs' panels
    ("inputs"), for the build's time estimate."""
    from reportgen.pages.assemble import evaluation_tables, predicted_pairs, prediction

    seconds = {} if seconds is None else seconds
    data = StepData(step=str(step))
    assembler.step_keys[(model, str(step))] = keys      # for the filmstrip's shared scale
    out_dir = assembler.docs / "artifacts" / model / str(step)
    ctx = context(model, str(step), description, dataset)
    for t, p in variants:
        if t.scope == "checkpoint" and (t.name, p) in keys.checkpoint:
            data.checkpoint_panels.append(drawn_or_failed(
                assembler, t, p, keys.checkpoint[(t.name, p)], ctx, out_dir / "checkpoint",
                keys))
        elif t.scope == "dataset" and (t.name, p) in keys.dataset:
            started = time.perf_counter()
            data.dataset_panels.append(drawn_or_failed(
                assembler, t, p, keys.dataset[(t.name, p)], ctx, out_dir / "dataset", keys))
            seconds["dataset"] = seconds.get("dataset", 0.0) + time.perf_counter() - started
    started = time.perf_counter()
    # NumPy and zlib release the GIL, so a second thread overlaps part of the drawing (under
    # 10 % on two cores: most of it is Python); not in the drawing worker (drawing_pool).
    jobs = [(item, t, p) for item in inputs for t, p in variants
            if t.scope == "input" and (t.name, p, item.key) in keys.inputs]
    contexts = {item.key: context(model, str(step), description, dataset, item)
                for item in inputs}

    def panel(job, draw=True):
        item, t, p = job
        return drawn_or_failed(assembler, t, p, keys.inputs[(t.name, p, item.key)],
                               contexts[item.key], out_dir / item.key, keys, draw=draw)

    panels = [panel(job, draw=False) for job in jobs]     # drawn before: no threads needed
    missing = [i for i, found in enumerate(panels) if found is None]
    if missing:
        with ThreadPoolExecutor(max_workers=DRAWING_THREADS) as pool:
            for i, drawn in zip(missing, pool.map(panel, [jobs[i] for i in missing])):
                panels[i] = drawn
    for (item, _, _), panel in zip(jobs, panels):
        data.input_panels.setdefault(item.key, []).append(panel)
    seconds["inputs"] = time.perf_counter() - started
    for item in inputs:
        for t, p in variants:   # the gallery's predictions come from the stored result
            if t.name == "predictions" and keys.inputs[(t.name, p, item.key)] not in keys.failed:
                lengths = assembler.arrays(keys.inputs[(t.name, p, item.key)],
                                           f"predictions ({model}, step {step}, "
                                           f"{item.label})")["lengths"]
                data.predictions[item.key] = prediction(lengths, item.true_class,
                                                        dataset.class_names,
                                                        item.true_classes)
    evaluation = assembler.arrays(keys.evaluation, f"the evaluation ({model}, step {step})")
    data.accuracy, data.per_class_accuracy, data.confusion_matrix = evaluation_tables(
        evaluation["lengths"], evaluation["labels"], description.classes)
    data.predicted_pair = predicted_pairs(evaluation["lengths"], evaluation["labels"])
    return data


def drawn_or_failed(assembler, tech, params, key: str, ctx, out_dir, keys, draw: bool = True):
    """The panel of one stored result; for a result whose technique failed to compute it
    (`keys.failed`) or to draw it, a panel without figures that says why (Panel.failed): a
    failing technique fails alone. A result gone from the store still raises MissingResult
    (the build computes it again)."""
    from reportgen.engine.step import failure_reason
    from reportgen.errors import StoreError
    from reportgen.pages.assemble import MissingResult
    from reportgen.techniques.compute import variant_label

    reason = keys.failed.get(key)
    if reason is None:
        try:
            return assembler.panel(tech, params, key, ctx, out_dir, draw=draw)
        except (MissingResult, StoreError, KeyboardInterrupt):
            raise
        except Exception as exc:    # its drawing failed: the other panels are drawn
            from reportgen import console

            console.failure_traceback(exc)
            reason = keys.failed[key] = f"drawing it failed: {failure_reason(exc)}"
    label = variant_label(params)
    return Panel(technique=tech.name, variant=label,
                 title=tech.title_of(params) + (f" ({label})" if label else ""),
                 layer=tech.layer_for(params), caption="", figures=[],
                 experimental=tech.experimental, failed=reason)


# --------------------------------------------------------------------------------------------
# Over steps and across models


def panel_numbers(step: StepData, tech, params) -> dict | None:
    """The numbers of a step's dataset panel of `tech` (params None = its first variant);
    None when it was not computed at that step."""
    from reportgen.techniques.compute import variant_label

    label = None if params is None else variant_label(params)
    for panel in step.dataset_panels:
        if panel.technique == tech.name and label in (None, panel.variant):
            return panel.numbers
    return None


def trend_panels(assembler, model: str, description, dataset, variants,
                 steps: list[StepData]) -> list[Panel]:
    """Dataset analyses over training steps (only steps where they were computed)."""
    panels = []
    ctx = context(model, "all", description, dataset)
    for t, p in variants:
        if t.scope != "dataset" or t.render_trend is None:
            continue
        series = [(s.step, panel_numbers(s, t, p)) for s in steps]
        series = [(step, numbers) for step, numbers in series if numbers is not None]
        if len(series) < 2:
            continue
        panel = assembler.derived_panel(
            t, p, series, lambda s, t=t, p=p: t.render_trend(s, p, ctx), "over training",
            assembler.docs / "artifacts" / model / "trends")
        if panel is not None:
            panels.append(panel)
    return panels


def compare_panels(assembler, models, techniques) -> list[Panel]:
    """Dataset analyses with every model overlaid, each at its last step that has them."""
    panels = []
    for t in techniques:
        if t.scope != "dataset" or t.render_compare is None:
            continue
        series = []
        for model in models:
            for step in reversed(model.steps):
                numbers = panel_numbers(step, t, None)
                if numbers is not None:
                    series.append((f"{model.name} ({step.step})", numbers))
                    break
        if not series:
            continue
        ctx = RenderContext(model="all models", step="last", class_names=())
        panel = assembler.derived_panel(
            t, None, series, lambda s, t=t: t.render_compare(s, None, ctx), "across models",
            assembler.docs / "artifacts" / "_compare")
        if panel is not None:
            panels.append(panel)
    return panels


# --------------------------------------------------------------------------------------------
# What the model is


def not_applicable(chosen_plan) -> list[dict]:
    """ModelData.not_applicable: each technique that does not apply, with why."""
    return [{"technique": t.name, "title": t.title, "layer": t.layer,
             "reason": not_applicable_reason(missing)}
            for t, missing in chosen_plan.not_applicable]


def imported_sources(entry) -> list[dict]:
    """Where an imported model's saved steps came from, as `reportgen import` recorded it in
    source.json: [{step, file, sha256, layout, project}] in step order; [] for a model reportgen
    trained. A damaged source.json is a ReportgenError naming it."""
    if not entry.params.imported_from:
        return []
    from reportgen.importers.writer import read_sources

    saved = {str(step) for step in entry.steps}
    records = read_sources(entry).get("steps", {})
    return [{"step": step, **{key: str(record.get(key, ""))
                              for key in ("file", "sha256", "layout", "project")}}
            for step, record in records.items() if step in saved and isinstance(record, dict)]


def model_facts(handle, store) -> tuple[int, list[ArchitectureRow]]:
    """(trainable parameters, architecture rows) of a model: from the store (by the model's
    digest and the library versions), else from its Keras model, then stored."""
    from reportgen.pages.assemble import architecture_rows

    key = hash_json({"architecture": handle.digest, "version": ARCHITECTURE_VERSION,
                     "libraries": library_versions()})
    figures = store.get_figures(key)
    if figures:
        try:
            facts = json.loads(Path(figures[0]["path"]).read_bytes())
            return int(facts["params"]), [ArchitectureRow(**row) for row in facts["rows"]]
        except (OSError, ValueError, KeyError, TypeError):
            pass                       # removed or damaged: made again below
    net = handle.net()
    params, rows = net.trainable_params(), architecture_rows(net)
    data = json.dumps({"params": params, "rows": [asdict(r) for r in rows]}, indent=1)
    store.put_figures(key, [Figure(name="architecture.json", data=data.encode(), kind="json")])
    return params, rows


# --------------------------------------------------------------------------------------------
# The training filmstrip


FILMSTRIP_VERSION = 2     # 2: an input's frames of one technique in one store entry
RANGE_FILE = "range.json"   # the frames' shared scale, [vmin, vmax] (null: nothing to scale)


def filmstrip_frames(assembler, model: str, description, dataset, variants, inputs,
                     steps: list[StepData]) -> None:
    """Each input's frames of the techniques with a data-set colour scale, drawn again with one
    scale shared by every step (the union of the steps' ranges, reportgen.figures.shared_scale),
    so the filmstrip's frames compare; set as `Panel.shared` of each step's panel. An input's
    frames of one technique, and their scale, are one store entry: adding a step changes the
    scale, so they are drawn again together anyway."""
    from reportgen.figures.shared_scale import RANGES
    from reportgen.techniques.compute import variant_label

    jobs = []
    for t, p in variants:
        if t.scope != "input" or t.name not in RANGES:
            continue
        label = variant_label(p)
        for item in inputs:
            found = []
            for step in steps:
                panel = next((q for q in step.input_panels.get(item.key, [])
                              if q.technique == t.name and q.variant == label
                              and not q.failed), None)
                keys = assembler.step_keys.get((model, step.step))
                key = None if keys is None else keys.inputs.get((t.name, p, item.key))
                if panel is not None and key is not None:
                    found.append((step, panel, key))
            if len(found) >= 2:
                jobs.append((t, p, item, found))

    def frames(job):
        _shared_frames(assembler, model, description, dataset, *job)

    with ThreadPoolExecutor(max_workers=DRAWING_THREADS) as pool:
        list(pool.map(frames, jobs))        # threads, as step_data draws


def _shared_frames(assembler, model: str, description, dataset, tech, params, item,
                   found) -> None:
    """One input's frames of `tech` at the steps `found` ((step, panel, array key)), on the
    union of their ranges: drawn once, then read from the store by the array keys (a rebuild
    loads no arrays)."""
    from dataclasses import replace

    from reportgen.engine.code_identity import drawing_code
    from reportgen.techniques import origin as technique_origin
    from reportgen.figures.shared_scale import shared_range
    from reportgen.pages.assemble import FIGURES_VERSION, MissingResult
    from reportgen.techniques.compute import params_dict

    what = f"{tech.name} ({model}, {item.label})"
    key = hash_json({"filmstrip": tech.name, "version": FILMSTRIP_VERSION,
                     "figures": FIGURES_VERSION, "drawing": drawing_code(tech, technique_origin(tech)),
                     "model": model, "input": item.label,
                     "classes": list(dataset.class_names), "params": params_dict(params),
                     "steps": [step.step for step, _, _ in found],
                     "arrays": [array_key for _, _, array_key in found]})

    def draw():
        arrays = [assembler.arrays(array_key, f"{what}, step {step.step}")
                  for step, _, array_key in found]
        scale = shared_range(tech.name, params, arrays)
        frames = [] if scale is None else [
            list(tech.render(values, params, replace(
                context(model, step.step, description, dataset, item),
                value_range=scale, thumbnail=True)))
            for (step, _, _), values in zip(found, arrays)]
        return frames, [Figure(name=RANGE_FILE, kind="json", data=json.dumps(
            None if scale is None else [float(scale[0]), float(scale[1])]).encode())]

    panels, own = assembler.panel_series(
        tech, params, key, draw,
        # beside the step's own figures of the input: no folder more to make for each step
        [assembler.docs / "artifacts" / model / step.step / item.key for step, _, _ in found],
        about=f"the filmstrip frames of {what}", prefix="shared-scale-")
    try:
        value = json.loads(Path(own[RANGE_FILE]).read_bytes())
    except (OSError, ValueError, KeyError):
        raise MissingResult(f"the filmstrip frames of {what}", key) from None
    if value is None:
        return
    for (_, panel, _), shared in zip(found, panels):
        panel.shared = shared
        panel.shared_range = (float(value[0]), float(value[1]))
