"""`reportgen build`: the pipeline, read top to bottom.

    the site folder: what a killed build left beside it recovered (reportgen.pages.site_output)
    options -> BuildSettings, checked once (reportgen.commands.build_settings)
    the site folder: refused unless every file in it is one reportgen wrote, locked
    the models it keeps: every model the site shows that --models did not choose, unless
      --drop-model or --only removes it (reportgen.commands.site_models)
    for each model:
      plan from the parameter file alone: its description, the variants of every technique,
        the techniques that do not apply (reportgen.engine.step.plan), cache keys from the
        weights files' digests (remembered between builds: reportgen.engine.digests)
      for each chosen step: compute what the artifact store lacks (reportgen.engine.step);
        the Keras model is built, and TensorFlow imported, only if something is missing
      site data: figures drawn from stored arrays, numbers from the store
        (reportgen.commands.site_assembly, reportgen.pages.assemble); a stored result found
        damaged on the way is computed or drawn again (reportgen.cache.integrity)
    the kept models: the same, at the steps the site showed, so drawn from the store; one whose
      results the store lost is left out, said in one line
    the site: unless it already shows exactly this (reportgen.commands.site_changes), figures
      linked into a private MkDocs project, pages rendered, MkDocs run into a staging folder
      that replaces the site folder (reportgen.pages.render, reportgen.pages.site_output)

Before it starts, the build says per model and in all how long it should take when nothing is
stored (reportgen.commands.build_plan, from costs measured per kind of work:
reportgen.commands.build_time); the progress bars show the rest of the build's time, corrected
by how the computed steps went, the summary the time it took, and the costs this build measured
are kept for the next estimate.

A broken model or checkpoint is reported (in the summary and on Home) and skipped; the rest
still builds; the exit code is 1 at the end. A build that builds nothing leaves the previous
site as it was. Each build works in its own folder under .reportgen/builds/
(reportgen.commands.work_folder), so builds in one project folder never share files.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from reportgen import console
from reportgen.cache.backends import check_location, open_store
from reportgen.capsnet import model_words
from reportgen.catalog import Catalog, ModelEntry
from reportgen.commands import site_assembly as assembly
from reportgen.commands.build_settings import (DEFAULT_IMAGES, BuildOptions,  # noqa: F401
                                               BuildSettings, load_build_config, select_steps,
                                               settle)
from reportgen.commands import build_time, cpu_load
from reportgen.commands.build_checks import build_batch, check_options
from reportgen.data import held_out
from reportgen.commands.work_folder import CALIBRATION_FILE, DIGESTS_FILE, WORK_ROOT, WorkFolder
from reportgen.engine import step as engine_step
from reportgen.engine.digests import DigestMemo
from reportgen.engine.model import ModelHandle
from reportgen.errors import ReportgenError, StoreError
from reportgen.model_folder import ModelFolder
from reportgen.os_errors import DISK_ERRORS
from reportgen.pages import site_output
from reportgen.pages.assemble import MissingResult
from reportgen.results.capsules_vs_cnns import model_kind
from reportgen.settings.families import family_of
from reportgen.training.checkpoints import nonfinite_step_error, nonfinite_weights
from reportgen.training.run_info import training_run
from reportgen.commands.run_group import read_group


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
    holding: str | None = None      # what the site now holds (reportgen.commands.site_models)
    seconds: float = 0.0            # the build's wall time
    estimate: float | None = None   # what the plan said a cold build would take

    @property
    def ok(self) -> bool:
        return not self.failed

    def fail(self, subject: str, reason: str) -> None:
        self.failures.append((subject, reason))
        self.failed.append(f"{subject}: {reason}")


def run_build(*, models_dir=None, scheduler=None, **kwargs) -> BuildSummary:
    """Build the analyses and the site; exits 1 at the end if anything failed, 2 (a
    ReportgenError) when nothing could be built (the previous site is then left as it was).
    `scheduler` (tcp://HOST:PORT or local:N) computes the steps on a Dask cluster."""
    options = BuildOptions(**kwargs)
    summary = build(Catalog(models_dir), options, scheduler=scheduler)
    _print_summary(summary, options)
    if summary.steps_built == 0:
        where = f"; {options.site_dir}/ was left as it was" if options.render_site else ""
        listed = [f"{n} {word}" for n, word in ((len(summary.failed), "failed"),
                                                  (len(summary.skipped), "skipped")) if n]
        if listed:      # each with its reason in the summary just printed: not repeated here
            raise ReportgenError(f"Nothing was built ({' and '.join(listed)}, listed above)"
                                 f"{where}.", fix="fix the problems listed above and build "
                                                  "again")
        raise ReportgenError(f"Nothing was built{where}.", received="no step was chosen",
                             fix="choose saved steps with --steps (`reportgen models` lists "
                                 "them)")
    if not summary.ok:
        raise SystemExit(1)
    return summary


def build(catalog: Catalog, options: BuildOptions | BuildSettings,
          scheduler: str | None = None) -> BuildSummary:
    """Compute, draw, render and (unless `render_site` is off) replace the site folder.

    User errors the options reveal, and an unusable site folder, raise ReportgenError before
    any model is loaded; a StoreError raised later stops the build at once. The site folder is
    replaced only when at least one step was built.
    """
    started = time.monotonic()
    # how busy the machine is, looked at from now until the plan is said (its estimate)
    with cpu_load.LoadSampler(every_s=0.05).start() as watch:
        return _build(catalog, options, scheduler, started, watch)


def _build(catalog, options, scheduler, started: float, watch) -> BuildSummary:
    if options.render_site:
        # first: a site a killed build moved away comes back even if this build is refused
        site_output.recover_unless_busy(options.site_dir)
    settings = options if isinstance(options, BuildSettings) else settle(options)
    if scheduler:
        from reportgen.cluster.scheduler import parse_scheduler

        parse_scheduler(scheduler)          # a typo is said before anything else happens
    store = open_store(settings.cache_dir)
    check_location(store, models_dir=catalog.root,
                   site_dir=settings.site_dir if settings.render_site else None)
    if scheduler:
        from reportgen.cluster.runner import check_store_for_cluster

        check_store_for_cluster(store)      # before any model's data is read
    summary = BuildSummary()
    entries = _match_models(catalog, settings.models, summary)
    check_options(entries, settings)        # against each model's steps and data
    site_dir = Path(settings.site_dir)
    # the models the site shows that this build keeps (or drops as asked): refused here, before
    # anything is written, when --drop-model names a model the site does not show
    held = _site_models(catalog, entries, settings, store)
    site_rules = dict(models_dir=catalog.root, cache_dir=store.root, work_dir=WORK_ROOT)
    with ExitStack() as stack:
        if settings.render_site:
            site = site_output.check_site_folder(site_dir, **site_rules)
        cluster = None
        if scheduler:           # reached (or said unreachable) before any folder is made
            from reportgen.cluster.runner import ClusterCompute

            cluster = stack.enter_context(ClusterCompute.open(scheduler, store))
        if settings.render_site:
            if _lock_site(stack, site, settings):
                # while this build waited, the other one may have left the folder otherwise
                site_output.check_site_folder(site_dir, **site_rules)
                held = _site_models(catalog, entries, settings, store)
                watch.reset()               # ... and its work no longer shares the machine
            site_output.recover_leftovers(site)
        stack.enter_context(store.shared_lock())
        if settings.project_dir:
            project = Path(settings.project_dir)
            if (project / "docs").exists():
                shutil.rmtree(project / "docs")
        else:
            project = stack.enter_context(WorkFolder()) / "mkdocs"
        _Build(settings, store, project, summary, cluster, watch, held).run(entries)
    summary.seconds = time.monotonic() - started
    return summary


def _shown_on_site(reason: str) -> str:
    """A failure reason as the site shows it: paths under the working folder relative, under
    the home folder from ~ (a published site need not show how its author's disk is laid out;
    the console keeps the full paths)."""
    for folder, shown in ((Path.cwd(), ""), (Path.home(), "~" + os.sep)):
        prefix = str(folder).rstrip(os.sep) + os.sep
        if len(prefix) > 1:
            reason = reason.replace(prefix, shown)
    return reason


def _lock_site(stack: ExitStack, site: Path, settings: BuildSettings) -> bool:
    """Hold the site folder's lock for the build; True when another build held it first (this
    one waited for it)."""
    try:
        stack.enter_context(site_output.SiteLock(site, wait=False, label=settings.site_dir))
        return False
    except ReportgenError:
        if settings.no_wait:
            raise
    stack.enter_context(site_output.SiteLock(site, wait=True, label=settings.site_dir))
    return True


def _site_models(catalog, entries, settings: BuildSettings, store):
    """Which models the site will hold (reportgen.commands.site_models): None when this build
    writes no site."""
    from reportgen.commands import site_models

    if not settings.render_site:
        return None
    scan = getattr(catalog, "scan", None)
    valid = {e.name: e for e in scan()[0]} if callable(scan) else {e.name: e for e in entries}
    held = site_models.choose(settings.site_dir, store, [e.name for e in entries], list(valid),
                              settings.drop_models, settings.only)
    held.entries = {name: valid[name] for name in held.kept}
    return held


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


def _plan(name: str, params, steps, settings: BuildSettings, inputs: int, chosen):
    """What this model's build will do (printed before it starts; reportgen.commands.build_plan);
    `chosen` the techniques' plan for it (reportgen.engine.step.plan): the estimate counts the
    dataset analyses that apply to it, not those skipped as not applicable."""
    from reportgen.capsnet.param_count import count_trainable_params
    from reportgen.commands.build_plan import ModelPlan, dataset_analyses
    from reportgen.commands.build_settings import default_techniques, fitted_eval_images

    analysed = [s for s in steps if settings.analysed(s, steps)]
    trainable = count_trainable_params(params)
    family = params.family
    eval_images = settings.eval_images or fitted_eval_images(trainable, len(analysed), family)
    analyses, skipped = dataset_analyses(chosen)
    group = build_time.cost_group(family, trainable, settings.techniques, default_techniques(),
                                  skipped)
    return ModelPlan(name, steps, analysed, inputs, eval_images, settings.eval_images is None,
                     trainable, family, group, analyses)


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


class _Build:
    """One build: its settings, its store, its MkDocs project and what it has done so far."""

    def __init__(self, settings: BuildSettings, store, project: Path, summary: BuildSummary,
                 cluster=None, watch=None, held=None):
        from reportgen.pages.assemble import Assembler
        from reportgen.techniques import get_technique

        self.settings = settings
        self.techniques = [get_technique(name) for name in settings.techniques]
        self.store = store
        self.project = project
        self.docs = project / "docs"
        self.docs.mkdir(parents=True, exist_ok=True)
        self.assembler = Assembler(store, self.docs)
        self.summary = summary
        self.digests = DigestMemo(DIGESTS_FILE)
        self.cluster = cluster         # reportgen.cluster.runner.ClusterCompute, or None
        self._prepared: dict[str, _Prepared] = {}
        calibration, damaged = build_time.read_calibration(CALIBRATION_FILE)
        if damaged:
            console.notice(f"Ignoring {CALIBRATION_FILE} ({damaged}): the time estimate uses "
                           f"the reference costs, and this build's measurements replace it.")
        self.clock = build_time.BuildClock(build_time.Costs(
            calibration, load=None if watch is None else watch.expected_slowdown))
        self.keras_seconds = 0.0       # building Keras models (the "model" kind of work)
        self.import_seconds = 0.0      # importing TensorFlow (the "build" kind)
        self.attributed = 0.0          # seconds recorded as a model's kinds of work
        self.cold_models = 0           # models whose every step this build computed
        self.watch = watch             # the look at the machine before the plan (estimate)
        self.held = held               # reportgen.commands.site_models.SiteModels, or None
        self.left_out: list[str] = []  # kept models whose results the store no longer has

    # -- the whole build -----------------------------------------------------------------------
    def run(self, entries) -> None:
        self.clock.load.start()     # how much other work slows this build, for the next estimate
        try:
            self._run(entries)
        finally:
            self.clock.load.stop()
        self.keep_measurements()

    def _run(self, entries) -> None:
        from reportgen.pages.drawing_pool import DrawingPool, processes_for

        models = []
        try:
            self.say_plan(entries)
            if self.cluster is not None:   # the steps' results first, then the site as always
                self.cluster.compute(self, entries)
            else:                          # started with the first model that computes
                self.assembler.drawing = DrawingPool(processes_for())
            for entry in entries:
                data = self.model_or_failure(entry)
                if data is not None:
                    models.append(data)
                    self.summary.steps_built += len(data.steps)
            # the site's other models, once this build has something to show (else the site
            # stays as it was), drawn from the store; the site lists every model by name
            held = self.held if self.summary.steps_built else None
            kept = [] if held is None else list(held.entries.values())
            models += [data for data in map(self.kept_model, kept) if data is not None]
            models.sort(key=lambda m: m.name)
        finally:
            self.digests.save()
            if self.assembler.drawing is not None:
                self.assembler.drawing.close()
                self.assembler.drawing = None
        if self.settings.render_site:
            self.site(models)
        self.summary.drawn = self.assembler.drawn

    def say_plan(self, entries) -> None:
        """Each model's plan, then the whole build's estimate, before any work starts. A model
        that cannot be prepared is left out here and reported when its turn comes."""
        from reportgen.commands.build_plan import (build_seconds, start_and_site_seconds,
                                                   whole_build_line)

        plans = []
        for entry in entries:
            try:
                prepared = self.prepare(entry)
            except Exception:   # said when the build reaches the model (model_or_failure)
                continue
            if prepared is not None:
                plans.append(prepared.plan)
                console.notice(prepared.plan.line(self.clock.costs))
        if plans:
            console.notice(whole_build_line(plans, self.clock.costs))
            self.clock.total_estimate = build_seconds(plans, self.clock.costs)
            self.clock.overhead_estimate = start_and_site_seconds(plans, self.clock.costs)
            self.summary.estimate = self.clock.total_estimate
        if self.watch is not None:
            self.watch.stop()          # the estimate has looked; the clock's sampler goes on

    def keep_measurements(self) -> None:
        """What this build measured, for the next estimate on this machine
        (reportgen.commands.build_time): not from a cluster (its steps ran elsewhere); the
        start-up and the site (what no model's work accounts for) only when this build computed
        a whole model and built the site."""
        if self.cluster is not None or not self.clock.measured:
            return
        if self.summary.site == "built" and self.cold_models:
            group = build_time.build_group([p.plan.trainable_params
                                            for p in self._prepared.values()])
            self.clock.record(group, "build", self.clock.elapsed() - self.attributed, 1, 0)
        build_time.write_calibration(CALIBRATION_FILE, self.clock.calibration())

    def record(self, plan, kind: str, seconds: float, units: float) -> None:
        self.clock.record(plan.cost_group, kind, seconds, units, plan.trainable_params)
        self.attributed += seconds

    def kept_model(self, entry: ModelEntry):
        """A model the site showed that this build was not asked to build: built as usual at
        the steps the site showed, so drawn from the store; left out with one line (the others
        build on) when its results are no longer stored though nothing it is made from changed
        (reportgen.commands.site_models)."""
        from reportgen.commands import site_models

        record = self.held.kept[entry.name]
        site = self.settings.site_dir.rstrip("/")
        names = sorted([*self.held.built, *self.held.kept])
        try:
            prepared = self.prepare(entry)
            keys = [] if prepared is None else [self.keys(entry, prepared, s)
                                                for s in prepared.steps]
        except StoreError:
            raise
        except Exception:            # said when it is built (model_or_failure)
            return self.model_or_failure(entry)
        if prepared is None:
            console.notice(f"{entry.name}, shown on {site}/ until now, is left out of it: none "
                           f"of the steps it showed ({', '.join(record.get('steps', []))}) is "
                           f"saved any more; rebuild it with "
                           f"`{site_models.rebuild_command(names)}`.")
            self.left_out.append(entry.name)
            return None
        same = record.get("results") == site_models.fingerprint(keys)
        lost = site_models.missing(keys, self.store, record.get("failed", []) if same else [])
        if same and lost:
            console.notice(site_models.cleared_line(entry.name, site, self.store.root, names))
            self.left_out.append(entry.name)
            return None
        if lost:
            console.notice(f"{entry.name}, kept on {site}/: its weights, its parameters, "
                           f"reportgen's code or this build's options changed since it was "
                           f"built, so what the store lacks of it is computed.")
        return self.model_or_failure(entry)

    def model_or_failure(self, entry: ModelEntry):
        try:
            return self._model_or_failure(entry)
        finally:
            self.release(entry)

    def release(self, entry: ModelEntry) -> None:
        """Free what building `entry` held (its network and compiled passes, its evaluation
        images) before the next model is built: a build of several models holds one at a
        time, so its peak memory is its largest model's."""
        prepared = self._prepared.get(entry.name)
        if prepared is None or not prepared.handle.built:
            return
        prepared.handle.release()
        import gc

        import keras

        keras.backend.clear_session()       # Keras' global graph state of the released model
        gc.collect()                        # reference cycles of the layers, now unreachable
        _return_free_memory()

    def _model_or_failure(self, entry: ModelEntry):
        try:
            return self.model(entry)
        except StoreError:
            raise                 # not this model's fault: every other one would fail too
        except ReportgenError as exc:
            self.summary.fail(entry.name, exc.message)
            console.failure_traceback(exc)
        except Exception as exc:  # a broken model must not stop the others
            if isinstance(exc, OSError) and exc.errno in DISK_ERRORS:
                raise             # a full or read-only disk: every other model would fail too
            self.summary.fail(entry.name, _one_line(exc))
            console.failure_traceback(exc)
        return None

    # -- one model -----------------------------------------------------------------------------
    def prepare(self, entry: ModelEntry) -> _Prepared | None:
        """What a model's steps are computed from (None: no trained steps); made once per
        model, read by the cluster's plan and by the site."""
        if entry.name in self._prepared:
            return self._prepared[entry.name]
        from reportgen.data.datasets import load_dataset
        from reportgen.data.inputs import make_inputs
        from reportgen.data.label_arity import check_label_arity, model_label_arity

        settings = self.settings
        shown = None if self.held is None else self.held.steps_of(entry.name)
        if shown is None:
            steps = settings.chosen_steps(entry.steps)
        else:           # a kept model: at the steps the site showed that are still saved
            steps = [s for s in entry.steps if str(s) in shown]
        if not steps:
            return None
        # read once, as the steps were chosen: a hand-edited value fails the model before any
        # step is built, and records a training run writes during the build (steps this build
        # does not show) stay out of its charts
        history = entry.history()
        started = time.monotonic()
        params = entry.params
        handle = ModelHandle(params, build=self._keras_model)
        chosen = engine_step.plan(self.techniques, handle)
        dataset = load_dataset(params.dataset)
        # its test images and evaluation labels must carry as many classes as it predicts
        check_label_arity(dataset, entry.name, model_label_arity(params))
        inputs = make_inputs(dataset, list(settings.images), list(settings.files),
                             list(settings.transforms), params.input_shape)
        for line in assembly.warn_polarity(inputs, dataset):
            console.notice(line)
        plan = _plan(entry.name, params, steps, settings, len(inputs), chosen)
        evaluation = assembly.evaluation_set(dataset, plan.eval_images)
        batch = build_batch(params, settings.batch_size, entry.name)   # fits in memory
        prepared = _Prepared(steps, handle, chosen, dataset, inputs, evaluation,
                             plan.with_eval_images(len(evaluation.y)),
                             time.monotonic() - started, batch, history)
        self._prepared[entry.name] = prepared
        return prepared

    def keys(self, entry: ModelEntry, prepared: _Prepared, step) -> engine_step.StepKeys:
        return engine_step.step_keys(
            prepared.handle.digest, entry.weights_path(step), prepared.chosen.variants,
            prepared.inputs, prepared.evaluation.digest,
            self.settings.analysed(step, prepared.steps), digest=self.digests.digest,
            last=step == prepared.steps[-1])

    def model(self, entry: ModelEntry):
        from reportgen.data.label_arity import model_label_arity
        from reportgen.pages.sitedata import ModelData

        settings = self.settings
        prepared = self.prepare(entry)
        if prepared is None:
            self.summary.skipped.append(f"{entry.name}: no trained steps; train it with "
                                        f"`reportgen train {entry.name}`")
            return None
        started, keras_before = time.monotonic(), self.keras_seconds
        params = entry.params
        steps, handle, chosen = prepared.steps, prepared.handle, prepared.chosen
        dataset, inputs, evaluation = prepared.dataset, prepared.inputs, prepared.evaluation
        plan = prepared.plan
        gallery = assembly.input_gallery(self.assembler, entry.name, dataset, inputs)

        steps_data, errors = [], []
        # this model's counts on its bar (the summary's run over every model of the build)
        computed_before, reused_before = self.summary.computed, self.summary.reused
        steps_seconds, cold = 0.0, True       # cold: every step computed everything
        with console.progress(len(steps), f"build {entry.name}", unit="step") as bar:
            for step in steps:
                step_started = time.monotonic()
                try:
                    data, step_cold = self.step(entry, handle, chosen.variants, step,
                                                settings.analysed(step, steps), inputs,
                                                dataset, evaluation, plan,
                                                last=step == steps[-1])
                    steps_data.append(data)
                    cold = cold and step_cold
                except StoreError:
                    raise
                except ReportgenError as exc:
                    self.summary.fail(f"{entry.name} step {step}", exc.message)
                    errors.append(f"step {step}: {exc.message}")
                    console.failure_traceback(exc)
                    cold = False
                steps_seconds += time.monotonic() - step_started
                bar.update(1)
                shown = {"computed": self.summary.computed - computed_before,
                         "reused": self.summary.reused - reused_before}
                if self.clock.measured:      # once a step was computed: the time it says
                    shown["build left"] = build_time.duration(self.clock.remaining())
                bar.set_postfix(shown, refresh=False)
        trainable, architecture = assembly.model_facts(handle, self.store)
        try:
            sources = assembly.imported_sources(entry)
        except ReportgenError as exc:     # the pages say so; the analyses stand
            sources = []
            errors.append(exc.message)
        training = training_run(entry)
        try:
            notes = ModelFolder.at(entry.path).notes()
        except ReportgenError as exc:     # the pages say so; the rest stands
            notes = ""
            errors.append(exc.message)
        try:
            group = read_group(entry)
        except ReportgenError as exc:     # listed as a model of its own; its pages say why
            group = None
            errors.append(exc.message)
        history = prepared.history
        accs = [r["val_accuracy"] for r in history if r.get("val_accuracy") is not None]
        data = ModelData(
            name=entry.name, dataset=dataset.source, description=params.description,
            params=trainable, class_names=list(dataset.class_names), architecture=architecture,
            history=history, steps=steps_data, inputs=gallery,
            latest_val_accuracy=accs[-1] if accs else None,
            best_val_accuracy=max(accs) if accs else None, errors=errors,
            not_applicable=assembly.not_applicable(chosen), kind=model_kind(params),
            training=training, sources=sources, labels_per_image=model_label_arity(params),
            held_out=held_out.describe(dataset, len(evaluation.y)),
            held_out_warning=held_out.older_split_warning(dataset, training),
            test_images=len(dataset.y_test),
            citations=list(family_of(params).citations_for(params)),
            leaves_out=list(handle.description.leaves_out),
            routing_iterations=handle.description.routing_iterations,
            words=model_words.words_of(handle.description), group=group, notes=notes)
        built = {s: self.assembler.step_keys[(entry.name, str(s))] for s in steps
                 if (entry.name, str(s)) in self.assembler.step_keys}
        filmstrip_started = time.monotonic()
        self.repairing(entry, handle, chosen.variants, inputs, evaluation, built,
                       lambda: assembly.filmstrip_frames(self.assembler, entry.name,
                                                         handle.description, dataset,
                                                         chosen.variants, inputs, steps_data))
        filmstrip = time.monotonic() - filmstrip_started
        data.trend_panels = assembly.trend_panels(self.assembler, entry.name,
                                                  handle.description, dataset, chosen.variants,
                                                  steps_data)
        # the model's own work: preparing, its Keras model, gallery, architecture, trends
        own = (prepared.seconds + time.monotonic() - started - steps_seconds - filmstrip
               + self.keras_seconds - keras_before)
        estimate = plan.seconds(self.clock.costs, {"model": 1})
        if cold:
            self.cold_models += 1
            self.record(plan, "model", own, 1)
            self.record(plan, "input", filmstrip, 0)    # a frame per (step, input)
        # its wall time outside its steps (they said theirs), its preparation included
        self.clock.finished(estimate, own + filmstrip if cold else None,
                            prepared.seconds + time.monotonic() - started - steps_seconds)
        return data

    def _keras_model(self, params):
        """The Keras model (TensorFlow imported here, at the first model that needs one);
        Keras' global state is cleared between models (`release`), which otherwise slow down
        one after another."""
        from reportgen.engine.model import build_keras_model

        if self.assembler.drawing is not None:   # something to compute: something to draw
            self.assembler.drawing.start()
        started = time.monotonic()
        if "tensorflow" not in sys.modules:     # its import is the build's, not the model's
            from reportgen.tf_quiet import import_tensorflow_quietly

            import_tensorflow_quietly()
            self.import_seconds += time.monotonic() - started
            started = time.monotonic()
        try:
            return build_keras_model(params)
        finally:
            self.keras_seconds += time.monotonic() - started

    # -- one step ------------------------------------------------------------------------------
    def step(self, entry, handle, variants, step, analysed: bool, inputs, dataset, evaluation,
             plan, last: bool = False):
        """Compute what the store lacks for one step, then its site data; (its StepData,
        whether it computed everything it shows)."""
        started, keras_before = time.monotonic(), self.keras_seconds + self.import_seconds
        import_before = self.import_seconds
        weights = entry.weights_path(step)
        # a step whose weights are not numbers fails here, whatever the store holds of it
        problem = self.digests.fact(weights, "nonfinite", nonfinite_weights)
        if problem is not None:
            raise nonfinite_step_error(weights, problem)
        keys = engine_step.step_keys(handle.digest, weights, variants, inputs, evaluation.digest,
                                     analysed, digest=self.digests.digest, last=last)
        # computed on the cluster: found stored here, counted as computed (or its failure)
        remote = 0 if self.cluster is None else self.cluster.computed(entry.name, step)
        ctx = assembly.context(entry.name, str(step), handle.description, dataset)
        counts = self.compute(entry, handle, variants, step, inputs, evaluation, keys,
                              lambda t, p, key, arrays: self.assembler.draw_ahead(t, p, key,
                                                                                  arrays, ctx))
        self.summary.computed += remote
        self.summary.reused += counts.reused - remote
        drawing: dict[str, float] = {}
        data = self.repairing(entry, handle, variants, inputs, evaluation, {step: keys},
                              lambda: assembly.step_data(self.assembler, entry.name, step,
                                                         handle.description, variants, inputs,
                                                         dataset, keys, drawing))
        self.report_failed(entry, step, variants, keys)
        cold = counts.computed > 0 and counts.reused == 0
        work = plan.step_work(analysed)
        keras = self.keras_seconds + self.import_seconds - keras_before
        wall = time.monotonic() - started
        if cold:
            self.time_step(plan, work, wall, counts.seconds, drawing, keras)
        self.clock.finished(plan.seconds(self.clock.costs, work), wall - keras if cold else None,
                            wall - (self.import_seconds - import_before))
        return data, cold

    def report_failed(self, entry, step, variants, keys: engine_step.StepKeys) -> None:
        """Each technique that failed at this step (its cards say why; the rest was built),
        once per variant in the summary and on Home: the exit code is then 1."""
        found: dict[tuple, list[str]] = {}
        for group in (keys.checkpoint, keys.dataset):
            for (name, p), key in group.items():
                if key in keys.failed:
                    found.setdefault((name, p), []).append(keys.failed[key])
        for (name, p, _), key in keys.inputs.items():
            if key in keys.failed:
                found.setdefault((name, p), []).append(keys.failed[key])
        titles = {(t.name, p): t.title_of(p) for t, p in variants}
        for (name, p), reasons in found.items():
            inputs = f" (for {len(reasons)} inputs)" if len(reasons) > 1 else ""
            self.summary.fail(f"{entry.name} step {step}",
                              f"{titles.get((name, p), name)} failed{inputs}: {reasons[0]}")

    def time_step(self, plan, work: dict, wall: float, computing: dict, drawing: dict,
                  keras: float) -> None:
        """A computed step's time by kind of work: the inputs' probe passes and figures per
        input; the dataset analyses per evaluation image and their figures per analysed step
        (at a step without them, the accuracy pass is the step's); the rest per step, less
        `keras`: building the Keras model (the model's) and importing TensorFlow (the
        build's)."""
        per_input = computing.get("inputs", 0.0) + drawing.get("inputs", 0.0)
        analyses = computing.get("dataset", 0.0) if work["eval_image"] else 0.0
        figures = drawing.get("dataset", 0.0) if work["analysed_step"] else 0.0
        self.record(plan, "input", per_input, work["input"])
        self.record(plan, "eval_image", analyses, work["eval_image"])
        self.record(plan, "analysed_step", figures, work["analysed_step"])
        self.record(plan, "step", wall - keras - per_input - analyses - figures, 1)

    def compute(self, entry, handle, variants, step, inputs, evaluation, keys, analysed=None):
        """What the store lacks of one step, computed and counted (`analysed`: see
        engine_step.compute_step)."""
        counts = engine_step.compute_step(
            handle, entry.weights_path(step), variants, inputs, evaluation.as_tuple(), keys,
            self.store, self.prepare(entry).batch, {"model": entry.name, "step": str(step)},
            analysed, self.settings.technique_seconds)
        self.summary.computed += counts.computed
        return counts

    def repairing(self, entry, handle, variants, inputs, evaluation, steps: dict, work):
        """`work()` (drawing from stored arrays); when a stored result of one of `steps`
        ({step: its StepKeys}) turns out damaged or gone, every stored result of that step is
        read (the damaged ones are removed, each reported once by the store), what is missing
        is computed again, and `work()` runs again: so any number of damaged results are
        repaired in this build, at the cost of one extra pass per damaged step. A result that
        is still unreadable once computed again fails the step (MissingResult)."""
        repaired: set[str] = set()
        while True:
            try:
                return work()
            except MissingResult as exc:
                step = next((s for s, keys in steps.items() if exc.key in _all_keys(keys)),
                            None)
                if step is None or exc.key in repaired:
                    raise
                if exc.key not in self.store.damage.damaged:   # gone rather than damaged
                    console.notice(f"{entry.name} step {step}: {exc.what}; computing it "
                                   f"again.")
                keys = steps[step]
                for key in _all_keys(keys) - repaired:
                    if self.store.has_arrays(key):
                        self.store.get_arrays(key)      # read: removed if damaged
                repaired |= _all_keys(keys)
                counts = self.compute(entry, handle, variants, step, inputs, evaluation, keys)
                self.summary.reused -= counts.computed     # counted as reused by the plan

    # -- the site ------------------------------------------------------------------------------
    def site(self, models) -> None:
        from reportgen.pages.sitedata import BuildFailure, SiteData

        from reportgen.commands import paper_figures, site_changes, site_models

        if self.summary.steps_built == 0:
            self.summary.site = "kept"   # nothing to show: the previous site stays as it was
            return
        settings = self.settings
        site = SiteData(
            title=settings.title, models=models,
            techniques=[{"name": t.name, "title": t.title, "layer": t.layer,
                         "description": t.description, "experimental": t.experimental,
                         "citations": list(t.citations)}
                        for t in self.techniques],
            compare_panels=assembly.compare_panels(self.assembler, models, self.techniques),
            failures=[BuildFailure(subject, _shown_on_site(reason))
                      for subject, reason in self.summary.failures])
        paper_figures.attach(self.assembler, models)   # before the digest: it lists them
        site_dir = Path(settings.site_dir)
        digest = site_changes.site_digest(site, self.assembler, settings.templates_dir)
        paper_figures.remember_site(self.store, digest, site)   # what `reportgen export` reads
        self.summary.holding = self.holding(models)
        if site_changes.is_up_to_date(site_dir, digest):
            console.notice(f"{settings.site_dir}/ is up to date (no page or figure changed).")
            self.summary.site = "unchanged"
            return
        from reportgen.pages.render import build_site, render_site

        self.assembler.place_files()
        render_site(site, self.docs,
                    Path(settings.templates_dir) if settings.templates_dir else None)
        build_site(self.project, site_dir,
                   marker=site_changes.marker_entries(
                       digest, site_models.record(models, self.assembler.step_keys)))
        self.summary.site = "built"


    def holding(self, models) -> str | None:
        """The line saying what the site now holds, once it holds a model kept from the
        previous build or lost one (None otherwise: it shows what was asked)."""
        from reportgen.commands import site_models

        held = self.held
        if held is None:
            return None
        site = self.settings.site_dir.rstrip("/")
        for name in held.gone:
            console.notice(f"{name}, shown on {site}/ until now, is no longer a valid model "
                           f"under the models folder (`reportgen models` says why): left out "
                           f"of it.")
        if held.unrecorded:
            console.notice(f"{site}/ was built by an older reportgen that did not record its "
                           f"models: it now shows the models of this build only.")
        shown = [m.name for m in models]
        kept = [n for n in shown if n in held.kept]
        built = [n for n in shown if n not in held.kept]
        return site_models.holding_line(site, built, kept, held.dropped)


def _return_free_memory() -> None:
    """Give the memory the released model's arrays freed back to the system (glibc's
    malloc_trim): freed blocks stay in the allocator's heaps otherwise, and the next model's
    arrays of other sizes land beside them, so the resident size grew model after model."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):       # not glibc: nothing to trim this way
        pass


def _all_keys(keys: engine_step.StepKeys) -> set[str]:
    """Every stored result of one step."""
    return {*keys.inputs.values(), *keys.checkpoint.values(), *keys.dataset.values(),
            keys.evaluation}


@dataclass
class _Prepared:
    steps: list
    handle: ModelHandle
    chosen: engine_step.Plan
    dataset: object
    inputs: list
    evaluation: object
    plan: object = None             # reportgen.commands.build_plan.ModelPlan
    seconds: float = 0.0            # spent preparing (loading the dataset, the inputs)
    batch: int = 16                 # images per probe pass (--batch-size, or what fits)
    # the training history as the steps were chosen (records saved later stay out of the site)
    history: list = field(default_factory=list)


def _print_summary(summary: BuildSummary, options) -> None:
    console.echo(f"computed {summary.computed} · reused {summary.reused} · "
                 f"figures drawn {summary.drawn} · failed {len(summary.failed)}")
    for line in summary.skipped:
        console.echo(f"skipped: {line}")
    for line in summary.failed:
        console.echo(f"FAILED: {line}")
    if summary.site in ("built", "unchanged"):
        if summary.holding:
            console.echo(summary.holding)
        console.echo(f"site: {options.site_dir}/index.html")
    if summary.estimate is not None:
        from reportgen.pages.views import duration

        console.echo(f"time: {duration(summary.seconds)} (estimated before it "
                     f"started: about {build_time.duration(summary.estimate)} if nothing was "
                     f"cached)")
