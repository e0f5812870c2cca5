"""A family's own training recipe: `[training] optimizer` (Adam, or SGD with momentum as
PyTorch computes it) and `weight_decay` (L2 in the gradient), `[[conv]] padding`, and the
history naming each family's classification loss (Family.classification_loss)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_PARAMS
from family_nets import TINY_GRACAPS, build, tiny_cnn, toml_text

from reportgen.catalog import Catalog
from reportgen.errors import ReportgenError
from reportgen.settings.model_params import TrainingParams, parse_model_params

SOURCE = "models/Recipe/params.toml"


# --- the optimizers --------------------------------------------------------------------------

def _linear_problem():
    """A tiny model (y = x W + b, mean squared error) and its gradient by hand."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 3)).astype(np.float32)
    y = rng.normal(size=(5, 2)).astype(np.float32)
    w0 = rng.normal(size=(3, 2)).astype(np.float32)
    b0 = rng.normal(size=(2,)).astype(np.float32)

    def grads(w, b):
        error = x @ w + b - y                       # loss = mean(error^2)
        scale = 2.0 / error.size
        return scale * x.T @ error, scale * error.sum(0)

    return x, y, w0, b0, grads


def _keras_steps(optimizer, rates):
    """Steps of `optimizer` on the linear problem, the learning rate set to each of `rates`
    before its step (as the trainer decays it): the variables after each step."""
    import keras
    import tensorflow as tf

    x, y, w0, b0, _ = _linear_problem()
    w, b = keras.Variable(w0), keras.Variable(b0)
    optimizer.build([w, b])
    after = []
    for rate in rates:
        optimizer.learning_rate = rate
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((tf.matmul(x, w) + b - y) ** 2)
        optimizer.apply(tape.gradient(loss, [w, b]), [w, b])
        after.append((w.numpy().copy(), b.numpy().copy()))
    return after


@pytest.mark.slow
def test_sgd_with_momentum_and_weight_decay_is_pytorchs_sgd_by_hand():
    """Two steps at two learning rates (a decaying rate): b <- mu b + (g + lambda w),
    w <- w - lr b, computed in NumPy (Keras's own SGD keeps lr inside its buffer and differs
    once the rate changes)."""
    from reportgen.training.optimizers import make_optimizer

    training = parse_model_params({**TINY_PARAMS, "training": {
        "optimizer": "sgd", "momentum": 0.9, "weight_decay": 5e-4}}, SOURCE).training
    rates = (0.1, 0.05)
    got = _keras_steps(make_optimizer(training, rates[0]), rates)
    _, _, w, b, grads = _linear_problem()
    w, b = w.astype(np.float64), b.astype(np.float64)
    buffers = [np.zeros_like(w), np.zeros_like(b)]
    for (got_w, got_b), rate in zip(got, rates):
        gw, gb = grads(w, b)
        steps = [gw + 5e-4 * w, gb + 5e-4 * b]
        buffers = [0.9 * m + g for m, g in zip(buffers, steps)]
        w, b = w - rate * buffers[0], b - rate * buffers[1]
        np.testing.assert_allclose(got_w, w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_b, b, rtol=1e-5, atol=1e-6)
    # ... which is not Keras's SGD once the rate has changed
    import keras

    keras_sgd = _keras_steps(keras.optimizers.SGD(rates[0], momentum=0.9), rates)
    assert not np.allclose(keras_sgd[1][0], got[1][0], rtol=1e-4)


@pytest.mark.slow
def test_sgd_matches_torch_optim_sgd():
    torch = pytest.importorskip("torch")
    from reportgen.training.optimizers import SGD

    rates = (0.1, 0.1, 0.02)
    got = _keras_steps(SGD(rates[0], momentum=0.9, weight_decay=1e-2), rates)
    x, y, w0, b0, _ = _linear_problem()
    w = torch.tensor(w0, requires_grad=True)
    b = torch.tensor(b0, requires_grad=True)
    sgd = torch.optim.SGD([w, b], lr=rates[0], momentum=0.9, weight_decay=1e-2)
    for (got_w, got_b), rate in zip(got, rates):
        for group in sgd.param_groups:
            group["lr"] = rate
        sgd.zero_grad()
        ((torch.tensor(x) @ w + b - torch.tensor(y)) ** 2).mean().backward()
        sgd.step()
        np.testing.assert_allclose(got_w, w.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_b, b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_plain_sgd_has_no_buffer_and_adam_weight_decay_is_l2_in_the_gradient():
    import keras

    from reportgen.training.optimizers import SGD, make_optimizer

    x, y, w0, b0, grads = _linear_problem()
    (w1, b1), = _keras_steps(SGD(0.1, momentum=0.0), (0.1,))
    gw, gb = grads(w0, b0)
    np.testing.assert_allclose(w1, w0 - 0.1 * gw, rtol=1e-5, atol=1e-6)
    plain = SGD(0.1, momentum=0.0)
    plain.build([keras.Variable(w0)])
    assert [v.path for v in plain.variables] == ["sgd/iteration", "sgd/learning_rate"]
    # Adam with weight_decay = Keras's Adam on g + lambda w (not AdamW's decoupled decay)
    adam_l2 = make_optimizer(TrainingParams(weight_decay=0.1), 0.01)
    got = _keras_steps(adam_l2, (0.01, 0.01))
    w, b = w0.astype(np.float64), b0.astype(np.float64)
    m, v = [np.zeros_like(w), np.zeros_like(b)], [np.zeros_like(w), np.zeros_like(b)]
    for t, (got_w, got_b) in enumerate(got, start=1):
        g = [a + 0.1 * p for a, p in zip(grads(w, b), (w, b))]
        m = [0.9 * mi + 0.1 * gi for mi, gi in zip(m, g)]
        v = [0.999 * vi + 0.001 * gi ** 2 for vi, gi in zip(v, g)]
        alpha = 0.01 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)      # Keras's Adam
        w, b = (p - alpha * mi / (np.sqrt(vi) + 1e-7) for p, mi, vi in zip((w, b), m, v))
        np.testing.assert_allclose(got_w, w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_b, b, rtol=1e-5, atol=1e-6)
    names = [v.path for v in adam_l2.variables]
    assert names[:2] == ["adam/iteration", "adam/learning_rate"]


def test_the_default_optimizer_is_kerass_adam_and_the_params_dict_keeps_its_keys():
    """Existing models: the same Adam (so the same numbers) and the same to_dict (so the same
    cache keys) as before [training] optimizer and [[conv]] padding existed."""
    import keras

    from reportgen.training.optimizers import make_optimizer

    params = parse_model_params(TINY_PARAMS)
    optimizer = make_optimizer(params.training, 1e-3)
    assert type(optimizer) is keras.optimizers.Adam
    assert float(np.asarray(optimizer.learning_rate)) == np.float32(1e-3)
    assert _keras_steps(optimizer, (1e-3, 1e-3))[1][0].tolist() == \
        _keras_steps(keras.optimizers.Adam(1e-3), (1e-3, 1e-3))[1][0].tolist()
    data = params.to_dict()
    assert set(data["training"]) == {"epochs", "batch_size", "learning_rate", "save_every"}
    assert set(data["conv"][0]) == {"filters", "kernel_size", "strides", "activation"}
    sgd = parse_model_params({**TINY_PARAMS, "training": {"optimizer": "sgd"}}).to_dict()
    assert sgd["training"]["optimizer"] == "sgd" and "momentum" not in sgd["training"]


@pytest.mark.parametrize("training, key, expected", [
    ({"optimizer": "rmsprop"}, "training.optimizer", "one of ['adam', 'sgd']"),
    ({"momentum": 0.9}, "training.momentum", 'not set with optimizer "adam"'),
    ({"optimizer": "sgd", "momentum": 1.0}, "training.momentum", "a factor in [0, 1)"),
    ({"optimizer": "sgd", "momentum": "high"}, "training.momentum", "a non-negative number"),
    ({"weight_decay": -5e-4}, "training.weight_decay", "a non-negative number"),
    ({"learning_rate_decay": 1.5}, "training.learning_rate_decay", "a factor in (0, 1]"),
])
def test_bad_optimizer_settings_are_refused_in_one_line_naming_file_and_key(training, key,
                                                                          expected):
    with pytest.raises(ReportgenError) as caught:
        parse_model_params({**TINY_PARAMS, "training": training}, SOURCE)
    message = str(caught.value)
    assert "\n" not in message and f"'{key}' in {SOURCE}" in message
    assert expected in caught.value.expected


# --- [[conv]] padding ------------------------------------------------------------------------

def test_same_padding_gives_kerass_grid_and_a_field_starting_before_the_input():
    from reportgen.capsnet.description import describe

    # 11x11 -> conv 4x4 s2 "same": ceil(11 / 2) = 6 cells, 3 cells of padding of which 1
    # before (TensorFlow puts the odd one after) -> conv 3x3 s1 "same": 6, 1 before
    raw = {**TINY_PARAMS, "input_shape": [11, 11, 1],
           "conv": [{"filters": 4, "kernel_size": 4, "strides": 2, "padding": "same"},
                    {"filters": 4, "kernel_size": 3, "padding": "same"}],
           "primary": {"types": 2, "dims": 4, "kernel_size": 3, "strides": 1}}
    description = describe(parse_model_params(raw))
    conv1, conv2, primary = description.conv_layers
    assert (conv1.grid, conv1.padding, conv1.receptive_field.start) == ((6, 6), "same", (-1, -1))
    assert conv1.receptive_field.size == (4, 4) and conv1.receptive_field.stride == (2, 2)
    # conv2's first cell reads conv1's cell -1 (padding): 2 input pixels before conv1's field
    assert conv2.grid == (6, 6) and conv2.receptive_field.start == (-3, -3)
    assert primary.padding == "valid" and primary.grid == (4, 4)
    net = build(raw)
    shapes = {name: tuple(out.shape[1:3]) for name, out in net.model.output.items()}
    assert shapes["conv1"] == conv1.grid and shapes["conv2"] == conv2.grid
    assert net.model.get_layer("conv1").get_config()["padding"] == "same"
    # a kernel larger than its input is no error with "same" padding
    describe(parse_model_params({**raw, "conv": [{"filters": 4, "kernel_size": 13,
                                                  "padding": "same"}]}))


SAME = [{"filters": 8, "kernel_size": 3, "padding": "same"},
        {"filters": 8, "kernel_size": 3, "strides": 2, "padding": "same"}]


@pytest.mark.parametrize("name, raw", [
    ("capsnet", {**TINY_PARAMS, "conv": SAME}),
    ("cnn fc", {**tiny_cnn("fc"), "conv": SAME}),
    ("cnn cr", {**tiny_cnn("cr"), "conv": SAME}),
    ("gracapsnet", {**TINY_GRACAPS, "conv": SAME}),
    ("em", {**TINY_PARAMS, "family": "em", "conv": SAME[:1], "decoder": {"enabled": False},
            "primary": {"types": 2, "kernel_size": 1, "strides": 1},
            "em": {"routing_iterations": 1, "conv_caps": [{"types": 2, "kernel_size": 3,
                                                           "strides": 2}]}}),
])
def test_parameter_counts_with_same_padding_are_kerass(name, raw):
    """The families' arithmetic counts (which read the grids the padding gives) equal the
    built Keras model's; the padding of a convolution adds no parameter."""
    from reportgen.capsnet.description import describe
    from reportgen.capsnet.param_count import count_trainable_params

    params = parse_model_params(raw)
    net = build(raw)
    assert count_trainable_params(params) == net.trainable_params()
    outputs = {name: tuple(out.shape[1:3]) for name, out in net.model.output.items()}
    for conv in net.description.conv_layers[:len(raw["conv"])]:
        assert net.model.get_layer(conv.name).get_config()["padding"] == "same"
        assert outputs.get(conv.name, conv.grid) == conv.grid
    # the padding did change the grids (12 -> 12 -> 6, not 12 -> 10 -> 4)
    valid = {**raw, "conv": [{k: v for k, v in c.items() if k != "padding"} for c in raw["conv"]]}
    assert describe(parse_model_params(valid)).conv_layers[0].grid == (10, 10)
    assert net.description.conv_layers[0].grid == (12, 12)


def test_self_routing_refuses_conv_padding_its_own_padding_sets():
    from family_nets import TINY_SELF_ROUTING

    raw = {**TINY_SELF_ROUTING, "conv": [{"filters": 8, "kernel_size": 3, "padding": "same"}]}
    with pytest.raises(ReportgenError) as caught:
        parse_model_params(raw, SOURCE)
    assert f"'conv[0].padding' in {SOURCE}" in str(caught.value)
    assert "self_routing.padding" in caught.value.expected


# --- the classification loss's name ----------------------------------------------------------

def test_each_family_names_the_loss_it_trains():
    from reportgen.settings.families import family

    assert {name: family(name).classification_loss for name in
            ("capsnet", "em", "self_routing", "cnn", "gracapsnet")} == {
        "capsnet": "margin_loss", "em": "spread_loss", "self_routing": "nll",
        "cnn": "cross_entropy", "gracapsnet": "margin_loss"}
    # a CNN head trained with the margin loss on squashed class vectors says so
    assert build(tiny_cnn("cr_sf")).classification_loss_name() == "margin_loss"
    assert build(tiny_cnn("avg")).classification_loss_name() == "cross_entropy"


def test_a_family_declaring_a_record_key_as_its_loss_is_refused():
    from dataclasses import replace

    from reportgen.settings.families import check_family, family

    capsnet = family("capsnet")
    for bad in ("loss", "Margin Loss", ""):
        with pytest.raises(ValueError, match="classification_loss"):
            check_family(replace(capsnet, name="toy_loss", classification_loss=bad), {})
    check_family(replace(capsnet, name="toy_loss", classification_loss="focal_loss"), {})


@pytest.mark.slow
def test_training_curves_name_the_historys_own_loss_and_read_older_histories():
    from reportgen.figures.training_curves import (history_csv, render_training_curves,
                                                   training_curves_spec)

    def history(key):
        return [{"step": "0-0", "images_seen": 0, "loss": None, key: None, "val_accuracy": 0.1},
                {"step": "1-10", "images_seen": 100, "loss": 0.4, key: 0.3,
                 "reconstruction_loss": 0.1, "val_accuracy": 0.9}]

    for key, label in (("cross_entropy", "cross-entropy"), ("margin_loss", "margin loss"),
                       ("nll", "negative log-likelihood"), ("spread_loss", "spread loss")):
        spec = training_curves_spec(history(key), "loss")
        assert {(r["series"], r["value"]) for r in spec["data"]["values"]} == {
            ("total loss", 0.4), (label, 0.3), ("reconstruction loss", 0.1)}
        assert history_csv(history(key)).decode().splitlines()[0] == (
            f"step,epoch,batch,images_seen,loss,{key},reconstruction_loss,train_accuracy,"
            "val_accuracy")
        caption = render_training_curves(history(key), "M")[0].caption
        assert f"Top: total loss, {label} and reconstruction loss" in caption


# --- training and resuming -------------------------------------------------------------------

def _tiny_data(path: Path, n: int = 60) -> Path:
    """Class k has a bright bar in band k (tests/test_training.py's toy data)."""
    rng = np.random.default_rng(0)
    y = np.arange(n) % 3
    x = rng.uniform(0, 0.2, size=(n, 12, 12)).astype(np.float32)
    for k in range(3):
        x[y == k, 2 + 3 * k:4 + 3 * k, 1:11] = 1.0
    np.savez(path, x=x, y=y)
    return path


def _model(tmp_path, name: str, raw: dict, training: dict) -> Catalog:
    data = _tiny_data(tmp_path / "toy.npz")
    folder = tmp_path / "models" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "params.toml").write_text(toml_text({
        **raw, "dataset": str(data),
        "training": {"epochs": 1, "batch_size": 10, "save_every": 2, "learning_rate": 0.01,
                     **training}}))
    return Catalog(tmp_path / "models")


@pytest.mark.slow
def test_a_cnns_history_names_cross_entropy_and_its_optimizer(tmp_path, capsys):
    from reportgen.training.trainer import TrainOptions, train

    catalog = _model(tmp_path, "Cnn", tiny_cnn("avg"),
                     {"optimizer": "sgd", "momentum": 0.5, "weight_decay": 1e-4})
    history = train(catalog.get("Cnn"), TrainOptions())
    err = capsys.readouterr().err
    assert "Optimizer: SGD, momentum 0.5, weight decay 0.0001 (L2) at learning rate 0.01; " \
           "classification loss: cross_entropy" in err
    doc = json.loads((tmp_path / "models" / "Cnn" / "history.json").read_text())
    assert doc["classification_loss"] == "cross_entropy"
    assert all("margin_loss" not in r and "cross_entropy" in r for r in history)
    assert all(r["cross_entropy"] is not None for r in history[1:])
    assert doc["training"]["optimizer"] == "sgd" and doc["training"]["momentum"] == 0.5
    assert doc["training"]["weight_decay"] == 1e-4
    from reportgen.pages.views import training_view

    facts = {f["label"]: f["value"] for f in training_view(doc["training"])}
    assert facts["Optimizer"] == "SGD, momentum 0.5, weight decay 0.0001 (L2, in the gradient)"
    assert "Optimizer" not in {f["label"] for f in training_view({"learning_rate": 0.1})}


@pytest.mark.slow
def test_resuming_an_older_run_renames_its_margin_loss_records(tmp_path):
    """An older reportgen recorded a CNN's cross-entropy as "margin_loss" (in history.json and
    the train state's copy): resumed, every record names it cross_entropy."""
    from reportgen.training.trainer import TrainOptions, train

    catalog = _model(tmp_path, "Cnn", tiny_cnn("avg"), {})
    train(catalog.get("Cnn"), TrainOptions())
    folder = tmp_path / "models" / "Cnn"

    def older(doc: dict) -> dict:
        doc.pop("classification_loss")
        doc["records"] = [{("margin_loss" if k == "cross_entropy" else k): v
                           for k, v in r.items()} for r in doc["records"]]
        return doc

    with np.load(folder / "train_state.npz") as state:
        arrays = {k: state[k] for k in state.files}
    arrays["history"] = np.array(json.dumps(older(json.loads(str(arrays["history"]))),
                                            indent=1))
    np.savez(folder / "train_state.npz", **arrays)
    (folder / "history.json").write_text(str(arrays["history"]))
    before = json.loads(str(arrays["history"]))["records"]
    history = train(catalog.get("Cnn"), TrainOptions(epochs=2, resume=True))
    assert len(history) > len(before)
    assert all("margin_loss" not in r for r in history)
    assert [r["cross_entropy"] for r in history[:len(before)]] == \
        [r["margin_loss"] for r in before]
    doc = json.loads((folder / "history.json").read_text())
    assert doc["classification_loss"] == "cross_entropy" and doc["records"] == history


def _interrupt_after(monkeypatch, step: str) -> None:
    from reportgen.training import trainer

    commit = trainer.commit_step

    def commit_then_stop(model_dir, saved, *args, **kwargs):
        commit(model_dir, saved, *args, **kwargs)
        if str(saved) == step:
            raise KeyboardInterrupt

    monkeypatch.setattr(trainer, "commit_step", commit_then_stop)


@pytest.mark.slow
def test_a_resumed_sgd_run_computes_the_uninterrupted_runs_steps(tmp_path, monkeypatch):
    """SGD's momentum buffers are saved with each step and restored: interrupted after 1-2
    and resumed == never interrupted (with a decaying rate, which the buffers see)."""
    from reportgen.training.trainer import TrainOptions, open_run, train

    sgd = {"optimizer": "sgd", "momentum": 0.9, "weight_decay": 5e-4, "learning_rate": 0.05,
           "learning_rate_decay": 0.5}
    for name in ("Straight", "Resumed"):
        catalog = _model(tmp_path, name, TINY_PARAMS, sgd)
    straight = train(catalog.get("Straight"), TrainOptions(epochs=2))
    _interrupt_after(monkeypatch, "1-2")
    with pytest.raises(KeyboardInterrupt):
        train(catalog.get("Resumed"), TrainOptions(epochs=2))
    monkeypatch.undo()
    run = open_run(catalog.get("Resumed"), TrainOptions(epochs=2, resume=True))
    buffers = [v for v in run.optimizer.variables if v.path.endswith("_momentum")]
    assert buffers and all(np.any(np.asarray(b) != 0) for b in buffers)
    resumed = train(catalog.get("Resumed"), TrainOptions(epochs=2, resume=True))
    assert [r["step"] for r in resumed] == [r["step"] for r in straight]
    for a, b in zip(resumed, straight):
        for key in ("loss", "margin_loss", "val_accuracy"):
            assert a[key] == pytest.approx(b[key], rel=1e-5) if b[key] is not None \
                else a[key] is None, (a["step"], key)
    import h5py

    def weights(name):
        arrays = {}
        with h5py.File(tmp_path / "models" / name / "2-5.weights.h5", "r") as f:
            f.visititems(lambda key, item: arrays.__setitem__(key, item[()])
                         if isinstance(item, h5py.Dataset) else None)
        return arrays

    got, want = weights("Resumed"), weights("Straight")
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-7, err_msg=key)


@pytest.mark.slow
def test_resume_refuses_another_optimizer_and_says_a_changed_decay(tmp_path, capsys):
    """A run trained with Adam (or recorded without an optimizer: an older run) cannot go on
    with SGD, nor SGD with momentum without it; a changed weight decay or momentum is said."""
    from reportgen.training.trainer import TrainOptions, open_run, train

    catalog = _model(tmp_path, "Tiny", TINY_PARAMS, {})
    train(catalog.get("Tiny"), TrainOptions())
    params = tmp_path / "models" / "Tiny" / "params.toml"
    text = params.read_text()

    def resume_with(training: str):
        params.write_text(text.replace("learning_rate = 0.01", f"learning_rate = 0.01, {training}"))
        return open_run(Catalog(tmp_path / "models").get("Tiny"),
                        TrainOptions(epochs=2, resume=True))

    with pytest.raises(ReportgenError) as caught:
        resume_with('optimizer = "sgd"')
    message = str(caught.value)
    assert "\n" not in message and str(params) in message
    assert caught.value.expected == 'optimizer = "adam"'
    assert caught.value.received == 'optimizer = "sgd" with momentum 0.9'
    assert "--fresh" in caught.value.fix
    capsys.readouterr()
    resume_with("weight_decay = 0.001")
    assert "Weight decay changed from 0 to 0.001" in capsys.readouterr().err
    # an SGD run: its momentum may change (said), not whether it has a buffer
    folder = tmp_path / "models" / "Tiny"
    catalog = _model(tmp_path, "Sgd", TINY_PARAMS, {"optimizer": "sgd"})
    train(catalog.get("Sgd"), TrainOptions())
    params, text = folder.parent / "Sgd" / "params.toml", (folder.parent / "Sgd" /
                                                           "params.toml").read_text()

    def resume_sgd(momentum: float):
        params.write_text(text.replace('optimizer = "sgd"',
                                       f'optimizer = "sgd", momentum = {momentum}'))
        return open_run(Catalog(tmp_path / "models").get("Sgd"),
                        TrainOptions(epochs=2, resume=True))

    capsys.readouterr()
    resume_sgd(0.5)
    assert "SGD momentum changed from 0.9 to 0.5" in capsys.readouterr().err
    with pytest.raises(ReportgenError) as caught:
        resume_sgd(0.0)
    assert caught.value.received == 'optimizer = "sgd" without momentum (momentum = 0)'
