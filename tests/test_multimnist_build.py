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
    # the segmentation score beside what a decoder knowing only the classes scores
    assert "each class&#39;s typical digit, centred" in compare
    assert "typical digit at the centre" in pages
    # the overview says which images are held out, and how many
    assert ("<dt>Held out</dt><dd>the 10,000 test images of multimnist, the same for every "
            "training seed; training validates on 1,000 of them") in pages


@pytest.mark.slow
def test_a_constant_two_digit_model_is_flagged_untrained_in_top2_words(tmp_path):
    """A two-label CapsNet whose class capsules are all zero (every length 0: every image gets
    the pair 0 and 1) is flagged on its pages and on Home, its findings reading top-2
    accuracy against 1/45 (reportgen.results.findings.untrained_pair_verdict)."""
    import re

    import numpy as np

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.model_folder import Step
    from reportgen.training.checkpoints import save_weights

    models = tmp_path / "models"
    write_model(models, "Constant", TINY_PAIR, "multimnist")
    entry = Catalog(models).get("Constant")
    net = build_capsnet(entry.params)
    net.class_caps.kernel.assign(np.zeros(net.class_caps.kernel.shape, np.float32))
    save_weights(net, entry.weights_path(Step(1, 0)))
    site = tmp_path / "site"
    summary = build(Catalog(models), BuildOptions(
        steps="last", images="test:0", techniques=("predictions",), analyses="last",
        eval_images=20, cache_dir=str(tmp_path / "cache"), site_dir=str(site)))
    assert summary.ok, summary.failed
    page = (site / "models" / "Constant" / "index.html").read_text("utf-8")
    [banner] = re.findall(r'<div class="rg-untrained" role="note"[^>]*>.*?</div>', page)
    assert 'data-rg-step="1-0">' in banner
    assert "This step predicts one pair of classes: its analyses describe an untrained " \
           "network" in banner
    assert "(step 1-0: classes 0 and 1 for 100.0% of the 20 evaluation images; threshold " \
           "95%)" in banner
    findings = page[page.index('id="findings"'):page.index('id="training-curves"')]
    assert re.search(r"Top-2 accuracy is \d+\.\d% \(95% CI [\d.]+–[\d.]+%\) on 20 evaluation "
                     r"images, not distinguishable from chance on 20 images \(2\.2% = 1/45",
                     findings)
    assert "This step predicts one pair of classes" in findings
    # the rendered overview and Home call its accuracy top-2, beside 1/45
    evaluation = page[page.index('id="evaluation"'):page.index('id="inputs"')]
    assert "Per-class top-2 accuracy</h2>" in evaluation
    assert re.search(r"Step <b>1-0</b>: top-2 accuracy <b>\d+\.\d\d%</b> \(95% CI [\d.]+–[\d.]+%, "
                     r"Wilson; chance 2\.2% = "
                     r"1/45\) on 20 evaluation images", evaluation)
    assert "Not evaluated" not in evaluation
    home = (site / "index.html").read_text("utf-8")
    assert "<b>Step 1-0</b> (the step its pages open at): this step predicts one pair" in home
    assert '<div class="rg-muted">top-2 accuracy; chance 2.2% = 1/45</div>' in home
