"""`reportgen train`: resolve the model and options, then hand over to the trainer."""

from __future__ import annotations

import click

from reportgen.catalog import Catalog
from reportgen.console import echo


def run_train(models_dir, name: str, options: dict) -> None:
    from reportgen.training.trainer import TrainOptions, train

    if _default("seed"):
        options = {**options, "seed": None}  # --resume keeps the run's seed unless one is given
    entry = Catalog(models_dir).get(name)
    entry.params  # validate params.toml before importing TensorFlow
    history = train(entry, TrainOptions(**options))
    last = history[-1]
    echo(f"{name}: last step {last['step']}, validation accuracy {last['val_accuracy']:.4f}; "
         f"weights in {entry.path}/")


def _default(option: str) -> bool:
    """True when the command line left `option` at its default (not typed by the user)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return False
    return ctx.get_parameter_source(option) == click.core.ParameterSource.DEFAULT
