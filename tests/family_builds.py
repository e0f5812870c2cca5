"""Every registered model family built by `reportgen build` with the DEFAULT technique set (no
--technique subset), as a user's first build of it runs: a tiny model of each trained one batch,
its untrained step and that one built, every analysis that applies computed and drawn, the
pages rendered. A crash that only one family's figures or analyses hit (GraCapsNet's attention
figure once failed every default build of MNIST_GraCaps) fails there, with the family named.

The families are built in two sites, one per test file (test_family_builds.py and
test_family_builds_more.py), so that the two xdist workers build them side by side; each site
is one build (one MkDocs run) of one input per model. Every family is built at its trained
step; the full CapsNet also at its untrained step, so that the trend charts over steps are
drawn once (they read only summaries, the same for every family)."""

from __future__ import annotations

import json

from conftest import TINY_PARAMS
from em_fixture import TINY_EM
from family_nets import CNN_HEADS, TINY_GRACAPS, TINY_SELF_ROUTING, tiny_cnn, write_model
from test_training import _tiny_data

from reportgen.catalog import Catalog
from reportgen.commands.build import BuildOptions, build
from reportgen.engine.model import ModelHandle
from reportgen.engine.step import plan
from reportgen.model_folder import WEIGHTS_SUFFIX
from reportgen.results.findings import UNTRAINED
from reportgen.settings.families import example_params, registered
from reportgen.techniques import all_techniques

NO_ROUTING = {**TINY_PARAMS["class_caps"], "routing": "none"}
# the vector-capsule families, built in test_family_builds.py
CAPSNETS = {
    "CapsNet": TINY_PARAMS,
    "CapsNet_NoR": {**TINY_PARAMS, "class_caps": NO_ROUTING},
    "AffCapsNet": {**TINY_PARAMS, "class_caps": {**NO_ROUTING, "weight_sharing": "all"}},
    "GraCapsNet": TINY_GRACAPS,
    "SelfRouting": TINY_SELF_ROUTING,
}
# the others, built in test_family_builds_more.py
OTHERS = {"EM": TINY_EM, **{f"ConvNet_{head}": tiny_cnn(head) for head in CNN_HEADS}}
# A family registered by an installed package (an example model of its own, Family.example) is
# held to the same default build.
OTHERS.update({f"plugin_{name}": example_params(name) for name in registered()
               if name not in {raw.get("family", "capsnet")
                               for raw in {**CAPSNETS, **OTHERS}.values()}})
MODELS = {**CAPSNETS, **OTHERS}
DEFAULT = tuple(t for t in all_techniques() if not t.experimental)
TWO_STEPS = "CapsNet"          # the one family built at 0-0 too (trend charts)


def build_families(tmp, models_params: dict):
    """Train each model one batch, keep its trained step (and CapsNet's untrained one), build
    them all in one site: (models folder, site folder, build summary)."""
    from reportgen.training.trainer import TrainOptions, train

    data = _tiny_data(tmp / "toy.npz", n=40)
    models = tmp / "models"
    for name, raw in models_params.items():
        shape, classes = tuple(raw["input_shape"]), raw.get("num_classes", 10)
        own = data if (shape, classes) == ((12, 12, 1), 3) else \
            _toy_data(tmp / f"{name}.npz", shape, classes)
        write_model(models, name, raw, own)
        train(Catalog(models).get(name), TrainOptions(limit=10))      # steps 0-0 and 1-1
        if name != TWO_STEPS:
            (models / name / f"{UNTRAINED}{WEIGHTS_SUFFIX}").unlink()
    options = BuildOptions(steps="last", images="test:0", analyses="last", eval_images=10,
                           cache_dir=str(tmp / "cache"), project_dir=str(tmp / "mkdocs"),
                           site_dir=str(tmp / "site"))
    summary = build(Catalog(models), options)
    return models, tmp / "site", summary


def _toy_data(path, shape, classes, n=40):
    """Learnable toy data of another input shape: class k a bright band at its own height."""
    import numpy as np

    rng = np.random.default_rng(0)
    y = np.arange(n) % classes
    x = rng.uniform(0, 0.2, size=(n, *shape)).astype(np.float32)
    band = max(1, shape[0] // (classes + 1))
    for k in range(classes):
        x[y == k, k * band:(k + 1) * band] = 1.0
    np.savez(path, x=x.squeeze(-1) if shape[2] == 1 else x, y=y)
    return path


def site_index(site, name) -> dict:
    return json.loads((site / "models" / name / "index.json").read_text("utf-8"))


def check_default_build(built, name: str) -> None:
    """Model `name` built without a failure, with every default technique that applies to its
    family drawn at each of its steps and the others listed as not applicable."""
    models, site, summary = built
    assert not [line for line in summary.failed if line.startswith(name)], summary.failed
    index = site_index(site, name)
    assert index["step_names"] == (["0-0", "1-1"] if name == TWO_STEPS else ["1-1"])
    overview = (site / "models" / name / "index.html").read_text("utf-8")
    assert "Problems during the build of this model" not in overview
    # every default technique that applies to the family has its panels; the others say why not
    chosen = plan(DEFAULT, ModelHandle(Catalog(models).get(name).params))
    applies = {t.name for t, _ in chosen.variants}
    assert {p["technique"] for p in index["panels"] + index["dataset_panels"]} == applies
    assert set(index["not_applicable"]) == {t.name for t, _ in chosen.not_applicable}
    # the dataset analyses at every step built (each analysed), each input's panels at each step
    for step in index["step_names"]:
        computed = index["steps"][step]["dataset"]
        for technique in {t.name for t, _ in chosen.variants if t.scope == "dataset"}:
            assert any(pid.startswith(technique) for pid in computed), (technique, step)
    inputs = {t.name for t, _ in chosen.variants if t.scope == "input"}
    for key, script in index["input_scripts"].items():
        text = (site / script).read_text("utf-8")
        for step in index["step_names"]:
            for technique in inputs:
                assert f"artifacts/{name}/{step}/{key}/{technique}" in text, (technique, key)
