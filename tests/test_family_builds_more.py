"""The other families' default builds (EM matrix capsules, the CNN baselines, families from
installed packages); family_builds.py says what is checked and why in two files."""

from __future__ import annotations

import pytest
from family_builds import OTHERS, build_families, check_default_build


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_families(tmp_path_factory.mktemp("families"), OTHERS)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(OTHERS))
def test_each_family_builds_every_default_analysis(built, name):
    check_default_build(built, name)


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
