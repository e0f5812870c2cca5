"""The tiny CapsNet of tests/test_training.py (TINY_TOML) trained one epoch (steps 0-0, 1-2, 1-4,
1-5), trained once per test run and seed and shared by every xdist worker: many test files
build from exactly this model, and training it takes a TensorFlow compile each time."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from test_training import TINY_TOML, _tiny_data


def made_once(tmp_path_factory, name: str, make) -> Path:
    """The folder `name` that `make(folder)` filled, made once per test run: in the folder every
    xdist worker sees (the parent of their base folders; the base folder itself without xdist,
    where a parent would outlive the run), the first worker to ask making it under a lock."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder, ready = root / name, root / f"{name}.ready"
    with FileLock(str(root / f"{name}.lock")):
        if not ready.is_file():
            shutil.rmtree(folder, ignore_errors=True)     # a worker failed while making it
            folder.mkdir()
            make(folder)
            ready.write_text("")
    return folder


def trained_tiny(tmp_path_factory, seed: int = 0) -> Path:
    """The trained model folder (params.toml, weights, history); read-only: copy it into a
    models folder of your own (`copy_trained_tiny`). Its params.toml names a data file beside
    it, which stays for the whole run."""
    def make(home: Path) -> None:
        from reportgen.catalog import Catalog
        from reportgen.training.trainer import TrainOptions, train

        (home / "models" / "Tiny").mkdir(parents=True)
        (home / "models" / "Tiny" / "params.toml").write_text(
            TINY_TOML.format(data=_tiny_data(home / "toy.npz")))
        train(Catalog(home / "models").get("Tiny"), TrainOptions(epochs=1, seed=seed))

    return made_once(tmp_path_factory, f"trained-tiny-seed-{seed}", make) / "models" / "Tiny"


def copy_trained_tiny(tmp_path_factory, target: Path, seed: int = 0) -> Path:
    """A private copy of the trained model at `target` (a model folder, e.g. models/Tiny)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(trained_tiny(tmp_path_factory, seed), target)
    return target
