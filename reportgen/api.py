"""The Python API for notebooks: everything the CLI does, callable directly.

    import reportgen
    net = reportgen.load_model("MNIST_Demo", step="last")   # a CapsNet with weights loaded
    out = net.model(images)                                  # dict of every analysed tensor
"""

from __future__ import annotations

from pathlib import Path


def load_model(name: str, step: str = "last", models_dir: str | Path | None = None):
    """Build model `name` from models/NAME/params.toml and load the weights of `step`.

    `step` is "last", "EPOCH-BATCH" (e.g. "3-100"), or "init" for fresh random weights.
    Returns a `reportgen.capsnet.architecture.CapsNet`.
    """
    from reportgen.catalog import Catalog

    return Catalog(models_dir).load(name, step)
