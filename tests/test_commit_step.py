"""A saved step that cannot be committed leaves nothing behind: when the disk fills while its
weights or its train state are written, the pending weights file (8.5 MB for MNIST_Demo) goes
at once instead of holding the disk until the next `train`; once the state names the step,
the pending weights stay, and the next start completes the step from them."""

from __future__ import annotations

import errno

import numpy as np
import pytest

from reportgen.model_folder import ModelFolder, Step
from reportgen.training import run_state
from reportgen.training.run_state import commit_step, recover

FULL = OSError(errno.ENOSPC, "No space left on device")


def _folder(tmp_path) -> ModelFolder:
    folder = ModelFolder.at(tmp_path / "Tiny")
    folder.path.mkdir()
    commit_step(folder, Step(1, 2), lambda path: path.write_bytes(b"w1"),
                [np.zeros(3, np.float32)], {"records": [{"step": "1-2"}]}, {"seed": 0})
    return folder


def _names(folder) -> list[str]:
    return sorted(p.name for p in folder.path.iterdir())


def test_a_step_the_disk_refuses_leaves_no_pending_weights(tmp_path, monkeypatch):
    folder = _folder(tmp_path)
    before = _names(folder)

    def weights_then_full(path):
        path.write_bytes(b"w" * 1000)
        raise FULL

    with pytest.raises(OSError):
        commit_step(folder, Step(1, 4), weights_then_full, [np.ones(3, np.float32)],
                    {"records": [{"step": "1-2"}, {"step": "1-4"}]}, {"seed": 0})
    assert _names(folder) == before                     # step 1-2 as it was, nothing more

    def state_full(*args):
        raise FULL

    monkeypatch.setattr(run_state, "_write_state", state_full)
    with pytest.raises(OSError):
        commit_step(folder, Step(1, 4), lambda path: path.write_bytes(b"w2"),
                    [np.ones(3, np.float32)], {"records": [{"step": "1-2"}, {"step": "1-4"}]},
                    {"seed": 0})
    assert _names(folder) == before


def test_after_the_commit_point_the_pending_weights_stay_and_complete_the_step(tmp_path,
                                                                                 monkeypatch):
    folder = _folder(tmp_path)
    real = run_state.atomic_write_text

    def history_full(path, text):
        raise FULL

    monkeypatch.setattr(run_state, "atomic_write_text", history_full)
    with pytest.raises(OSError):
        commit_step(folder, Step(1, 4), lambda path: path.write_bytes(b"w2"),
                    [np.ones(3, np.float32)], {"records": [{"step": "1-2"}, {"step": "1-4"}]},
                    {"seed": 0})
    assert folder.pending_path(Step(1, 4)).read_bytes() == b"w2"
    monkeypatch.setattr(run_state, "atomic_write_text", real)
    state, notices = recover(folder)
    assert str(state.step) == "1-4" and folder.weights_path(Step(1, 4)).read_bytes() == b"w2"
    assert any("Completed step 1-4" in n for n in notices)
