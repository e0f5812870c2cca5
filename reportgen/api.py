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
    Returns a `reportgen.capsnet.network.Network`.
    """
    from reportgen.catalog import Catalog

    return Catalog(models_dir).load(name, step)


def analyze(name: str, step: str = "last", images: str = "test:0-3", files=(),
            transforms: str = "", techniques=None, models_dir: str | Path | None = None):
    """Compute techniques for some inputs in one batched pass, without the cache or the site.

    Returns {"technique" or "technique/variant": {array name: array with batch axis first}}
    plus "inputs": the list of InputImage analysed. Checkpoint-scope techniques (conv kernels)
    have no batch axis. The network and its compiled passes are kept for the next call on the
    same model (reportgen.engine.warm): a repeated call costs about its forward pass. Example:

        res = reportgen.analyze("MNIST_Demo", images="test:0-7", techniques=["rpv"])
        res["rpv/modified"]["maps"].shape      # (8, 10, 6, 6)
    """
    from reportgen.catalog import Catalog
    from reportgen.data.datasets import load_dataset
    from reportgen.data.inputs import make_inputs, parse_image_selection, parse_transforms
    from reportgen.engine.warm import network
    from reportgen.probe.probe import empty_batch, run_probe
    from reportgen.techniques import all_techniques, get_technique
    from reportgen.techniques.compute import variant_label

    net = network(Catalog(models_dir), name, step)   # built and compiled once per session
    chosen = ([get_technique(t) for t in techniques] if techniques else
              [t for t in all_techniques() if t.scope != "dataset" and not t.experimental])
    dataset = load_dataset(net.params.dataset)
    inputs = make_inputs(dataset, parse_image_selection(images), list(files),
                         parse_transforms(transforms), net.params.input_shape)
    import numpy as np

    from reportgen.engine.step import plan

    # techniques that do not apply to this model (Technique.applicable) are left out
    variants = [(t, p) for t, p in plan(chosen, net).variants if t.scope != "dataset"]
    needs = frozenset().union(*(t.needs_for(p, net) for t, p in variants if t.scope == "input"))
    batch = run_probe(net, np.stack([i.image for i in inputs]), needs=needs) if inputs else None
    results: dict = {"inputs": inputs}
    for tech, params in variants:
        label = variant_label(params)
        key = tech.name + (f"/{label}" if label else "")
        source = empty_batch(net) if tech.scope == "checkpoint" else batch
        if source is not None:
            view = source.restricted(tech.needs_for(params, net), f"Technique '{tech.name}'")
            results[key] = tech.compute(view, params)
    return results
