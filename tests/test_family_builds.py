"""The vector-capsule families' default builds (CapsNet with and without routing, Aff-CapsNet,
GraCapsNet, Self-Routing) and that the families cover the registry; the others are built in
test_family_builds_more.py (family_builds.py says why two files)."""

from __future__ import annotations

import json

import pytest
from family_builds import CAPSNETS, MODELS, build_families, check_default_build, site_index

from reportgen.families.cnn import CNN_HEADS as REGISTERED_HEADS
from reportgen.settings.families import registered
from reportgen.settings.model_params import ROUTINGS, parse_model_params


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
    return build_families(tmp_path_factory.mktemp("families"), CAPSNETS)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CAPSNETS))
def test_each_family_builds_every_default_analysis(built, name):
    check_default_build(built, name)


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
    analyses = site_index(site, "GraCapsNet")["steps"]["1-1"]["dataset"]
    [fidelity] = [v for k, v in analyses.items() if k.startswith("explanation_fidelity")]
    exported = next(f["src"] for f in fidelity["figures"] if f["kind"] == "json")
    numbers = json.loads((site / exported).read_text("utf-8"))
    assert numbers["builtin_method"] == "builtin"
    assert isinstance(numbers["deletion_aopc_builtin"], float)
    assert "the explanation map the model's family builds in (for GraCapsNet" in fidelity["more"]
