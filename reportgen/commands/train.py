"""`reportgen train`: resolve the model(s) and options, then hand over to the trainer — here,
one model after another, or on a Dask cluster (`--scheduler`), one model per worker; or the
runs of a group of one model over seeds and settings (`--seeds`, `--sweep`:
reportgen.commands.run_group), one after another."""

from __future__ import annotations

import sys

import click

from reportgen.catalog import Catalog
from reportgen.cluster.training import TrainOutcome, exit_with_parent
from reportgen.console import echo

_GLOB = set("*?[")


def run_train(models_dir, name: str, options: dict, scheduler: str | None = None,
              seeds: str | None = None, sweeps: tuple[str, ...] = ()) -> None:
    if _default("seed"):
        options = {**options, "seed": None}  # --resume keeps the run's seed unless one is given
    exit_with_parent()                       # started by a cluster worker: ends with it
    catalog = Catalog(models_dir)
    if seeds is not None or sweeps:
        _train_group(catalog, name, options, seeds, list(sweeps), scheduler)
        return
    if scheduler:
        from reportgen.cluster.scheduler import parse_scheduler

        parse_scheduler(scheduler)           # a typo is said before anything else happens
    if _GLOB.isdisjoint(name):
        entries = [catalog.get(name)]        # validates params.toml before TensorFlow
    else:
        entries = catalog.match(name)
        for entry in entries:
            entry.params
    if not scheduler:                        # a cluster's workers have memory of their own
        for entry in entries:
            check_batch_memory(entry, options)
    if scheduler:
        from reportgen.cluster.training import train_on_cluster

        outcomes = train_on_cluster(scheduler, catalog.root, [e.name for e in entries], options)
        failed = [o for o in outcomes if o.error]
        for o in sorted(outcomes, key=lambda o: o.model):
            if not o.error:
                echo(f"{o.model}: last step {o.last_step}, validation accuracy "
                     f"{o.val_accuracy:.4f}; weights in {catalog.root / o.model}/ "
                     f"({o.seconds:.0f} s on {o.worker})")
    else:
        failed = []
        for entry in entries:
            _attempt(entry, options, failed, alone=len(entries) == 1)
    _report_failures(failed)


def _attempt(entry, options: dict, failed: list, alone: bool) -> None:
    """Train `entry`; a failure of one model among several is kept in `failed` (its traceback
    with --debug), the others go on."""
    try:
        _train_here(entry, options)
    except Exception as exc:
        if alone:
            raise
        from reportgen.console import failure_traceback
        from reportgen.errors import ReportgenError

        failure_traceback(exc)

        message = exc.message if isinstance(exc, ReportgenError) else \
            " ".join(f"{type(exc).__name__}: {exc}".split())
        failed.append(TrainOutcome(entry.name, error=message))


def _report_failures(failed: list) -> None:
    for f in failed:
        echo(f"FAILED: {f.model}: {f.error}")
    if failed:
        from reportgen.errors import EXIT_PARTIAL_FAILURE

        sys.exit(EXIT_PARTIAL_FAILURE)


# the train options a sweep of these params.toml keys would contradict
_OPTION_OF_KEY = {"training.epochs": "epochs", "training.batch_size": "batch_size",
                  "training.save_every": "save_every", "training.learning_rate": "learning_rate",
                  "dataset": "data"}


def _train_group(catalog: Catalog, name: str, options: dict, seeds: str | None,
                 sweeps: list[str], scheduler: str | None) -> None:
    """A group of runs of model `name` (reportgen.commands.run_group), one after another:
    planned and checked first, then each run trained or resumed as `train --resume` does one,
    a finished one skipped; one line per run says which of how many."""
    from reportgen.commands import run_group
    from reportgen.errors import ReportgenError
    from reportgen.settings.sweep import parse_seeds

    refused = ("--scheduler" if scheduler else "--fresh" if options.get("fresh") else
               "a glob" if not _GLOB.isdisjoint(name) else None)
    if refused:
        raise ReportgenError(f"A group (--seeds, --sweep) cannot take {refused}.",
                             fix="train the group of one model alone; start one run over with "
                                 "`reportgen train RUN --fresh`")
    base = catalog.get(name)
    runs = run_group.plan_group(catalog.root, base,
                                parse_seeds(seeds) if seeds is not None else None,
                                sweeps, options.get("seed"))
    for key in runs[0].settings:
        option = _OPTION_OF_KEY.get(key)
        if option and options.get(option) is not None:
            flag = "--" + option.replace("_", "-")
            raise ReportgenError(f"{flag} and --sweep {key} set the same thing.",
                                 fix=f"leave out {flag}, or the sweep of {key}")
    for run in runs:                    # the batch of every run fits, before anything is written
        recorded = _recorded_batch(run.folder) if run.folder.history() else None
        check_params_batch(run.name, run.params, options.get("batch_size") or recorded)
    run_group.create_runs(runs)
    failed = []
    for i, run in enumerate(runs, 1):
        entry = catalog.get(run.name)
        said = f"Run {i} of {len(runs)}: {run.name} ({run.words()})"
        done = run_group.finished_at(entry, options.get("epochs"), options.get("batch_size"),
                                     options.get("until_accuracy"))
        if done is not None:
            echo(f"{said}: finished at step {done}, skipped.")
            continue
        steps = entry.steps
        echo(f"{said}: " + (f"continuing from step {steps[-1]}." if steps else "training."))
        _attempt(entry, {**options, "seed": run.seed, "resume": True}, failed, alone=False)
    _report_failures(failed)


def _train_here(entry, options: dict) -> None:
    from reportgen.os_errors import said_in_one_line
    from reportgen.training.trainer import TrainOptions, train

    with said_in_one_line(lambda: _step_bytes(entry), path=entry.path,
                          fix="free space on that disk (the size needed is what one saved "
                              "step writes), or move the models folder to another disk "
                              "(--models-dir)"):
        history = train(entry, TrainOptions(**options))
    last = history[-1]
    echo(f"{entry.name}: last step {last['step']}, validation accuracy "
         f"{last['val_accuracy']:.4f}; weights in {entry.path}/")


def check_batch_memory(entry, options: dict) -> None:
    """Refuse, before anything is written, a batch whose activations and training state do
    not fit in the memory available now, less a margin (reportgen.capsnet.footprint), saying
    the largest that does. The batch is the one the run will use: --batch-size, else
    (resuming) the run's own, else params.toml's."""
    from reportgen.training.run_info import training_run

    recorded = training_run(entry)["batch_size"] if options.get("resume") else None
    check_params_batch(entry.name, entry.params, options.get("batch_size") or recorded)


def check_params_batch(name: str, params, batch: int | None) -> None:
    """check_batch_memory for model `name` of `params` at `batch` (None: params.toml's)."""
    from reportgen.capsnet.footprint import batch_refusal, largest_batch

    batch = batch or params.training.batch_size
    fits = largest_batch(params, training=True)
    if batch > fits:
        raise batch_refusal(params, batch, f"training {name}",
                            f"train with --batch-size {fits} (the largest that fits)"
                            if fits else "make the layers in params.toml smaller")


def _recorded_batch(folder) -> int | None:
    from reportgen.training.run_info import training_run

    return training_run(folder)["batch_size"]


def _step_bytes(entry) -> int:
    """What one saved step writes: its weights and the optimizer's state, as large as the last
    step's files, or (none saved yet) float32 weights and Adam's two moments."""
    steps = entry.steps
    files = [entry.weights_path(steps[-1]), entry.state_path] if steps else []
    sizes = [f.stat().st_size for f in files if f.is_file()]
    if sizes:
        return sum(sizes)
    from reportgen.capsnet.param_count import count_trainable_params

    return 3 * 4 * count_trainable_params(entry.params)


def _default(option: str) -> bool:
    """True when the command line left `option` at its default (not typed by the user)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return False
    return ctx.get_parameter_source(option) == click.core.ParameterSource.DEFAULT
