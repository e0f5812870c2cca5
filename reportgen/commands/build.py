"""`reportgen build`: the pipeline, read top to bottom.

    models/NAME/params.toml + EPOCH-BATCH.weights.h5
      -> for each model: build once; for each chosen step: load the checkpoint once
      -> plan: which (technique, options, input) results are missing from the artifact store
      -> probe: ONE forward (+ backward) pass per batch of images that needs anything
      -> techniques compute from the probe; arrays go to the store
      -> figures are drawn from stored arrays (redrawn without recomputing); go to the store
      -> pages: SiteData -> Jinja2 -> MkDocs -> a staging folder, swapped in for site/
A broken model or checkpoint is reported (in the summary and on Home) and skipped; the rest
still builds; the exit code is 1 at the end. Before any model is loaded, the options, the image
files and the site folder are checked (reportgen.pages.site_output: reportgen replaces only a
folder it made, and one build per site folder runs at a time); a build that builds nothing
leaves the previous site as it was. Each build works in its own folder under .reportgen/builds/
(reportgen.commands.work_folder), so builds in one project folder never share files.
"""

from __future__ import annotations

import os
import shutil
import traceback
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from reportgen import console
from reportgen.cache.keys import hash_json
from reportgen.cache.store import ArtifactStore
from reportgen.catalog import Catalog, ModelEntry
from reportgen.commands.work_folder import WORK_ROOT, WorkFolder
from reportgen.errors import ReportgenError, StoreError
from reportgen.pages import site_output
from reportgen.training.checkpoints import Step

DEFAULT_IMAGES = "test:0-15"
DRAWING_THREADS = min(4, os.cpu_count() or 1)
_MODELS_BUILT = 0   # models built in this build (clear_session only between them)


@dataclass
class BuildOptions:
    models: str = "*"
    steps: str = "all"                 # all | last | E-B,E-B | every:N
    images: str = DEFAULT_IMAGES       # test:0-15 | test:3,7 | none
    files: tuple[str, ...] = ()        # the user's image files
    transforms: str = ""               # e.g. "rotate:90,invert"
    techniques: tuple[str, ...] = ()   # () = all non-experimental
    experimental: bool = False         # include experimental techniques (activation max.)
    analyses: str = "last"             # dataset-level analyses at: last | all | none (steps)
    eval_images: int = 500             # evaluation set for accuracy / confusion matrix
    batch_size: int = 16
    site_dir: str = "site"
    no_wait: bool = False              # another build holds the site folder: refuse, not wait
    project_dir: str | None = None     # the MkDocs project, kept [a private, removed folder]
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
    failures: list[tuple[str, str]] = field(default_factory=list)   # (subject, reason)
    steps_built: int = 0
    site: str = "none"      # none | built | unchanged (up to date) | kept (nothing was built)

    @property
    def ok(self) -> bool:
        return not self.failed

    def fail(self, subject: str, reason: str) -> None:
        self.failures.append((subject, reason))
        self.failed.append(f"{subject}: {reason}")


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


def load_build_config(path) -> dict:
    """The [build] table of a TOML file, checked against the build options' names and types."""
    import tomllib
    from dataclasses import fields

    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ReportgenError(f"Build configuration {path} is not valid TOML.",
                             received=str(exc), fix=f"Fix the syntax of {path}.") from exc
    table = raw.get("build")
    if not isinstance(table, dict):
        raise ReportgenError(f"Build configuration {path} has no [build] table.",
                             fix='Put the options under [build], e.g. models = "MNIST_*".')
    known = {f.name: f for f in fields(BuildOptions)} | {"image": None}
    out = {}
    for key, value in table.items():
        name = "files" if key in ("image", "images_files") else key
        if name not in known or name in ("render_site", "project_dir", "title"):
            raise ReportgenError(f"Unknown option '{key}' in {path} [build].",
                                 expected=", ".join(sorted(k for k in known if k not in
                                                           ("render_site", "project_dir",
                                                            "title", "image"))))
        default = getattr(BuildOptions(), name)
        if name in ("files", "techniques"):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ReportgenError(f"Invalid '{key}' in {path} [build].",
                                     expected="a list of strings", received=repr(value))
            value = tuple(value)
        elif default is not None and not isinstance(value, type(default)):
            raise ReportgenError(f"Invalid '{key}' in {path} [build].",
                                 expected=type(default).__name__, received=repr(value))
        out[name] = value
    return out


def _techniques(options: BuildOptions):
    from reportgen.techniques import all_techniques, get_technique

    if options.techniques:
        return [get_technique(n) for n in options.techniques]
    return [t for t in all_techniques() if options.experimental or not t.experimental]


def run_build(*, models_dir=None, **kwargs) -> BuildSummary:
    """Build the analyses and the site; exits 1 at the end if anything failed, 2 (a
    ReportgenError) when nothing could be built (the previous site is then left as it was)."""
    options = BuildOptions(**kwargs)
    summary = build(Catalog(models_dir), options)
    _print_summary(summary, options)
    if summary.steps_built == 0:
        where = f"; {options.site_dir}/ was left as it was" if options.render_site else ""
        first = (summary.failed or summary.skipped or ["no step was chosen"])[0]
        raise ReportgenError(f"Nothing was built{where}.", received=first,
                             fix="fix the problems listed above and build again")
    if not summary.ok:
        raise SystemExit(1)
    return summary


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def _check_image_files(files) -> None:
    """A missing or unreadable --image is a user error: say so before any model is loaded."""
    from reportgen.data.inputs import load_image_file

    for path in files:
        load_image_file(path, (8, 8, 1))


def _match_models(catalog: Catalog, pattern: str, summary: BuildSummary) -> list[ModelEntry]:
    """The models to build; model folders the catalog found invalid (a bad params.toml, an
    unsafe name) are recorded as failed, so they show on Home and the exit code is 1."""
    invalid_models = getattr(catalog, "invalid_models", None)
    invalid = list(invalid_models(pattern)) if callable(invalid_models) else []
    for name, reason in invalid:
        summary.fail(name, reason)
    try:
        return catalog.match(pattern)
    except ReportgenError:
        if invalid:            # every matching model is invalid: reported above
            return []
        raise


def build(catalog: Catalog, options: BuildOptions) -> BuildSummary:
    """Compute, draw, render and (unless `render_site` is off) replace the site folder.

    User errors the options reveal, and an unusable site folder, raise ReportgenError before
    any model is loaded; a StoreError raised later stops the build at once. The site folder is
    replaced only when at least one step was built.
    """
    from reportgen.data.inputs import parse_image_selection, parse_transforms

    global _MODELS_BUILT
    _MODELS_BUILT = 0
    techniques = _techniques(options)
    if options.analyses not in ("last", "all", "none"):
        raise ReportgenError("Invalid --analyses.", expected="last, all or none",
                             received=repr(options.analyses))
    indices = parse_image_selection(options.images)
    transforms = parse_transforms(options.transforms)
    _check_image_files(options.files)
    store = ArtifactStore(options.cache_dir)
    summary = BuildSummary()
    entries = _match_models(catalog, options.models, summary)
    site_dir = Path(options.site_dir)
    site_rules = dict(models_dir=catalog.root, cache_dir=store.root, work_dir=WORK_ROOT)
    with ExitStack() as stack:
        if options.render_site:
            site = site_output.check_site_folder(site_dir, **site_rules)
            stack.enter_context(site_output.SiteLock(site, wait=not options.no_wait,
                                                     label=options.site_dir))
            # while this build waited, the other one may have left the folder otherwise
            site_output.check_site_folder(site_dir, **site_rules)
            site_output.recover_leftovers(site)
        shared_lock = getattr(store, "shared_lock", None)
        if callable(shared_lock):
            stack.enter_context(shared_lock())
        if options.project_dir:
            project = Path(options.project_dir)
            if (project / "docs").exists():
                shutil.rmtree(project / "docs")
        else:
            project = stack.enter_context(WorkFolder()) / "mkdocs"
        _build_into(project, options, entries, techniques, indices, transforms, store, summary)
    return summary


def _build_into(project: Path, options, entries, techniques, indices, transforms, store,
                summary) -> None:
    """Everything after the checks: models -> docs/ in `project` -> the site folder."""
    from reportgen.pages.assemble import Assembler

    docs = project / "docs"
    docs.mkdir(parents=True)
    assembler = Assembler(store, docs)
    models_data = []
    for entry in entries:
        try:
            data = _build_model(entry, options, techniques, indices, transforms, store,
                                assembler, summary)
        except StoreError:
            raise                 # not this model's fault: every other one would fail too
        except ReportgenError as exc:
            summary.fail(entry.name, exc.message)
            continue
        except Exception as exc:  # a broken model must not stop the others
            summary.fail(entry.name, _one_line(exc))
            if os.environ.get("REPORTGEN_DEBUG"):
                traceback.print_exc()
            continue
        if data is not None:
            models_data.append(data)
    summary.drawn = assembler.drawn
    summary.steps_built = sum(len(m.steps) for m in models_data)
    if not options.render_site:
        return
    if summary.steps_built == 0:
        summary.site = "kept"     # nothing to show: the previous site stays as it was
        return
    from reportgen.pages.render import build_site, render_site
    from reportgen.pages.sitedata import BuildFailure, SiteData

    site = SiteData(title=options.title, models=models_data,
                    techniques=[{"name": t.name, "title": t.title, "layer": t.layer,
                                 "description": t.description,
                                 "experimental": t.experimental} for t in techniques],
                    compare_panels=_compare_panels(models_data, techniques, assembler, docs),
                    failures=[BuildFailure(subject, reason)
                              for subject, reason in summary.failures])
    render_site(site, docs, Path(options.templates_dir) if options.templates_dir else None)
    changed = _build_site_if_changed(project, Path(options.site_dir), build_site)
    summary.site = "built" if changed else "unchanged"


# --------------------------------------------------------------------------------------------
def _build_model(entry: ModelEntry, options, techniques, indices, transforms, store, assembler,
                 summary):
    import keras

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.data.datasets import load_dataset
    from reportgen.data.inputs import make_inputs
    from reportgen.engine.step import compute_step, step_keys
    from reportgen.pages.assemble import architecture_rows, write_input_png
    from reportgen.pages.sitedata import InputInfo, ModelData

    params = entry.params
    steps = select_steps(entry.steps, options.steps)
    if not steps:
        summary.skipped.append(f"{entry.name}: no trained steps; train it with "
                               f"`reportgen train {entry.name}`")
        return None
    dataset = load_dataset(params.dataset)
    inputs = make_inputs(dataset, indices, list(options.files), transforms, params.input_shape)
    _warn_polarity(inputs, dataset)
    global _MODELS_BUILT
    if _MODELS_BUILT:  # rebuilt models otherwise slow down build after build (SPEC §6)
        keras.backend.clear_session()
    _MODELS_BUILT += 1
    net = build_capsnet(params)
    model_digest = hash_json(params.to_dict())
    variants = [(t, p) for t in techniques for p in t.variants(net)]
    eval_x, eval_y = _evaluation_set(dataset, options.eval_images)
    eval_digest = hash_json({"x": array_digest(eval_x), "y": eval_y.tolist()})
    eval_set = (eval_x, eval_y, dataset.class_names)

    docs = assembler.docs
    model_dir = docs / "artifacts" / entry.name
    input_infos = []
    for item in inputs:
        path = model_dir / "inputs" / f"{item.key}.png"
        write_input_png(item.image, path)
        input_infos.append(InputInfo(
            key=item.key, label=item.label, image=path.relative_to(docs).as_posix(),
            true_class=None if item.true_class is None else dataset.class_names[item.true_class]))

    steps_data, errors = [], []
    with console.progress(len(steps), f"build {entry.name}", unit="step") as bar:
        for step in steps:
            with_dataset = options.analyses == "all" or (
                options.analyses == "last" and step == steps[-1])
            try:
                keys = step_keys(model_digest, entry.weights_path(step), variants, inputs,
                                 eval_digest, with_dataset)
                counts = compute_step(net, entry.weights_path(step), variants, inputs,
                                      eval_set, keys, store, options.batch_size,
                                      {"model": entry.name, "step": str(step)})
                summary.computed += counts.computed
                summary.reused += counts.reused
                steps_data.append(_step_data(entry, step, net, variants, inputs, dataset,
                                             keys, store, assembler))
            except StoreError:
                raise
            except ReportgenError as exc:
                summary.fail(f"{entry.name} step {step}", exc.message)
                errors.append(f"step {step}: {exc.message}")
            bar.update(1)
            bar.set_postfix(computed=summary.computed, reused=summary.reused, refresh=False)
    history = entry.history()
    accs = [r["val_accuracy"] for r in history if r.get("val_accuracy") is not None]
    data = ModelData(
        name=entry.name, dataset=dataset.source, description=params.description,
        params=net.trainable_params(), class_names=list(dataset.class_names),
        architecture=architecture_rows(net), history=history, steps=steps_data,
        inputs=input_infos, latest_val_accuracy=accs[-1] if accs else None,
        best_val_accuracy=max(accs) if accs else None, errors=errors)
    data.trend_panels = _trend_panels(entry, net, dataset, variants, steps_data, assembler)
    return data


def _warn_polarity(inputs, dataset) -> None:
    """A user's dark-on-light image fed to a light-on-dark model (MNIST) mostly shows nothing."""
    train_mean = float(np.mean(dataset.x_test[:200])) if len(dataset.x_test) else 0.5
    for item in inputs:
        if item.key.startswith("file-") and item.transform.is_identity and train_mean < 0.3 \
                and float(np.mean(item.image)) > 0.5:
            console.notice(f"{item.label}: mostly light, while {dataset.name} images are light "
                           f"on dark; add --transforms invert to see it as the model expects.")


def array_digest(array: np.ndarray) -> str:
    from reportgen.cache.keys import hash_bytes

    return hash_bytes(np.ascontiguousarray(array).tobytes())


def _evaluation_set(dataset, n: int):
    """A stratified, seeded sample of `n` test images (the whole split if smaller)."""
    from reportgen.probe.evaluation import stratified_sample

    chosen = stratified_sample(dataset.y_test, n)
    return dataset.x_test[chosen], dataset.y_test[chosen]


def _context(entry, step, net, dataset, item=None):
    from reportgen.techniques.base import RenderContext

    return RenderContext(
        model=entry.name, step=str(step), class_names=tuple(dataset.class_names),
        input_label="" if item is None else item.label,
        image=None if item is None else np.asarray(item.image),
        receptive_fields=tuple(net.receptive_fields()),
        conv_layer_names=tuple(net.conv_layer_names))


def _step_data(entry, step, net, variants, inputs, dataset, keys, store, assembler):
    """Panels (figures drawn from stored arrays), predictions and evaluation of one step."""
    from reportgen.pages.assemble import evaluation_tables, prediction
    from reportgen.pages.sitedata import StepData

    data = StepData(step=str(step))
    out_dir = assembler.docs / "artifacts" / entry.name / str(step)
    ctx = _context(entry, step, net, dataset)
    for t, p in variants:
        if t.scope == "checkpoint":
            data.checkpoint_panels.append(assembler.panel(
                t, p, keys.checkpoint[(t.name, p)], ctx, out_dir / "checkpoint"))
        elif t.scope == "dataset" and (t.name, p) in keys.dataset:
            data.dataset_panels.append(assembler.panel(
                t, p, keys.dataset[(t.name, p)], ctx, out_dir / "dataset"))
    # Drawing is mostly NumPy and zlib, which release the GIL: two threads use both cores.
    jobs = [(item, t, p) for item in inputs for t, p in variants if t.scope == "input"]
    contexts = {item.key: _context(entry, step, net, dataset, item) for item in inputs}
    with ThreadPoolExecutor(max_workers=DRAWING_THREADS) as pool:
        panels = list(pool.map(
            lambda job: assembler.panel(job[1], job[2],
                                        keys.inputs[(job[1].name, job[2], job[0].key)],
                                        contexts[job[0].key], out_dir / job[0].key), jobs))
    for (item, _, _), panel in zip(jobs, panels):
        data.input_panels.setdefault(item.key, []).append(panel)
    for item in inputs:
        for t, p in variants:   # the gallery's predictions come from the stored result
            if t.name == "predictions":
                lengths = store.get_arrays(keys.inputs[(t.name, p, item.key)])["lengths"]
                data.predictions[item.key] = prediction(lengths, item.true_class,
                                                        dataset.class_names)
    evaluation = store.get_arrays(keys.evaluation)
    if evaluation is not None:
        data.accuracy, data.per_class_accuracy, data.confusion_matrix = evaluation_tables(
            evaluation["lengths"], evaluation["labels"], net.params.num_classes)
    return data


def _trend_panels(entry, net, dataset, variants, steps_data, assembler):
    """Dataset analyses over training steps (only steps where they were computed)."""
    panels = []
    ctx = _context(entry, "all", net, dataset)
    for t, p in variants:
        if t.scope != "dataset" or t.render_trend is None:
            continue
        series = [(s.step, _panel_summary(assembler, s, t, p)) for s in steps_data]
        series = [(step, summ) for step, summ in series if summ is not None]
        if len(series) < 2:
            continue
        panel = assembler.derived_panel(
            t, p, series, lambda s, t=t, p=p: t.render_trend(s, p, ctx), "over training",
            assembler.docs / "artifacts" / entry.name / "trends")
        if panel is not None:
            panels.append(panel)
    return panels


def _panel_summary(assembler, step_data, tech, params):
    """The JSON summary exported with a step's dataset panel (None when not computed);
    params None = the technique's first variant."""
    import json

    from reportgen.techniques.compute import variant_label

    label = None if params is None else variant_label(params)
    for panel in step_data.dataset_panels:
        if panel.technique == tech.name and label in (None, panel.variant):
            for f in panel.figures:
                if f.kind == "json":
                    return json.loads((assembler.docs / f.path).read_text())
    return None


def _compare_panels(models_data, techniques, assembler, docs):
    """Dataset analyses with every model overlaid, each at its last step that has them."""
    from reportgen.techniques.base import RenderContext

    panels = []
    for t in techniques:
        if t.scope != "dataset" or t.render_compare is None:
            continue
        series = []
        for model in models_data:
            for step in reversed(model.steps):
                summ = _panel_summary(assembler, step, t, None) if step.dataset_panels else None
                if summ is not None:
                    series.append((f"{model.name} ({step.step})", summ))
                    break
        if not series:
            continue
        ctx = RenderContext(model="all models", step="last", class_names=())
        panel = assembler.derived_panel(
            t, None, series, lambda s, t=t: t.render_compare(s, None, ctx), "across models",
            docs / "artifacts" / "_compare")
        if panel is not None:
            panels.append(panel)
    return panels


def _build_site_if_changed(project: Path, site_dir: Path, build_site) -> bool:
    """Run MkDocs unless the generated project is byte-for-byte what built `site_dir` last
    time (its digest is kept in the site's marker); True when the site was rebuilt.

    Pages and inputs are small and hashed by content; figures are hard links into the
    content-addressed store, so their inode, size and mtime identify them.
    """
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(p for p in project.rglob("*") if p.is_file()):
        rel = path.relative_to(project).as_posix()
        digest.update(rel.encode() + b"\0")
        stat = path.stat()
        if stat.st_nlink > 1:   # a hard link into the store: its identity is enough
            digest.update(f"{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}".encode())
        else:
            digest.update(path.read_bytes())
    marker = site_output.read_marker(site_dir) or {}
    if (site_dir / "index.html").is_file() and marker.get("digest") == digest.hexdigest():
        console.notice(f"{site_dir}/ is up to date (no page or figure changed).")
        return False
    build_site(project, site_dir, marker={"digest": digest.hexdigest()})
    return True


def _print_summary(summary: BuildSummary, options: BuildOptions) -> None:
    console.echo(f"computed {summary.computed} · reused {summary.reused} · "
                 f"figures drawn {summary.drawn} · failed {len(summary.failed)}")
    for line in summary.skipped:
        console.echo(f"skipped: {line}")
    for line in summary.failed:
        console.echo(f"FAILED: {line}")
    if summary.site in ("built", "unchanged"):
        console.echo(f"site: {options.site_dir}/index.html")
