"""A tiny model of matrix capsules with EM routing trained a few steps by `reportgen train`
(spread loss, the margin schedule, no decoder) and built into a site by `reportgen build`:
every analysis that applies runs, the ones that do not are reported with their reason."""

from __future__ import annotations

import numpy as np
import pytest
from em_fixture import TINY_EM_TOML
from test_training import _tiny_data

from reportgen.catalog import Catalog
from reportgen.commands.build import BuildOptions, build

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from reportgen.training.trainer import TrainOptions, train

    tmp = tmp_path_factory.mktemp("em_build")
    data = _tiny_data(tmp / "toy.npz")
    root = tmp / "models"
    (root / "TinyEM").mkdir(parents=True)
    (root / "TinyEM" / "params.toml").write_text(TINY_EM_TOML.format(data=data))
    history = train(Catalog(root).get("TinyEM"), TrainOptions(epochs=1))
    return root, history


def test_training_steps_the_spread_loss_margin_and_saves(trained, monkeypatch):
    root, history = trained
    entry = Catalog(root).get("TinyEM")
    assert [str(s) for s in entry.steps] == ["0-0", "1-2", "1-4", "1-5"]   # 48 images
    assert [r["step"] for r in history] == ["0-0", "1-2", "1-4", "1-5"]
    losses = [r["loss"] for r in history[1:]]
    assert all(np.isfinite(losses)) and all(r["reconstruction_loss"] == 0 for r in history[1:])
    assert all(0.0 <= r["val_accuracy"] <= 1.0 for r in history)
    # The share of training the trainer reports before each of the 5 batches (the margin then
    # grows from 0.2 at the first to 0.9 at the last: EMParams.margin).
    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.training import trainer

    seen = []
    real = build_capsnet

    rates = []

    def recording(params):
        net = real(params)
        original, factor = net.set_training_progress, net.learning_rate_factor
        net.set_training_progress = lambda p: (seen.append(p), original(p))
        net.learning_rate_factor = lambda p: rates.append(factor(p)) or rates[-1]
        return net

    monkeypatch.setattr("reportgen.capsnet.architecture.build_capsnet", recording)
    trainer.train(Catalog(root).get("TinyEM"), trainer.TrainOptions(epochs=1, fresh=True))
    assert seen == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])
    # learning_rate_decay = 0.5: the rate falls linearly to half of params.toml's 0.01
    assert rates == pytest.approx([1.0, 0.875, 0.75, 0.625, 0.5])


def test_build_makes_every_applicable_page(trained, tmp_path):
    root, _ = trained
    options = BuildOptions(models="TinyEM", steps="last", images="test:0-1", analyses="last",
                           eval_images=12, render_site=True, cache_dir=str(tmp_path / "cache"),
                           project_dir=str(tmp_path / "mkdocs"), site_dir=str(tmp_path / "site"))
    summary = build(Catalog(root), options)
    assert summary.ok, summary.failed
    artifacts = tmp_path / "mkdocs" / "docs" / "artifacts" / "TinyEM"
    names = {p.name for p in artifacts.rglob("*.png")}
    for expected in ("predictions.png", "class_capsules.png", "rpv-modified.png",
                     "rpv-original.png", "gradcam_pp-conv1.png", "primary_heatmaps-per_layer.png",
                     "primary_heatmaps-per_layer-conv_caps1.png",
                     "primary_heatmaps-per_layer-conv_caps2.png",
                     "routing_entropy-argmax-entropy.png",
                     "routing_entropy-argmax-routing_entropy_layers.png",
                     "dead_units.png", "affine_robustness.png"):
        assert expected in names, expected
    site = tmp_path / "site" / "models" / "TinyEM"
    pages = {p.name: p.read_text(encoding="utf-8") for p in site.glob("*.html")}
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
