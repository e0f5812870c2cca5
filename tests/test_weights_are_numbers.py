"""Weights that are not numbers never pass unnoticed: an import refuses NaN, infinite, absurdly
large, integer and boolean weights and non-integer shapes in one line naming the tensor;
training stops at a non-finite loss in one line and keeps its last good step; a step whose
weights hold NaN fails its build in one line and `reportgen models` lists it as damaged."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reportgen.errors import ReportgenError
from reportgen.importers import import_checkpoint
from test_import_safetensors import gram_ai_state, write_safetensors

TENSOR = "digit_capsules.route_weights"


def _spoil(value):
    def spoil(sd):
        weights = sd[TENSOR].copy()
        weights[3, 7, 1, 2] = value
        sd[TENSOR] = weights
    return spoil


@pytest.mark.parametrize("spoil, words", [
    (_spoil(np.nan), "holds 1 NaN and 0 infinite"),
    (_spoil(np.inf), "holds 0 NaN and 1 infinite"),
    (_spoil(1e30), "a weight of magnitude 1e+30"),
    (lambda sd: sd.update({TENSOR: sd[TENSOR].astype(np.int64)}), "of dtype int64"),
    # float64 beyond float32's range: its magnitude named, no cast's overflow warning (warnings
    # are errors here) and no "infinite"
    (lambda sd: sd.update({TENSOR: sd[TENSOR].astype(np.float64) * 1e300}),
     "a weight of magnitude"),
])
def test_an_import_refuses_weights_that_are_not_numbers(tmp_path, spoil, words):
    sd = gram_ai_state()
    spoil(sd)
    path = tmp_path / "epoch.safetensors"
    write_safetensors(path, sd)
    with pytest.raises(ReportgenError) as caught:
        import_checkpoint(tmp_path / "models", path, "gram-ai")
    message = caught.value.message
    assert f"tensor '{TENSOR}'" in message and words in message and "\n" not in message
    assert "infinite" not in message or "infinite" in words
    assert not (tmp_path / "models").exists()                      # nothing half-written


def test_boolean_weights_and_fractional_shapes_are_refused(tmp_path, monkeypatch):
    from test_import_safetensors import DTYPES

    monkeypatch.setitem(DTYPES, np.dtype(bool), "BOOL")
    sd = gram_ai_state()
    sd["conv1.bias"] = sd["conv1.bias"] > 0
    path = tmp_path / "bool.safetensors"
    write_safetensors(path, sd)
    with pytest.raises(ReportgenError) as caught:
        import_checkpoint(tmp_path / "models", path, "gram-ai")
    assert "tensor 'conv1.bias' of dtype bool" in caught.value.message
    # a shape of [10.5, ...] in the header (safetensors' JSON) is no shape
    write_safetensors(path, gram_ai_state())
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + size])
    header[TENSOR]["shape"] = [10.5] + header[TENSOR]["shape"][1:]
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + raw[8 + size:])
    with pytest.raises(ReportgenError) as caught:
        import_checkpoint(tmp_path / "models", path, "gram-ai")
    message = caught.value.message
    assert f"tensor '{TENSOR}' of shape [10.5, 144, 8, 16]" in message and "whole numbers" \
        in message and "\n" not in message
    assert not (tmp_path / "models").exists()


TINY = {"input_shape": [12, 12, 1], "num_classes": 3,
        "conv": [{"filters": 4, "kernel_size": 3}],
        "primary": {"types": 2, "dims": 4, "kernel_size": 3, "strides": 2},
        "class_caps": {"dims": 4}, "decoder": {"units": [8]}}


def _toy(path, n=40):
    rng = np.random.default_rng(0)
    y = np.arange(n) % 3
    x = rng.uniform(0, 0.2, (n, 12, 12)).astype(np.float32)
    for k in range(3):
        x[y == k, 4 * k:4 * k + 3, :] = 1.0
    np.savez(path, x=x, y=y)
    return path


@pytest.mark.slow
def test_training_stops_at_a_non_finite_loss_and_keeps_the_last_good_step(tmp_path, monkeypatch):
    from family_nets import write_model

    from reportgen.catalog import Catalog
    from reportgen.training import trainer

    write_model(tmp_path, "Tiny", TINY, _toy(tmp_path / "toy.npz"))
    make = trainer.make_train_step
    calls = [0]

    def diverging(net, optimizer):
        step = make(net, optimizer)

        def run(images, one_hot):
            calls[0] += 1
            out = step(images, one_hot)
            return (np.float32(np.nan),) + tuple(out[1:]) if calls[0] == 3 else out
        return run

    monkeypatch.setattr(trainer, "make_train_step", diverging)
    entry = Catalog(tmp_path).get("Tiny")
    with pytest.raises(ReportgenError) as caught:
        trainer.train(entry, trainer.TrainOptions(epochs=1))
    message = caught.value.message
    assert message.startswith("Training Tiny stopped: the loss is nan at epoch 1, batch 3; the "
                              "last good step, 1-2, is kept.") and "\n" not in message
    assert "--resume --learning-rate 0.001" in message
    assert [str(s) for s in entry.steps] == ["0-0", "1-1", "1-2"]
    history = json.loads((tmp_path / "Tiny" / "history.json").read_text())
    assert [r["step"] for r in history["records"]] == ["0-0", "1-1", "1-2"]


@pytest.mark.slow
def test_a_nan_step_fails_its_build_in_one_line_and_is_listed_damaged(tmp_path, monkeypatch):
    import h5py

    from family_nets import write_model

    from reportgen.catalog import Catalog
    from reportgen.commands.build import BuildOptions, build
    from reportgen.commands.models import describe_models
    from reportgen.training.trainer import TrainOptions, train

    monkeypatch.chdir(tmp_path)
    write_model(tmp_path / "models", "Tiny", TINY, _toy(tmp_path / "toy.npz"))
    catalog = Catalog(tmp_path / "models")
    train(catalog.get("Tiny"), TrainOptions(epochs=1, limit=20))
    weights = tmp_path / "models" / "Tiny" / "1-2.weights.h5"
    options = dict(images="test:0-1", analyses="none", cache_dir=str(tmp_path / "cache"),
                   site_dir=str(tmp_path / "site"), render_site=False, steps="1-2")
    assert not build(catalog, BuildOptions(**options)).failed       # cached while finite
    with h5py.File(weights, "r+") as f:
        decoder = [n for n in _datasets(f) if "dense" in n][0]
        f[decoder][...] = np.nan
    summary = build(catalog, BuildOptions(**options))
    [failure] = summary.failed
    assert failure.startswith("Tiny step 1-2: Weights file") and "\n" not in failure
    assert f"holds weights that are not numbers a network trains to: tensor '{decoder}' holds" \
        in failure
    [row] = describe_models(tmp_path / "models")
    assert row["steps"] == ["0-0", "1-1"]
    [damaged] = row["damaged_steps"]
    assert damaged["step"] == "1-2" and damaged["reason"].startswith(
        f"weights that are not numbers: tensor '{decoder}' holds")
    with pytest.raises(ReportgenError, match="holds weights that are not numbers"):
        catalog.load("Tiny", "1-2")


def _datasets(f) -> list[str]:
    import h5py

    names = []
    f.visititems(lambda n, item: names.append(n) if isinstance(item, h5py.Dataset) else None)
    return names


@pytest.mark.slow
def test_the_learning_rate_decays_per_epoch_batch_by_batch(tmp_path, monkeypatch):
    """[training] learning_rate_decay: lr x decay^(epochs done), the fraction of an epoch
    counted batch by batch (CapsNet-Keras's lr_decay, continuous)."""
    from family_nets import write_model

    from reportgen.catalog import Catalog
    from reportgen.training import trainer

    write_model(tmp_path, "Tiny", TINY, _toy(tmp_path / "toy.npz"))
    params = tmp_path / "Tiny" / "params.toml"
    text = params.read_text()
    assert "learning_rate = 0.01}" in text
    params.write_text(text.replace("learning_rate = 0.01}",
                                   "learning_rate = 0.01, learning_rate_decay = 0.5}"))
    make = trainer.make_train_step
    rates = []

    def recording(net, optimizer):
        step = make(net, optimizer)

        def run(images, one_hot):
            rates.append(float(np.asarray(optimizer.learning_rate)))
            return step(images, one_hot)
        return run

    monkeypatch.setattr(trainer, "make_train_step", recording)
    trainer.train(Catalog(tmp_path).get("Tiny"), trainer.TrainOptions(epochs=2))
    batches = 4                                           # 32 training images, batch 10
    expected = [0.01 * 0.5 ** (e + b / batches) for e in range(2) for b in range(batches)]
    np.testing.assert_allclose(rates, expected, rtol=1e-6)
