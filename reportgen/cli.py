"""The `reportgen` command line: click options only; each command imports its work lazily so
that `reportgen --help` never imports TensorFlow."""

from __future__ import annotations

import os
import sys

import click

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's C++ banner off the terminal


class _Group(click.Group):
    """Turns errors into one line on stderr instead of a traceback (`--debug` shows it), usage
    errors (a mistyped option) too.

    Exit codes: 2 for a user error (ReportgenError), 1 for a partial failure (raised by the
    command itself) or an unexpected error, 130 for Ctrl-C.
    """

    def resolve_command(self, ctx, args):
        name, command, rest = super().resolve_command(ctx, args)
        # `build` imports TensorFlow itself, only when a result is missing (a rebuild with
        # everything stored never does); `demo` after checking its site folder; train always,
        # but on a cluster (its workers train; the scheduler is reached first).
        if name == "train" and not {"-h", "--help"} & set(rest) \
                and not any(arg.startswith("--scheduler") for arg in rest):
            from reportgen.tf_quiet import import_tensorflow_quietly

            import_tensorflow_quietly()
        return name, command, rest

    def make_context(self, info_name, args, parent=None, **extra):
        try:     # the group's own options
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            _usage_error(exc)

    def invoke(self, ctx):
        from reportgen.errors import EXIT_PARTIAL_FAILURE, EXIT_USER_ERROR, ReportgenError

        debug = _debug_requested(ctx)
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:      # a command's options and arguments
            _usage_error(exc)
        except ReportgenError as exc:
            if debug:
                raise
            click.echo(f"Error: {exc.message}", err=True)
            sys.exit(EXIT_USER_ERROR)
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            sys.exit(130)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except Exception as exc:  # a bug or an environment failure: one line, not a traceback
            if debug:
                raise
            if isinstance(exc, OSError):      # a full disk, no permission: the user's to fix
                from reportgen.os_errors import user_error

                error = user_error(exc)
                if error is not None:
                    click.echo(f"Error: {error.message}", err=True)
                    sys.exit(EXIT_USER_ERROR)
            message = " ".join(f"{type(exc).__name__}: {exc}".split())
            click.echo(f"Error: {message} (rerun with --debug for the traceback)", err=True)
            sys.exit(EXIT_PARTIAL_FAILURE)


def _usage_error(exc: click.UsageError):
    """A mistyped option or argument as one line, `Error: ... Fix: ...`, exit 2 (click prints
    the usage, a hint and the error on three lines). `reportgen` or `reportgen cache` alone
    still print their help."""
    from reportgen.errors import EXIT_USER_ERROR, ReportgenError

    if isinstance(exc, getattr(click.exceptions, "NoArgsIsHelpError", ())):
        raise exc
    path = exc.ctx.command_path if exc.ctx is not None else "reportgen"
    error = ReportgenError(exc.format_message(), fix=f"see `{path} --help`")
    click.echo(f"Error: {error.message}", err=True)
    sys.exit(EXIT_USER_ERROR)


def _debug_requested(ctx) -> bool:
    return bool(ctx.params.get("debug")) or bool(os.environ.get("REPORTGEN_DEBUG"))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="reportgen")
@click.option("--models-dir", default=None, envvar="REPORTGEN_MODELS", show_envvar=True,
              type=click.Path(file_okay=False), help="Folder holding the model folders [models].")
@click.option("--debug", is_flag=True, envvar="REPORTGEN_DEBUG",
              help="Show the full traceback of an error.")
@click.pass_context
def main(ctx, models_dir, debug):
    """Turn trained Capsule Networks into a browsable static HTML site.

    \b
    Quick start:
      reportgen demo                      # train MNIST_Demo, build site/ (~3 min, 2 cores)
      reportgen train MNIST_WSharing      # checkpoints land in models/MNIST_WSharing/
      reportgen build --models 'MNIST_*'  # every visualization, every checkpoint
      reportgen serve                     # look at it locally
    """
    from reportgen import console

    console.notices_once()
    console.show_tracebacks(debug)
    ctx.ensure_object(dict)
    ctx.obj["models_dir"] = models_dir
    ctx.obj["debug"] = debug


@main.command()
@click.argument("name")
@click.option("--epochs", type=click.IntRange(min=1), help="Epochs [params.toml training.epochs].")
@click.option("--batch-size", type=click.IntRange(min=1),
              help="Batch size [params.toml]; refused, naming the largest that fits, when the "
                   "training state and its activations would not fit in memory.")
@click.option("--save-every", type=click.IntRange(min=1),
              help="Save weights every K batches (and at each epoch's end) [params.toml].")
@click.option("--learning-rate", type=click.FloatRange(min=0, min_open=True),
              help="Adam learning rate [params.toml].")
@click.option("--data", help="Dataset name (mnist, fashion_mnist, cifar10) or a path to an .npz "
                             "file / image folder [params.toml dataset].")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for init and shuffling the training images (the held-out split is the same for every seed).")
@click.option("--limit", type=click.IntRange(min=1), help="Train on only N training images.")
@click.option("--until-accuracy", type=click.FloatRange(min=0, max=1, min_open=True),
              help="Stop at the first saved step whose validation accuracy is at least this "
                   "(e.g. 0.99), to compare models at the same clean accuracy.")
@click.option("--resume", is_flag=True, help="Continue from the latest saved step.")
@click.option("--fresh", is_flag=True,
              help="Start over: move an earlier run to models/NAME/archive/ first.")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Train the models on a Dask cluster, one per worker: tcp://HOST:8786 (a "
                   "running scheduler) or local:N (N worker processes here).")
@click.option("--seeds", default=None, metavar="N|S1,S2",
              help="Train a group of runs of NAME over seeds: N (seeds 0 ... N-1) or a list; "
                   "each run is its own folder, models/NAME--seed-S/.")
@click.option("--sweep", "sweeps", multiple=True, metavar="KEY=V1,V2",
              help="Train a group of runs of NAME, one per value of the params.toml key KEY "
                   "(e.g. class_caps.routing_iterations=1,2,3), each in models/NAME--KEY-V/; "
                   "repeat for every combination. A re-run resumes the unfinished runs and "
                   "skips the finished ones.")
@click.pass_context
def train(ctx, name, scheduler, seeds, sweeps, **options):
    """Train model NAME from models/NAME/params.toml, saving EPOCH-BATCH.weights.h5 files.

    NAME may be a glob ('MNIST40_*'): the models are trained one after another, or at once on
    a Dask cluster with --scheduler; a model that fails is reported (FAILED: NAME: reason),
    the others go on, and the exit code is 1.

    \b
    With --seeds and/or --sweep, NAME's runs over those seeds and settings are trained one
    after another, each in a model folder of its own beside NAME holding NAME's params.toml
    with its settings and group.json (the group, the base model, the settings that differ).

    \b
    Examples:
      reportgen train MNIST_Demo --epochs 5 --save-every 10
      reportgen train 'MNIST40_*' --epochs 2 --scheduler local:2
      reportgen train MNIST_Demo --seeds 3
      reportgen train MNIST_Demo --sweep class_caps.routing_iterations=1,2,3
    """
    from reportgen.commands.train import run_train

    run_train(ctx.obj["models_dir"], name, options, scheduler, seeds, sweeps)


@main.command("models")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def models_command(ctx, as_json):
    """List every model: dataset, trainable parameters, saved steps, latest validation accuracy.

    \b
    Example:
      reportgen models --json
    """
    from reportgen.commands.models import run_models

    run_models(ctx.obj["models_dir"], as_json)


@main.command()
@click.option("--epochs", type=click.IntRange(min=1), default=None,
              help="Epochs to train MNIST_Demo [params.toml: 5].")
@click.option("--site-dir", default="site", show_default=True, type=click.Path(file_okay=False))
@click.pass_context
def demo(ctx, epochs, site_dir):
    """First command on a fresh clone: train MNIST_Demo on the bundled digits, then build the site.

    Skips training when MNIST_Demo already has a finished run.

    \b
    Example:
      reportgen demo
    """
    from reportgen.commands.demo import run_demo

    run_demo(ctx.obj["models_dir"], epochs, site_dir)


def _register_optional_commands() -> None:
    """Commands that live in their own modules (build, serve, publish, cache, import, export,
    plugins)."""
    from importlib import import_module

    for module in ("build", "serve", "publish", "cache", "import", "export", "plugins"):
        try:
            mod = import_module(f"reportgen.commands.{module}_cli")
        except ModuleNotFoundError:
            continue
        main.add_command(mod.command)


_register_optional_commands()

if __name__ == "__main__":
    main()
