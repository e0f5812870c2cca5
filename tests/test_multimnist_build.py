"""End to end: a tiny two-label CapsNet trained one batch on MultiMNIST and built into a site
shows each test pair segmented in two colours, the top-2 accuracy and segmentation score beside
chance and the untrained step (findings, Compare), and says in one clause why a single-label
analysis does not apply."""

from __future__ import annotations

import json

import pytest
from family_nets import TINY_PAIR, write_model

from reportgen.catalog import Catalog
from reportgen.commands.build import BuildOptions, build


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from reportgen.training.trainer import TrainOptions, train

    tmp = tmp_path_factory.mktemp("multimnist")
    models = tmp / "models"
    write_model(models, "Pair", TINY_PAIR, "multimnist")
    train(Catalog(models).get("Pair"), TrainOptions(limit=10))          # steps 0-0 and 1-1
    options = BuildOptions(steps="all", images="test:0-1", analyses="all", eval_images=20,
                           techniques=("predictions", "multimnist_pair",
                                       "multimnist_segmentation", "affine_robustness"),
                           cache_dir=str(tmp / "cache"), project_dir=str(tmp / "mkdocs"),
                           site_dir=str(tmp / "site"))
    summary = build(Catalog(models), options)
    return tmp / "site", summary


@pytest.mark.slow
def test_pairs_segmented_and_scored_on_the_site(built):
    from reportgen.data.datasets import load_dataset

    site, summary = built
    assert not summary.failed, summary.failed
    folder = site / "models" / "Pair"
    index = json.loads((folder / "index.json").read_text("utf-8"))
    assert index["step_names"] == ["0-0", "1-1"]
    figures = site / "artifacts" / "Pair"
    for step in ("0-0", "1-1"):
        for key in ("test-0", "test-1"):                        # per input
            assert (figures / step / key / "multimnist_pair.png").is_file()
        assert (figures / step / "dataset"                      # the analysis's examples
                / "multimnist_segmentation-multimnist_pair_0.png").is_file()
    pages = "".join(p.read_text("utf-8") for p in folder.glob("*.html"))
    # the test pairs are named by both of their classes
    labels = load_dataset("multimnist").y_test[:2]
    assert f"{labels[0][0]} and {labels[0][1]}" in pages
    assert "MultiMNIST segmentation" in pages
    assert "Top-2 accuracy is" in pages and "on 500 MultiMNIST test pairs" in pages
    assert "= 1/45" in pages and "the untrained step" in pages
    assert ("Not applicable to this model: each of its images carries two classes (overlapping "
            "digits), and this analysis scores one") in pages
    compare = (site / "compare.html").read_text("utf-8")
    # the Compare table: each score beside its baseline and the untrained step's value
    assert "top-2 accuracy" in compare and "chance (1/C(K, 2))" in compare and "2.2%" in compare
    assert "segmentation IoU (mean)" in compare and "not analysed" not in compare
