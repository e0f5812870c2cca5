"""A model's own saved steps are held to the rule `reportgen import` holds a checkpoint to
(reportgen.training.checkpoints.weights_problem): floating-point, finite, of magnitude at most
MAX_WEIGHT. `build` refuses a step breaking it in one line naming the file, the tensor and the
fix, and builds the model's other steps."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from reportgen.training.checkpoints import (MAX_WEIGHT, nonfinite_weights, weights_problem)


def _spoiled(path, how):
    """Rewrite the first kernel of the weights file `path`: scaled by 1e30, or as int32 or
    bool (what a careless conversion leaves); returns the tensor's name."""
    with h5py.File(path, "r+") as f:
        names = []
        f.visititems(lambda n, item: names.append(n) if isinstance(item, h5py.Dataset) else None)
        name = sorted(names)[0]
        data = f[name][()]
        del f[name]
        f.create_dataset(name, data={"x1e30": lambda a: a * 1e30 + 1e30,
                                     "int32": lambda a: (a * 100).astype(np.int32),
                                     "bool": lambda a: a > 0}[how](data))
    return name


def _weights_file(path, arrays):
    with h5py.File(path, "w") as f:
        for name, array in arrays.items():
            f.create_dataset(name, data=array)
    return path


@pytest.mark.parametrize("array, words", [
    (np.full((2, 3), 1e30, np.float32), "holds a weight of magnitude 1e+30"),
    (np.ones((2, 3), np.int32), "of dtype int32"),
    (np.ones((2, 3), bool), "of dtype bool"),
    (np.array([np.nan, 1], np.float32), "holds 1 NaN and 0 infinite of its 2 values"),
])
def test_a_saved_steps_file_is_held_to_the_import_rule(tmp_path, array, words):
    path = _weights_file(tmp_path / "1-1.weights.h5",
                         {"layers/conv/vars/0": np.zeros((2, 2), np.float32),
                          "layers/dense/vars/0": array})
    assert nonfinite_weights(path) == f"tensor 'layers/dense/vars/0' {words}"
    assert weights_problem([("w", np.full(3, MAX_WEIGHT, np.float32))]) is None


def test_an_answer_of_the_former_rule_is_not_reused(tmp_path):
    """A file a former build found fine (NaN and infinite values only) is checked again."""
    from reportgen.engine.digests import DigestMemo

    path = _weights_file(tmp_path / "1-1.weights.h5",
                         {"layers/dense/vars/0": np.full(3, 1e30, np.float32)})
    memo = DigestMemo(None)
    memo.fact(path, "nonfinite", lambda p: None)          # the former rule's answer
    assert memo.fact(path, "nonfinite", nonfinite_weights).endswith("magnitude 1e+30")


@pytest.mark.slow
def test_build_refuses_a_step_of_1e30_int32_or_bool_weights_and_builds_the_others(
        tmp_path, monkeypatch):
    from conftest import TINY_PARAMS
    from family_nets import write_model
    from test_training import _tiny_data

    from reportgen.catalog import Catalog
    from reportgen.commands.build import BuildOptions, build
    from reportgen.training.trainer import TrainOptions, train

    monkeypatch.chdir(tmp_path)
    data = _tiny_data(tmp_path / "toy.npz", n=50)
    models = tmp_path / "models"
    write_model(models, "Tiny", TINY_PARAMS, data)
    train(Catalog(models).get("Tiny"), TrainOptions(limit=40))
    entry = Catalog(models).get("Tiny")
    steps = {str(s): s for s in entry.steps}
    assert len(steps) >= 4, steps
    spoiled = dict(zip(list(steps)[1:4], ("x1e30", "int32", "bool")))
    tensors = {step: _spoiled(entry.weights_path(steps[step]), how)
               for step, how in spoiled.items()}
    options = BuildOptions(images="test:0-1", analyses="none", render_site=False,
                           cache_dir=str(tmp_path / "cache"), site_dir=str(tmp_path / "site"))
    summary = build(Catalog(models), options)
    failed = sorted(summary.failed)
    assert len(failed) == 3, summary.failed
    words = {"x1e30": "holds a weight of magnitude", "int32": "of dtype int32",
             "bool": "of dtype bool"}
    for line, (step, how) in zip(failed, sorted(spoiled.items())):
        path = entry.weights_path(steps[step])
        assert line.startswith(f"Tiny step {step}: Weights file {path} holds weights that are "
                               f"not numbers a network trains to: tensor '{tensors[step]}' "
                               f"{words[how]}"), line
        assert "\n" not in line and "Fix: Build the other steps (--steps)" in line
    # the model's other steps are built
    assert summary.computed > 0
