"""`reportgen demo`: the first command on a fresh clone: train MNIST_Demo, then build the site."""

from __future__ import annotations

from reportgen.catalog import Catalog
from reportgen.console import notice

DEMO_MODEL = "MNIST_Demo"
# Every 4th step keeps the slider meaningful and the build short; the dataset analyses run at
# 5 of them spread over training, over an evaluation set fitted to their time budget
# (reportgen.commands.build_settings: the build's defaults).
DEMO_BUILD = {"models": DEMO_MODEL, "steps": "every:4"}


def run_demo(models_dir, epochs: int | None, site_dir: str) -> None:
    catalog = Catalog(models_dir)
    entry = catalog.get(DEMO_MODEL)
    _check_site_dir(catalog, site_dir)      # before a minute of training, not after
    from reportgen.tf_quiet import import_tensorflow_quietly

    import_tensorflow_quietly()             # its start-up lines stay off the terminal
    from reportgen.training.trainer import TrainOptions, train

    params = entry.params
    wanted = epochs or params.training.epochs
    steps = entry.steps
    if steps and steps[-1].epoch >= wanted:
        notice(f"{DEMO_MODEL} already trained to step {steps[-1]}; skipping training.")
    else:
        train(entry, TrainOptions(epochs=wanted, resume=bool(steps)))
    from reportgen.commands.build import run_build

    run_build(models_dir=models_dir, site_dir=site_dir, **DEMO_BUILD)


def _check_site_dir(catalog: Catalog, site_dir: str) -> None:
    """The build's own rules for the site folder (reportgen.pages.site_output) and the store
    (reportgen.cache.backends.check_location), checked up front."""
    from reportgen.cache.backends import check_location, open_store
    from reportgen.commands.work_folder import WORK_ROOT
    from reportgen.pages.site_output import check_site_folder, recover_unless_busy

    recover_unless_busy(site_dir)       # a site a killed build moved away, even if refused
    store = open_store()
    check_location(store, models_dir=catalog.root, site_dir=site_dir)
    check_site_folder(site_dir, models_dir=catalog.root, cache_dir=store.root,
                      work_dir=WORK_ROOT)
