"""Every registered model family built by `reportgen build` with the DEFAULT technique set (no
--technique subset), as a user's first build of it runs: a tiny model of each trained one batch,
its untrained step and that one built, every analysis that applies computed and drawn, the
pages rendered. A crash that only one family's figures or analyses hit (GraCapsNet's attention
figure once failed every default build of MNIST_GraCaps) fails here, with the family named.

One build for all of them (one TensorFlow import, one MkDocs run) of one input each. Every
family is built at its trained step; the full CapsNet also at its untrained step, so that the
trend charts over steps are drawn once (they read only summaries, the same for every family) —
the untrained steps of the others would double the time (~2 minutes) for no other code path."""

from __future__ import annotations

import json

import pytest
from conftest import TINY_PARAMS
from em_fixture import TINY_EM
from family_nets import CNN_HEADS, TINY_GRACAPS, TINY_SELF_ROUTING, tiny_cnn, write_model
from test_training import _tiny_data

from reportgen.catalog import Catalog
from reportgen.commands.build import BuildOptions, build
from reportgen.engine.model import ModelHandle
from reportgen.engine.step import plan
from reportgen.model_folder import WEIGHTS_SUFFIX
from reportgen.families.cnn import CNN_HEADS as REGISTERED_HEADS
from reportgen.settings.families import example_params, registered
from reportgen.settings.model_params import ROUTINGS, parse_model_params
from reportgen.results.findings import UNTRAINED
from reportgen.techniques import all_techniques

NO_ROUTING = {**TINY_PARAMS["class_caps"], "routing": "none"}
MODELS = {
    "CapsNet": TINY_PARAMS,
    "CapsNet_NoR": {**TINY_PARAMS, "class_caps": NO_ROUTING},
    "AffCapsNet": {**TINY_PARAMS, "class_caps": {**NO_ROUTING, "weight_sharing": "all"}},
    "GraCapsNet": TINY_GRACAPS,
    "EM": TINY_EM,
    "SelfRouting": TINY_SELF_ROUTING,
    **{f"ConvNet_{head}": tiny_cnn(head) for head in CNN_HEADS},
}
# A family registered by an installed package (an example model of its own, Family.example) is
# held to the same default build.
MODELS.update({f"plugin_{name}": example_params(name) for name in registered()
               if name not in {raw.get("family", "capsnet") for raw in MODELS.values()}})
DEFAULT = tuple(t for t in all_techniques() if not t.experimental)
TWO_STEPS = "CapsNet"          # the one family built at 0-0 too (trend charts)


def test_the_families_cover_the_registry():
    """A family, CNN head or routing added to the settings without a model here fails."""
    params = [parse_model_params({**raw, "dataset": "mnist"}) for raw in MODELS.values()]
    assert {p.family for p in params} == set(registered())
    assert {p.family_settings.head for p in params if p.family == "cnn"} == set(REGISTERED_HEADS)
    capsnets = [p.class_caps for p in params if p.family == "capsnet"]
    assert {c.routing for c in capsnets} == set(ROUTINGS)
    assert {c.weight_sharing for c in capsnets} >= {False, "all"}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from reportgen.training.trainer import TrainOptions, train

    tmp = tmp_path_factory.mktemp("families")
    data = _tiny_data(tmp / "toy.npz", n=40)
    models = tmp / "models"
    for name, raw in MODELS.items():
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


def _index(site, name) -> dict:
    return json.loads((site / "models" / name / "index.json").read_text("utf-8"))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_each_family_builds_every_default_analysis(built, name):
    models, site, summary = built
    assert not [line for line in summary.failed if line.startswith(name)], summary.failed
    index = _index(site, name)
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


@pytest.mark.slow
def test_gracapsnet_shows_its_attention_and_scores_it_in_explanation_fidelity(built):
    models, site, summary = built
    page = (site / "models" / "GraCapsNet" / "class-caps.html").read_text("utf-8")
    assert "GraCapsNet attention (built-in explanation)" in page
    for step in ("1-1",):
        for key in ("test-0",):
            for figure in ("explanation", "heads"):
                png = (site / "artifacts" / "GraCapsNet" / step / key /
                       f"gracaps_attention-{figure}.png")
                assert png.stat().st_size > 0, png
    analyses = _index(site, "GraCapsNet")["steps"]["1-1"]["dataset"]
    [fidelity] = [v for k, v in analyses.items() if k.startswith("explanation_fidelity")]
    exported = next(f["src"] for f in fidelity["figures"] if f["kind"] == "json")
    numbers = json.loads((site / exported).read_text("utf-8"))
    assert numbers["builtin_method"] == "builtin"
    assert isinstance(numbers["deletion_aopc_builtin"], float)
    assert "the explanation map the model's family builds in (for GraCapsNet" in fidelity["more"]


@pytest.mark.slow
def test_em_places_its_conv_caps_heatmaps_and_says_what_does_not_apply(built):
    models, site, summary = built
    artifacts = site / "artifacts" / "EM"
    names = {p.name for p in artifacts.rglob("*.png")}
    for expected in ("predictions.png", "class_capsules.png", "rpv-modified.png",
                     "rpv-original.png", "gradcam_pp-conv1.png", "primary_heatmaps-per_layer.png",
                     "primary_heatmaps-per_layer-conv_caps1.png",
                     "primary_heatmaps-per_layer-conv_caps2.png",
                     "routing_entropy-argmax-entropy.png",
                     "routing_entropy-argmax-routing_entropy_layers.png",
                     "dead_units.png", "affine_robustness.png"):
        assert expected in names, expected
    pages = {p.name: p.read_text(encoding="utf-8") for p in (site / "models" / "EM").glob("*.html")}
    # the ConvCaps layers' heatmaps on their own layer page, the primary capsules' on theirs
    assert "conv_caps1" in pages["conv-caps.html"] and "conv_caps2" in pages["conv-caps.html"]
    assert "primary_heatmaps-per_layer-conv_caps1" not in pages["primary-caps.html"]
    assert "primary_heatmaps-per_layer.png" in pages["primary-caps.html"]
    # titled for their layer: ConvCaps heatmaps there, primary-capsule heatmaps here
    assert "ConvCaps heatmaps" in pages["conv-caps.html"]
    assert "Primary-capsule heatmaps" not in pages["conv-caps.html"]
    assert "Primary-capsule heatmaps" in pages["primary-caps.html"]
    # what does not apply is said, with why (no decoder, no vector capsules)
    assert "Not applicable to this model: it has no reconstruction decoder" in pages["index.html"]
    assert "Not applicable to this model" in pages["analyses.html"]
