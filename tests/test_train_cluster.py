"""`reportgen train GLOB [--scheduler local:N]`: several models trained at once on a real Dask
LocalCluster (two worker processes), each into its own folder, with the same weights as
`reportgen train NAME` in this process; a model that fails is reported once and the others
train."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from cluster_fixture import run
from test_training import TINY_TOML, _tiny_data

pytestmark = pytest.mark.slow


def _models(root, names, data):
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / "params.toml").write_text(TINY_TOML.format(data=data))
    return root


def _weights(path) -> dict[str, np.ndarray]:
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()])
                     if isinstance(obj, h5py.Dataset) else None)
    return out


def _steps(folder) -> list[str]:
    return sorted(p.name for p in folder.glob("*.weights.h5"))


def test_models_train_one_per_worker_with_the_weights_of_a_local_run(tmp_path):
    data = _tiny_data(tmp_path / "toy.npz")
    cluster = _models(tmp_path / "cluster" / "models", ("Tiny_A", "Tiny_B"), data)
    local = _models(tmp_path / "local" / "models", ("Tiny_A", "Tiny_B"), data)

    proc = run(tmp_path / "cluster", cluster, "train", "Tiny_*", "--seed", "3",
               "--scheduler", "local:2")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Dask scheduler" in out and "Traceback" not in out
    for name in ("Tiny_A", "Tiny_B"):
        assert f"{name}: last step 1-5, validation accuracy" in out    # 48 training images, batch 10
        assert (cluster / name / "history.json").is_file()
    # the same glob without --scheduler: one model after the other, in this process
    reference = run(tmp_path / "local", local, "train", "Tiny_*", "--seed", "3")
    assert reference.returncode == 0, reference.stdout + reference.stderr

    # the same steps, and each step's weights equal to the in-process run's
    for name in ("Tiny_A", "Tiny_B"):
        assert _steps(cluster / name) == _steps(local / name) != []
        for step in _steps(local / name):
            ours, theirs = _weights(cluster / name / step), _weights(local / name / step)
            assert ours.keys() == theirs.keys() and ours
            for key in ours:
                np.testing.assert_array_equal(ours[key], theirs[key],
                                              err_msg=f"{name} {step} {key}")


def test_a_failing_model_is_reported_once_and_the_others_train(tmp_path):
    data = _tiny_data(tmp_path / "toy.npz")
    models = _models(tmp_path / "models", ("Tiny_A", "Tiny_Bad"), data)
    broken = tmp_path / "gone.npz"
    (models / "Tiny_Bad" / "params.toml").write_text(TINY_TOML.format(data=broken))

    for extra in (("--scheduler", "local:2"), ()):          # on the cluster, and here
        proc = run(tmp_path / "work", models, "train", "Tiny_*", "--epochs", "1", "--fresh",
                   *extra)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 1, out
        failed = [line for line in out.splitlines() if line.startswith("FAILED:")]
        assert len(failed) == 1 and failed[0].startswith("FAILED: Tiny_Bad: "), out
        assert "gone.npz" in failed[0] and "Traceback" not in out
        assert "Tiny_A: last step 1-5" in out
        assert _steps(models / "Tiny_A")[-1] == "1-5.weights.h5"
        assert not _steps(models / "Tiny_Bad")


def test_a_bad_scheduler_is_one_line_before_anything_trains(tmp_path):
    data = _tiny_data(tmp_path / "toy.npz")
    models = _models(tmp_path / "models", ("Tiny_A",), data)
    proc = run(tmp_path / "work", models, "train", "Tiny_*", "--scheduler", "local:0")
    assert proc.returncode == 2
    assert [line for line in proc.stderr.splitlines() if line] == [
        line for line in proc.stderr.splitlines() if line.startswith("Error: Invalid --scheduler")]
    assert not _steps(models / "Tiny_A")
