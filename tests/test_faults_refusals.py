"""What reportgen refuses before it writes anything, each tried with a real `reportgen` process:
one line naming the file or value and the fix, exit 2, and nothing written or lost."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.faults, pytest.mark.slow]


def _run(args, cwd, models=None, timeout=240, **env):
    extra = {"REPORTGEN_MODELS": str(models)} if models is not None else {}
    return subprocess.run([sys.executable, "-m", "reportgen", *args], cwd=cwd,
                          env={**os.environ, **extra, **env}, capture_output=True, text=True,
                          timeout=timeout)


def _one_error_line(result) -> str:
    output = result.stdout + result.stderr
    lines = [line for line in output.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1 and "Traceback" not in output, output
    return lines[0]


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its bytes (to show that nothing changed)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------------------------
# A pickle asking for code


def test_a_pickle_that_calls_a_function_is_refused_naming_it(tmp_path):
    torch = pytest.importorskip("torch", reason="reading .pt files needs torch")
    ran = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {ran}",)

    path = tmp_path / "epoch_10.pt"
    torch.save({"conv1.weight": torch.zeros(2), "extra": Payload()}, path)
    before = _tree(tmp_path)
    result = _run(["import", str(path), "--from", "gram-ai"], tmp_path, tmp_path / "models")
    line = _one_error_line(result)
    assert result.returncode == 2, line
    assert "holds code that reportgen will not run" in line and str(path) in line
    assert f"{os.system.__module__}.system" in line           # the blocked global, named
    assert "damaged" not in line and "weights_only" not in line and "trusted" not in line
    assert not ran.exists() and _tree(tmp_path) == before    # nothing ran, nothing written
