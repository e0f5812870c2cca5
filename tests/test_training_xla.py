"""params.toml's `[training] xla = true`: the training step runs XLA-compiled for a network it
speeds up (the compact MultiMNIST CapsNet), whatever its family measured, with the same
arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from family_nets import build

TINY = {"dataset": "mnist", "input_shape": [12, 12, 1], "num_classes": 3,
        "conv": [{"filters": 4, "kernel_size": 3}],
        "primary": {"types": 2, "dims": 4, "kernel_size": 3, "strides": 2},
        "class_caps": {"dims": 4}, "decoder": {"units": [8]}}


def _step_outputs(xla: bool):
    import keras

    from reportgen.training.trainer import _xla_training, make_train_step

    net = build({**TINY, "training": {"xla": xla}}, seed=3)
    optimizer = keras.optimizers.Adam(1e-2)
    optimizer.build(net.model.trainable_variables)
    step = make_train_step(net, optimizer)
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 1, (6, 12, 12, 1)).astype(np.float32)
    one_hot = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 6)]
    first = [float(v) for v in step(images, one_hot)]
    second = [float(v) for v in step(images, one_hot)]     # after one update of the weights
    return _xla_training(net), step, (images, one_hot), first + second


@pytest.mark.slow
def test_training_xla_compiles_the_step_and_keeps_its_arithmetic():
    plain_on, plain_step, args, plain = _step_outputs(False)
    xla_on, step, args, compiled = _step_outputs(True)
    assert (plain_on, xla_on) == (False, True)       # the CapsNet family alone does not compile
    # only an XLA-compiled tf.function has an XLA (HLO) form to show
    assert "HloModule" in step.experimental_get_compiler_ir(*args)(stage="hlo")
    with pytest.raises(ValueError, match="jit_compile"):
        plain_step.experimental_get_compiler_ir(*args)
    np.testing.assert_allclose(compiled, plain, rtol=2e-4, atol=1e-6)


def test_training_xla_must_be_a_boolean():
    from reportgen.errors import ReportgenError
    from reportgen.settings.model_params import parse_model_params

    assert parse_model_params(TINY).training.xla is False
    assert "xla" not in parse_model_params(TINY).to_dict().get("training", {})
    with pytest.raises(ReportgenError, match="training.xla"):
        parse_model_params({**TINY, "training": {"xla": "yes"}})
