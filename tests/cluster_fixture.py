"""Two tiny trained models and the in-process build of them that cluster builds must equal
byte for byte; made once per test run, for every xdist worker (tests/test_cluster.py and
tests/test_faults_cluster.py share them)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from trained_tiny import copy_trained_tiny, made_once

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("Tiny_A", "Tiny_B")
# Every scope of technique (input, checkpoint, dataset) at two steps of each model (the last and
# the untrained 0-0): four tasks on the cluster, a site that draws in seconds.
BUILD = ("build", "--steps", "last", "--images", "test:0", "--eval-images", "10",
         "--technique", "predictions", "--technique", "conv_kernels",
         "--technique", "routing_entropy")


def trained_models(tmp_path_factory) -> Path:
    """models/Tiny_A and models/Tiny_B, one epoch each (seeds 0 and 1); treat as read-only."""
    def make(base: Path) -> None:
        for seed, name in enumerate(MODELS):
            copy_trained_tiny(tmp_path_factory, base / "models" / name, seed=seed)

    return made_once(tmp_path_factory, "cluster-models", make) / "models"


def copy_models(tmp_path_factory, target: Path) -> Path:
    shutil.copytree(trained_models(tmp_path_factory), target)
    return target


# MkDocs dates the sitemap (and its gzip header) by the build's day: builds compared byte for
# byte (each process's, and an in-process one's) must not see midnight pass between them
BUILD_DATE = {"SOURCE_DATE_EPOCH": "1767225600"}


def env(**extra: str) -> dict:
    """The environment of a `reportgen` process (and of its cluster's workers): this checkout
    importable, no settings of the caller's."""
    out = {k: v for k, v in os.environ.items()
           if not k.startswith("REPORTGEN_") and k != "PYTHONPATH"}
    return {**out, "PYTHONPATH": str(ROOT), **BUILD_DATE, **extra}


def command(models: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "reportgen", "--models-dir", str(models), *args]


def run(cwd: Path, models: Path, *args: str, timeout: float = 600,
        **extra: str) -> subprocess.CompletedProcess:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run(command(models, *args), cwd=cwd, env=env(**extra), timeout=timeout,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)


def tree(folder: Path) -> dict[str, bytes]:
    """Every file's bytes, by path."""
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def reference(tmp_path_factory) -> tuple[dict[str, bytes], str]:
    """(site files, output) of the in-process build of the trained models with BUILD."""
    def make(work: Path) -> None:
        proc = run(work, trained_models(tmp_path_factory), *BUILD, "--cache-dir", "cache")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (work / "output.txt").write_text(proc.stdout + proc.stderr)

    work = made_once(tmp_path_factory, "cluster-reference", make)
    return tree(work / "site"), (work / "output.txt").read_text()


def computed(output: str) -> int:
    """N of the summary line 'computed N · reused M · …'."""
    line = next(x for x in output.splitlines() if x.startswith("computed "))
    return int(line.split()[1])
