"""A tiny model of matrix capsules with EM routing trained a few steps by `reportgen train`:
the spread loss, its margin schedule and the learning-rate decay, no decoder. Its build (every
analysis that applies, the others reported with their reason) is in test_family_builds."""

from __future__ import annotations

import numpy as np
import pytest
from em_fixture import TINY_EM_TOML
from test_training import _tiny_data

from reportgen.catalog import Catalog
from reportgen.settings.model_params import PARAMS_FILE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from reportgen.training.trainer import TrainOptions, train

    tmp = tmp_path_factory.mktemp("em_build")
    data = _tiny_data(tmp / "toy.npz")
    root = tmp / "models"
    (root / "TinyEM").mkdir(parents=True)
    (root / "TinyEM" / PARAMS_FILE).write_text(TINY_EM_TOML.format(data=data))
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
