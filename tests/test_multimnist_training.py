"""Two-label training (MultiMNIST, Sabour et al. 2017 section 6; Gu 2022 Ch.5): the models'
parameter counts, each family's two-label loss against the NumPy references of
tests/reference/two_label.py, the trainer's wiring (targets rendered from the original indices,
top-2 validation accuracy) and the one-line refusal of a mismatched data set."""

from __future__ import annotations

import json

import numpy as np
import pytest

import reference.two_label as ref
from family_nets import TINY_PAIR
from reportgen.capsnet.param_count import count_trainable_params
from reportgen.catalog import Catalog
from reportgen.data.label_arity import PAIR, SINGLE, model_label_arity
from reportgen.errors import ReportgenError
from reportgen.settings.model_params import load_model_params, parse_model_params

# Sabour's network on 36x36: Conv(256, 9) 20,992 -> 28x28; primary caps 9x9 s2 5,308,672 ->
# 10x10 x 32 = 3,200 capsules; votes 3,200 x 10 x 16 x 8 = 4,096,000; decoder 160 -> 512 ->
# 1024 -> 1296: 82,432 + 525,312 + 1,328,400 = 1,936,144.
CAPSNET = 20_992 + 5_308_672 + 4_096_000 + 1_936_144
# Gu's ConvNet-FC with kernels 9: 20,992 + 5,308,672 (-> 20x20) + 2,654,336 (-> 12x12x128 =
# 18,432) + FC 328 6,046,024 + FC 192 63,168 + FC 10 1,930.
CONVNET_FC = 20_992 + 5_308_672 + 2_654_336 + 6_046_024 + 63_168 + 1_930
# MULTIMNIST_Demo: Conv(32, 5) 832 -> 32x32; Conv(64, 5, s2) 51,264 -> 14x14; primary caps 5x5
# s2, 16 types x 8D, 204,928 (batch norm: no trainable parameter) -> 5x5 x 16 = 400 capsules;
# votes 400 x 10 x 16 x 8 = 512,000; decoder 160 -> 512 -> 1024 -> 1296: 1,936,144.
DEMO = 832 + 51_264 + 204_928 + 512_000 + 1_936_144
COUNTS = {"MULTIMNIST_CapsNet": 11_361_808, "MULTIMNIST_NoR": 11_361_808,
          "MULTIMNIST_ConvNet_FC": 14_095_122, "MULTIMNIST_Demo": 2_705_168}

# family_nets.TINY_PAIR as a params.toml, trained on `data`
TINY_PAIR_TOML = """
dataset = "{data}"
input_shape = [36, 36, 1]
num_classes = 10
[[conv]]
filters = 8
kernel_size = 5
strides = 3
[primary]
types = 4
dims = 4
kernel_size = 3
strides = 2
[class_caps]
dims = 4
[decoder]
units = [16]
[training]
epochs = 1
batch_size = 8
save_every = 100
learning_rate = 0.01
"""


def test_the_numbers_add_up():
    assert CAPSNET == COUNTS["MULTIMNIST_CapsNet"] and CONVNET_FC == COUNTS["MULTIMNIST_ConvNet_FC"]
    assert DEMO == COUNTS["MULTIMNIST_Demo"]


def test_tf_free_counts_and_label_arity():
    for name, count in COUNTS.items():
        params = load_model_params(f"models/{name}/params.toml")
        assert count_trainable_params(params) == count, name
        assert model_label_arity(params) == PAIR, name
    assert model_label_arity(load_model_params("models/MNIST/params.toml")) == SINGLE


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(COUNTS))
def test_keras_counts(name):
    import keras

    from reportgen.capsnet.architecture import build_capsnet

    keras.backend.clear_session()
    net = build_capsnet(load_model_params(f"models/{name}/params.toml"))
    assert net.trainable_params() == COUNTS[name]
    assert net.description.input_shape == (36, 36, 1)


def _pairs(n, seed):
    rng = np.random.default_rng(seed)
    first = rng.integers(0, 10, n)
    return np.stack([first, (first + rng.integers(1, 10, n)) % 10], -1)


def test_capsnet_pair_loss_is_margin_plus_two_reconstructions():
    import keras

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.training.two_label import pair_training_losses

    keras.utils.set_random_seed(0)
    net = build_capsnet(parse_model_params(TINY_PAIR))
    rng = np.random.default_rng(5)
    images = rng.random((4, 36, 36, 1), dtype=np.float32)
    sources = rng.random((4, 2, 36, 36, 1), dtype=np.float32)
    labels = _pairs(4, 5)
    margin, rec, scores = pair_training_losses(net)(images, labels, sources)
    capsules, lengths = (np.asarray(a) for a in net.encoder(images, training=True))
    np.testing.assert_allclose(np.asarray(scores), lengths, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(margin), ref.pair_margin_loss(labels, lengths),
                               rtol=1e-4, atol=1e-6)
    # the decoder once per label, the others masked (in NumPy), each against its own digit
    expected = np.zeros(4)
    for j in range(2):
        masked = capsules * np.eye(10, dtype=np.float32)[labels[:, j]][..., None]
        recon = np.asarray(net.decoder(masked.reshape(4, -1))).reshape(4, -1)
        expected += 0.392 * np.mean((sources[:, j].reshape(4, -1) - recon) ** 2, axis=1)
    np.testing.assert_allclose(np.asarray(rec), expected, rtol=1e-4)


def test_convnet_pair_loss_is_sigmoid_binary_crossentropy():
    import keras

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.training.two_label import pair_training_losses

    keras.utils.set_random_seed(0)
    net = build_capsnet(parse_model_params({
        "dataset": "multimnist", "input_shape": [36, 36, 1], "family": "cnn",
        "conv": [{"filters": 4, "kernel_size": 9, "strides": 3}],
        "cnn": {"head": "fc", "dense": [8]}, "decoder": {"enabled": False}}))
    images = np.random.default_rng(6).random((5, 36, 36, 1), dtype=np.float32)
    labels = _pairs(5, 6)
    bce, rec, logits = pair_training_losses(net)(images, labels, np.zeros((5, 2, 36, 36, 1)))
    logits = np.asarray(logits)
    np.testing.assert_allclose(np.asarray(bce), ref.pair_binary_crossentropy(labels, logits),
                               rtol=1e-4)
    assert not np.asarray(rec).any()
    # two labels: independent sigmoid scores, not a softmax
    probabilities = np.asarray(net.encoder(images)[1])
    np.testing.assert_allclose(probabilities, 1 / (1 + np.exp(-logits)), rtol=1e-5)


@pytest.fixture
def models_dir(tmp_path):
    root = tmp_path / "models"
    for name, data in (("Pair", "multimnist"), ("Single", "mnist")):
        (root / name).mkdir(parents=True)
        toml = TINY_PAIR_TOML.format(data=data)
        if data == "mnist":
            toml = toml.replace("[36, 36, 1]", "[28, 28, 1]")
        (root / name / "params.toml").write_text(toml)
    return root


@pytest.mark.parametrize("name, data, says", [
    ("Pair", "mnist", "Dataset 'mnist' has one class per image but model Pair predicts two"),
    ("Single", "multimnist", "Dataset 'multimnist' has two classes per image (overlapping "
                             "digits) but model Single predicts one")])
def test_a_mismatched_data_set_is_refused_before_training(models_dir, name, data, says):
    from reportgen.training.trainer import TrainOptions, train

    with pytest.raises(ReportgenError) as caught:
        train(Catalog(models_dir).get(name), TrainOptions(data=data, limit=8))
    assert says in caught.value.message and "\n" not in caught.value.message
    assert not any(p.name.endswith(".h5") for p in (models_dir / name).iterdir())


@pytest.mark.slow
def test_pair_training_renders_targets_by_original_index_and_records_top2(models_dir,
                                                                          monkeypatch):
    from reportgen.data.datasets import load_dataset
    from reportgen.data.held_out import validation_indices
    from reportgen.training import trainer
    from reportgen.training.evaluate import class_lengths

    data = load_dataset("multimnist")       # the run's seed shuffles and subsets it only
    calls = []
    opened = trainer.open_run

    def spy(entry, options):
        run = opened(entry, options)
        render = run.components

        def recorded(split, indices):
            parts = render(split, indices)
            calls.append((split, np.asarray(indices), parts))
            return parts

        run.components = recorded
        return run

    monkeypatch.setattr(trainer, "open_run", spy)
    history = trainer.train(Catalog(models_dir).get("Pair"),
                            trainer.TrainOptions(limit=16, seed=3))
    assert [r["step"] for r in history] == ["0-0", "1-2"]
    assert [c[0] for c in calls] == ["train", "train"]
    for _, indices, parts in calls:   # each target pair overlays to that training image
        assert len(indices) == 8
        np.testing.assert_array_equal(np.minimum(1, parts.sum(axis=1)), data.x_train[indices])
    seen = np.sort(np.concatenate([c[1] for c in calls]))
    keep = np.sort(np.random.default_rng(3).permutation(len(data.x_train))[:16])   # --limit
    np.testing.assert_array_equal(seen, keep)
    doc = json.loads((models_dir / "Pair" / "history.json").read_text())
    assert doc["accuracy"].startswith("top-2")
    # the recorded validation accuracy is top-2 over the run's validation sample
    net = Catalog(models_dir).load("Pair", "1-2")
    val = validation_indices(len(data.y_test))
    scores = class_lengths(net, data.x_test[val])
    assert history[-1]["val_accuracy"] == pytest.approx(
        ref.top2_correct(data.y_test[val], scores).mean())
    assert 0 <= history[-1]["train_accuracy"] <= 1


@pytest.mark.slow
def test_a_build_refuses_a_data_set_of_another_label_arity(tmp_path, monkeypatch):
    """A model whose data set carries another number of classes per image than it predicts
    fails in one line before its build computes anything (here a model claiming pairs on
    MNIST; a user's own data file of label pairs is refused by its loader already)."""
    from reportgen.commands.build import BuildOptions, build
    from reportgen.data import label_arity

    root = tmp_path / "models"
    (root / "Claims").mkdir(parents=True)
    (root / "Claims" / "params.toml").write_text(
        TINY_PAIR_TOML.format(data="mnist").replace("[36, 36, 1]", "[28, 28, 1]"))
    (root / "Claims" / "0-0.weights.h5").write_bytes(b"")        # a step to build
    monkeypatch.setattr(label_arity, "PAIRED_DATASETS", ("multimnist", "mnist"))
    summary = build(Catalog(root), BuildOptions(images="none", analyses="none",
                                                cache_dir=str(tmp_path / "cache"),
                                                site_dir=str(tmp_path / "site"),
                                                render_site=False))
    assert len(summary.failed) == 1
    assert ("Dataset 'mnist' has one class per image but model Claims predicts two classes per "
            "image") in summary.failed[0] and "\n" not in summary.failed[0]


def test_pair_inputs_and_evaluation_tables():
    """`--images test:I` on MultiMNIST names both classes; the overview's accuracy is top-2."""
    from reportgen.data.datasets import load_dataset
    from reportgen.data.inputs import make_inputs
    from reportgen.pages.assemble import evaluation_tables, prediction

    data = load_dataset("multimnist")
    first, second = make_inputs(data, [3, 4], [], [], (36, 36, 1))
    assert first.true_class is None and first.true_classes == tuple(data.y_test[3])
    assert first.known_classes == tuple(data.y_test[3])
    np.testing.assert_array_equal(first.image, data.x_test[3])
    labels = np.array([[1, 2], [0, 3], [2, 0]])
    scores = np.array([[0.1, 0.9, 0.8, 0.0], [0.9, 0.1, 0.4, 0.3], [0.5, 0.5, 0.1, 0.0]])
    accuracy, per_class, confusion = evaluation_tables(scores, labels, 4)
    assert accuracy == pytest.approx(ref.top2_correct(labels, scores).mean())
    assert accuracy == pytest.approx(1 / 3)
    assert per_class == [1.0, 1.0, 0.5, 0.0] and confusion is None
    shown = prediction(scores[0], None, ("a", "b", "c", "d"), (2, 1))
    assert shown.predicted == "b and c" and shown.correct is True
    assert prediction(scores[1], None, ("a", "b", "c", "d"), (0, 3)).correct is False


@pytest.mark.slow
def test_a_convnet_trains_on_pairs_with_sigmoid_scores(tmp_path):
    from family_nets import write_model

    from reportgen.data.datasets import load_dataset
    from reportgen.training.evaluate import class_lengths
    from reportgen.data.held_out import validation_indices
    from reportgen.training.trainer import TrainOptions, train

    root = tmp_path / "models"
    write_model(root, "PairCNN", {"input_shape": [36, 36, 1], "num_classes": 10,
                                  "family": "cnn",
                                  "conv": [{"filters": 4, "kernel_size": 9, "strides": 3}],
                                  "cnn": {"head": "fc", "dense": [8]},
                                  "decoder": {"enabled": False}}, "multimnist")
    history = train(Catalog(root).get("PairCNN"), TrainOptions(limit=10))
    assert [r["step"] for r in history] == ["0-0", "1-1"]
    assert history[-1]["reconstruction_loss"] == 0.0
    # the binary cross-entropy of its sigmoid scores, named as the CNN family names its loss
    assert history[-1]["cross_entropy"] > 0 and "margin_loss" not in history[-1]
    data = load_dataset("multimnist")
    net = Catalog(root).load("PairCNN", "1-1")
    val = validation_indices(len(data.y_test))
    scores = class_lengths(net, data.x_test[val])
    assert history[-1]["val_accuracy"] == pytest.approx(
        ref.top2_correct(data.y_test[val], scores).mean())
    assert scores.sum(axis=1).max() > 1.01 or scores.sum(axis=1).min() < 0.99   # not a softmax


def test_rendered_data_is_read_in_a_shuffled_block_order():
    """Training over rendered data (MultiMNIST's rounds) visits every image once per epoch,
    reproducibly, reading one block (round) or two per batch."""
    from reportgen.training.trainer import _BlockOrder

    order = _BlockOrder(1050, 100, 3, 1)
    visited = np.concatenate([order[b * 40:(b + 1) * 40] for b in range(27)])
    np.testing.assert_array_equal(np.sort(visited), np.arange(1050))
    np.testing.assert_array_equal(visited, _BlockOrder(1050, 100, 3, 1)[0:1050])
    assert not np.array_equal(visited, _BlockOrder(1050, 100, 3, 2)[0:1050])
    assert max(len(np.unique(order[b * 40:(b + 1) * 40] // 100)) for b in range(27)) <= 2
    assert not (np.diff(visited[:100]) > 0).all()                   # shuffled within a block
