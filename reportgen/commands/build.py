"""`reportgen build`: the pipeline, read top to bottom.

    models/NAME/params.toml + EPOCH-BATCH.weights.h5
      -> for each model: build once; for each chosen step: load the checkpoint once
      -> plan: which (technique, options, input) results are missing from the artifact store
      -> probe: ONE forward (+ backward) pass per batch of images that needs anything
      -> techniques compute from the probe; arrays go to the store
      -> figures are drawn from stored arrays (redrawn without recomputing); go to the store
      -> pages: SiteData -> Jinja2 -> MkDocs -> site/
A broken model or checkpoint is reported and skipped; the rest still builds; the exit code is
non-zero at the end.
"""

from __future__ import annotations

import os
import shutil
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from reportgen import console
from reportgen.cache.keys import artifact_key, file_digest, hash_json
from reportgen.cache.store import ArtifactStore
from reportgen.catalog import Catalog, ModelEntry
from reportgen.errors import ReportgenError
from reportgen.training.checkpoints import Step

FIGURES_VERSION = 1      # bump when drawing changes: figures are redrawn, arrays are kept
DEFAULT_IMAGES = "test:0-15"
DEFAULT_PROJECT_DIR = Path(".reportgen/mkdocs")


@dataclass
class BuildOptions:
    models: str = "*"
    steps: str = "all"                 # all | last | E-B,E-B | every:N
    images: str = DEFAULT_IMAGES       # test:0-15 | test:3,7 | none
    files: tuple[str, ...] = ()        # the user's image files
    transforms: str = ""               # e.g. "rotate:90,invert"
    techniques: tuple[str, ...] = ()   # () = all non-experimental
    experimental: bool = False         # include experimental techniques (activation max.)
    eval_images: int = 500             # evaluation set for accuracy / confusion matrix
    batch_size: int = 16
    site_dir: str = "site"
    project_dir: str | None = None     # the generated MkDocs project [.reportgen/mkdocs]
    cache_dir: str | None = None
    templates_dir: str | None = None
    title: str = "reportgen: what the capsules learned"
    render_site: bool = True


@dataclass
class BuildSummary:
    computed: int = 0
    reused: int = 0
    drawn: int = 0
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed


def select_steps(available: list[Step], spec: str) -> list[Step]:
    """'all', 'last', 'every:N' (every Nth saved step, always with the last) or 'E-B,E-B'."""
    spec = spec.strip()
    if not available:
        return []
    if spec == "all":
        return list(available)
    if spec == "last":
        return [available[-1]]
    if spec.startswith("every:"):
        try:
            n = int(spec[6:])
            if n < 1:
                raise ValueError
        except ValueError:
            raise ReportgenError("Invalid --steps.", expected="every:N with N >= 1",
                                 received=repr(spec)) from None
        chosen = available[::n]
        return chosen if chosen[-1] == available[-1] else chosen + [available[-1]]
    chosen = []
    for token in spec.split(","):
        step = Step.parse(token)
        if step not in available:
            raise ReportgenError(f"Step {step} was not saved.",
                                 expected=f"one of: {', '.join(map(str, available))}",
                                 fix="use --steps all, last, every:N or listed steps")
        chosen.append(step)
    return sorted(set(chosen))


def _techniques(options: BuildOptions):
    from reportgen.techniques import all_techniques, get_technique

    if options.techniques:
        return [get_technique(n) for n in options.techniques]
    return [t for t in all_techniques() if options.experimental or not t.experimental]


def run_build(*, models_dir=None, **kwargs) -> BuildSummary:
    """Build the analyses and the site; raises SystemExit(1) at the end if anything failed."""
    options = BuildOptions(**kwargs)
    summary = build(Catalog(models_dir), options)
    _print_summary(summary, options)
    if not summary.ok:
        raise SystemExit(1)
    return summary


def build(catalog: Catalog, options: BuildOptions) -> BuildSummary:
    from reportgen.data.inputs import parse_image_selection, parse_transforms

    store = ArtifactStore(options.cache_dir)
    summary = BuildSummary()
    entries = catalog.match(options.models)
    techniques = _techniques(options)
    indices = parse_image_selection(options.images)
    transforms = parse_transforms(options.transforms)
    project = Path(options.project_dir) if options.project_dir else DEFAULT_PROJECT_DIR
    docs = project / "docs"
    if docs.exists():
        shutil.rmtree(docs)
    docs.mkdir(parents=True)
    models_data = []
    for entry in entries:
        try:
            data = _build_model(entry, options, techniques, indices, transforms, store, docs,
                                summary)
        except ReportgenError as exc:
            summary.failed.append(f"{entry.name}: {exc.message}")
            continue
        except Exception as exc:  # a broken model must not stop the others
            summary.failed.append(f"{entry.name}: {type(exc).__name__}: {exc}")
            if os.environ.get("REPORTGEN_DEBUG"):
                traceback.print_exc()
            continue
        if data is not None:
            models_data.append(data)
    if options.render_site:
        from reportgen.pages.render import build_site, render_site
        from reportgen.pages.sitedata import SiteData

        site = SiteData(title=options.title, models=models_data,
                        techniques=[{"name": t.name, "title": t.title, "layer": t.layer,
                                     "description": t.description,
                                     "experimental": t.experimental} for t in techniques])
        render_site(site, docs, Path(options.templates_dir) if options.templates_dir else None)
        build_site(project, Path(options.site_dir))
    return summary


# --------------------------------------------------------------------------------------------
def _build_model(entry: ModelEntry, options, techniques, indices, transforms, store, docs,
                 summary):
    import keras

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.data.datasets import load_dataset
    from reportgen.data.inputs import make_inputs
    from reportgen.pages.sitedata import InputInfo, ModelData

    params = entry.params
    steps = select_steps(entry.steps, options.steps)
    if not steps:
        summary.skipped.append(f"{entry.name}: no trained steps; train it with "
                               f"`reportgen train {entry.name}`")
        return None
    dataset = load_dataset(params.dataset)
    inputs = make_inputs(dataset, indices, list(options.files), transforms, params.input_shape)
    keras.backend.clear_session()  # rebuilt models otherwise slow down build after build
    net = build_capsnet(params)
    model_digest = hash_json(params.to_dict())
    variants = [(t, p) for t in techniques for p in t.variants(net)]
    eval_x, eval_y = _evaluation_set(dataset, options.eval_images)
    eval_digest = hash_json({"x": file_bytes_digest(eval_x), "y": eval_y.tolist()})

    model_dir = docs / "artifacts" / entry.name
    input_infos = []
    for item in inputs:
        path = model_dir / "inputs" / f"{item.key}.png"
        _write_input_png(item.image, path)
        input_infos.append(InputInfo(
            key=item.key, label=item.label, image=path.relative_to(docs).as_posix(),
            true_class=None if item.true_class is None else dataset.class_names[item.true_class]))

    steps_data = []
    with console.progress(len(steps), f"build {entry.name}", unit="step") as bar:
        for step in steps:
            try:
                steps_data.append(_build_step(entry, step, net, model_digest, variants, inputs,
                                              dataset, eval_x, eval_y, eval_digest, store, docs,
                                              summary, options.batch_size))
            except ReportgenError as exc:
                summary.failed.append(f"{entry.name} step {step}: {exc.message}")
            bar.update(1)
            bar.set_postfix(computed=summary.computed, reused=summary.reused, refresh=False)
    history = entry.history()
    accs = [r["val_accuracy"] for r in history if r.get("val_accuracy") is not None]
    return ModelData(
        name=entry.name, dataset=dataset.source, description=params.description,
        params=net.trainable_params(), class_names=list(dataset.class_names),
        architecture=_architecture(net), history=history, steps=steps_data, inputs=input_infos,
        latest_val_accuracy=accs[-1] if accs else None,
        best_val_accuracy=max(accs) if accs else None)


def file_bytes_digest(array: np.ndarray) -> str:
    from reportgen.cache.keys import hash_bytes

    return hash_bytes(np.ascontiguousarray(array).tobytes())


def _evaluation_set(dataset, n: int):
    """A stratified, seeded sample of `n` test images (the whole split if smaller)."""
    y = dataset.y_test
    if n >= len(y):
        return dataset.x_test, y
    rng = np.random.default_rng(0)
    classes = np.unique(y)
    per_class = max(1, n // len(classes))
    chosen = np.concatenate([rng.permutation(np.flatnonzero(y == c))[:per_class]
                             for c in classes])
    chosen = np.sort(chosen)
    return dataset.x_test[chosen], y[chosen]


def _write_input_png(image: np.ndarray, path: Path) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.clip(np.round(image * 255), 0, 255).astype(np.uint8)
    mode = "L" if pixels.shape[-1] == 1 else "RGB"
    Image.fromarray(pixels[..., 0] if mode == "L" else pixels, mode).save(path, optimize=False)


def _build_step(entry, step, net, model_digest, variants, inputs, dataset, eval_x, eval_y,
                eval_digest, store, docs, summary, batch_size):
    from reportgen.probe.probe import empty_batch, run_probe, subset
    from reportgen.pages.sitedata import Prediction, StepData
    from reportgen.techniques.compute import params_dict
    from reportgen.training.checkpoints import load_weights

    weights_path = entry.weights_path(step)
    weights_digest = file_digest(weights_path)

    def key(tech, p, input_digest):
        return artifact_key(model=model_digest, weights=weights_digest, input=input_digest,
                            technique=tech.name, version=tech.version, params=params_dict(p))

    input_variants = [(t, p) for t, p in variants if t.scope == "input"]
    checkpoint_variants = [(t, p) for t, p in variants if t.scope == "checkpoint"]
    keys = {(t.name, id(p), item.key): key(t, p, item.source_bytes_digest)
            for t, p in input_variants for item in inputs}
    ckeys = {(t.name, id(p)): key(t, p, "") for t, p in checkpoint_variants}
    eval_key = artifact_key(model=model_digest, weights=weights_digest, input=eval_digest,
                            technique="evaluation", version=1, params={})
    present = {k for k in keys.values() if store.has_arrays(k)}
    summary.reused += len(present)
    missing_inputs = [i for i, item in enumerate(inputs)
                      if any(keys[(t.name, id(p), item.key)] not in present
                             for t, p in input_variants)]
    missing_ckpt = [(t, p) for t, p in checkpoint_variants
                    if not store.has_arrays(ckeys[(t.name, id(p))])]
    need_eval = not store.has_arrays(eval_key)
    if missing_inputs or missing_ckpt or need_eval:  # each checkpoint is loaded at most once
        load_weights(net, weights_path)
    for t, p in missing_ckpt:
        store.put_arrays(ckeys[(t.name, id(p))], _float32(t.compute(empty_batch(net), p)),
                         {"technique": t.name, "model": entry.name, "step": str(step)})
        summary.computed += 1
    summary.reused += len(checkpoint_variants) - len(missing_ckpt)
    if need_eval:
        from reportgen.training.evaluate import class_lengths

        store.put_arrays(eval_key, {"lengths": class_lengths(net, eval_x), "labels": eval_y},
                         {"technique": "evaluation", "model": entry.name, "step": str(step)})
    needs_grad = any(t.name == "gradcam_pp" for t, _ in input_variants)
    for start in range(0, len(missing_inputs), batch_size):
        chunk = missing_inputs[start:start + batch_size]
        batch = run_probe(net, np.stack([inputs[i].image for i in chunk]), gradients=needs_grad)
        for t, p in input_variants:
            todo = [j for j, i in enumerate(chunk)
                    if keys[(t.name, id(p), inputs[i].key)] not in present]
            if not todo:
                continue
            result = _float32(t.compute(subset(batch, todo) if len(todo) < len(chunk) else batch,
                                        p))
            for row, j in enumerate(todo):
                item = inputs[chunk[j]]
                store.put_arrays(keys[(t.name, id(p), item.key)],
                                 {k: v[row] for k, v in result.items()},
                                 {"technique": t.name, "model": entry.name, "step": str(step),
                                  "input": item.key})
                summary.computed += 1

    # ---- figures (drawn from stored arrays) and pages data ---------------------------------
    step_data = StepData(step=str(step))
    out_dir = docs / "artifacts" / entry.name / str(step)
    for t, p in checkpoint_variants:
        ctx = _context(entry, step, net, dataset, None)
        step_data.checkpoint_panels.append(_panel(
            t, p, store, ckeys[(t.name, id(p))], ctx, out_dir / "checkpoint", docs, summary))
    for item in inputs:
        ctx = _context(entry, step, net, dataset, item)
        panels = [_panel(t, p, store, keys[(t.name, id(p), item.key)], ctx, out_dir / item.key,
                         docs, summary) for t, p in input_variants]
        step_data.input_panels[item.key] = panels
    # predictions for the gallery, from the stored predictions results (no model work)
    for item in inputs:
        arrays = store.get_arrays(artifact_key(
            model=model_digest, weights=weights_digest, input=item.source_bytes_digest,
            technique="predictions", version=_version("predictions"), params=params_dict(None)))
        if arrays is None:
            continue
        lengths = arrays["lengths"]
        predicted = int(np.argmax(lengths))
        step_data.predictions[item.key] = Prediction(
            predicted=dataset.class_names[predicted], confidence=float(lengths[predicted]),
            correct=None if item.true_class is None else predicted == item.true_class)
    evaluation = store.get_arrays(eval_key)
    if evaluation is not None:
        k = net.params.num_classes
        predicted = evaluation["lengths"].argmax(axis=1)
        labels = evaluation["labels"].astype(int)
        matrix = np.zeros((k, k), dtype=int)
        np.add.at(matrix, (labels, predicted), 1)
        totals = matrix.sum(axis=1)
        step_data.confusion_matrix = matrix.tolist()
        step_data.per_class_accuracy = [float(matrix[c, c] / totals[c]) if totals[c] else 0.0
                                        for c in range(k)]
        step_data.accuracy = float(np.trace(matrix) / max(1, matrix.sum()))
    return step_data


def _version(name: str) -> int:
    from reportgen.techniques import get_technique

    return get_technique(name).version


def _float32(arrays: dict) -> dict:
    return {k: np.asarray(v, dtype=np.float32) if np.asarray(v).dtype.kind == "f"
            else np.asarray(v) for k, v in arrays.items()}


def _context(entry, step, net, dataset, item):
    from reportgen.techniques.base import RenderContext

    return RenderContext(
        model=entry.name, step=str(step), class_names=tuple(dataset.class_names),
        input_label="" if item is None else item.label,
        image=None if item is None else np.asarray(item.image),
        receptive_fields=tuple(net.receptive_fields()),
        conv_layer_names=tuple(net.conv_layer_names))


def _panel(tech, params, store, array_key, ctx, out_dir, docs, summary):
    """Draw (or reuse) the figures of one result and place them in the docs folder."""
    from reportgen.pages.sitedata import FigureFile, Panel
    from reportgen.techniques.compute import params_dict, variant_label

    fig_key = hash_json({"arrays": array_key, "figures": FIGURES_VERSION, "model": ctx.model,
                         "step": ctx.step, "input": ctx.input_label,
                         "classes": ctx.class_names, "params": params_dict(params)})
    figures = store.get_figures(fig_key)
    if figures is None:
        arrays = store.get_arrays(array_key)
        drawn = tech.render(arrays, params, ctx)
        figures = store.put_figures(fig_key, drawn)
        summary.drawn += 1
    label = variant_label(params)
    stem = tech.name + (f"-{label}" if label else "")
    files = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for fig in figures:
        name = Path(fig["name"])
        target = out_dir / (f"{stem}{name.suffix}" if name.stem == tech.name
                            else f"{stem}-{fig['name']}")
        _link_or_copy(Path(fig["path"]), target)
        files.append(FigureFile(kind=fig["kind"], path=target.relative_to(docs).as_posix(),
                                width=fig["width"], height=fig["height"]))
    files.sort(key=lambda f: f.kind != "png")
    caption = figures[0]["caption"] if figures else ""
    title = tech.title + (f" ({label})" if label else "")
    return Panel(technique=tech.name, variant=label, title=title, layer=tech.layer,
                 caption=caption, figures=files, experimental=tech.experimental)


def _link_or_copy(source: Path, target: Path) -> None:
    if target.exists():
        target.unlink()
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _architecture(net):
    from reportgen.pages.sitedata import ArchitectureRow

    rows = []
    for layer in net.model.layers:
        sublayers = getattr(layer, "layers", None)
        for sub in (sublayers if sublayers else [layer]):
            if sub.__class__.__name__ == "InputLayer":
                continue
            out = sub.output
            outs = out if isinstance(out, (list, tuple)) else [out]
            shape = " + ".join(str(tuple(o.shape)) for o in outs)
            rows.append(ArchitectureRow(layer=sub.name, kind=sub.__class__.__name__,
                                        output_shape=str(shape), params=int(sub.count_params())))
    return rows


def _print_summary(summary: BuildSummary, options: BuildOptions) -> None:
    console.echo(f"computed {summary.computed} · reused {summary.reused} · "
                 f"figures drawn {summary.drawn} · failed {len(summary.failed)}")
    for line in summary.skipped:
        console.echo(f"skipped: {line}")
    for line in summary.failed:
        console.echo(f"FAILED: {line}")
    if options.render_site:
        console.echo(f"site: {options.site_dir}/index.html")
