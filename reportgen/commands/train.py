"""`reportgen train`: resolve the model and options, then hand over to the trainer."""

from __future__ import annotations

from reportgen.catalog import Catalog
from reportgen.console import echo


def run_train(models_dir, name: str, options: dict) -> None:
    from reportgen.training.trainer import TrainOptions, train

    entry = Catalog(models_dir).get(name)
    entry.params  # validate params.toml before importing TensorFlow
    history = train(entry, TrainOptions(**options))
    last = history[-1]
    echo(f"{name}: last step {last['step']}, validation accuracy {last['val_accuracy']:.4f}; "
         f"weights in {entry.path}/")
