"""A full or read-only disk under the site, the store, the models folder or an export, met by
real `reportgen` processes: one line naming the path (for a full disk, the space needed and
free), exit 2, and the previous site, store, steps and files as they were.

Each process runs in a mount namespace of its own (`unshare`) on a small tmpfs mounted over
one folder, so a disk fills up for real without touching the machine's."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_training import TINY_TOML, _tiny_data

pytestmark = [pytest.mark.faults, pytest.mark.slow]

UNSHARE = shutil.which("unshare")


def _namespaces_work() -> bool:
    if UNSHARE is None:
        return False
    probe = subprocess.run([UNSHARE, "--mount", "--map-root-user", "true"],
                           capture_output=True)
    return probe.returncode == 0


requires_mounts = pytest.mark.skipif(not _namespaces_work(),
                                     reason="needs `unshare --mount --map-root-user` (util-linux"
                                            " and user namespaces) to mount a small disk")


def _on_small_disk(args, cwd: Path, disk: Path, size_kb: int, *, seed: Path | None = None,
                   read_only: bool = False):
    """Run `reportgen args` with a `size_kb` tmpfs mounted over `disk` (first filled with a
    copy of `seed`; remounted read-only with `read_only`); afterwards the disk's files are
    copied to `disk`.after (the mount dies with the process). (result, the copy)."""
    disk.mkdir(parents=True, exist_ok=True)
    after = disk.with_name(disk.name + ".after")
    after.mkdir()
    q = shlex.quote
    script = [f"mount -t tmpfs -o size={size_kb}k tmpfs {q(str(disk))}"]
    if seed is not None:
        script.append(f"cp -a {q(str(seed))}/. {q(str(disk))}/")
    if read_only:
        script.append(f"mount -o remount,ro {q(str(disk))}")
    script += [shlex.join([sys.executable, "-m", "reportgen", *map(str, args)]) + "; rc=$?",
               f"cp -a {q(str(disk))}/. {q(str(after))}/", "exit $rc"]
    result = subprocess.run([UNSHARE, "--mount", "--map-root-user", "sh", "-c",
                             " && ".join(script[:-2]) + "; " + "; ".join(script[-2:])],
                            cwd=cwd, capture_output=True, text=True, timeout=600)
    return result, after


def _one_error_line(result) -> str:
    output = result.stdout + result.stderr
    lines = [line for line in output.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1 and "Traceback" not in output, output
    assert result.returncode == 2, output
    return lines[0]


def _digests(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """models/Tiny trained one epoch, and a small site built of it (site/)."""
    from reportgen.catalog import Catalog
    from reportgen.training.trainer import TrainOptions, train

    root = tmp_path_factory.mktemp("disk")
    (root / "models" / "Tiny").mkdir(parents=True)
    (root / "models" / "Tiny" / "params.toml").write_text(
        TINY_TOML.format(data=_tiny_data(root / "toy.npz")))
    train(Catalog(root / "models").get("Tiny"), TrainOptions(epochs=1))
    result = subprocess.run([sys.executable, "-m", "reportgen", "build", *SMALL,
                             "--site-dir", "site"], cwd=root, capture_output=True, text=True,
                            env={**os.environ, "REPORTGEN_MODELS": str(root / "models")},
                            timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return root


SMALL = ["--steps", "last", "--images", "test:0", "--analyses", "none", "--technique",
         "predictions"]


@requires_mounts
def test_a_site_that_does_not_fit_is_refused_and_the_old_site_stays(project, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(project / "site", old / "site")
    used = sum(p.stat().st_size for p in old.rglob("*") if p.is_file())
    disk = tmp_path / "disk"
    result, after = _on_small_disk(
        ["--models-dir", project / "models", "build", "--steps", "all", "--images", "test:0-7",
         "--analyses", "none", "--site-dir", disk / "site"],
        project, disk, used // 1024 + 512, seed=old)
    line = _one_error_line(result)
    assert f"No space for the site {disk / 'site'} on its disk (about" in line
    assert "needed" in line and "free" in line and "Fix:" in line
    assert _digests(after / "site") == _digests(old / "site")         # the old site, intact
    assert sorted(p.name for p in after.iterdir()) == ["site"]      # no staging folder left


@requires_mounts
def test_a_full_store_is_one_line_and_keeps_what_it_stored(project, tmp_path):
    disk = tmp_path / "cache"
    result, after = _on_small_disk(
        ["--models-dir", project / "models", "build", "--steps", "all", "--images", "test:0-3",
         "--analyses", "none", "--cache-dir", disk, "--site-dir", tmp_path / "site"],
        project, disk, 160)
    line = _one_error_line(result)
    assert f"Cannot write to the artifact store {disk}: No space left on device (" in line
    assert " free)" in line
    assert not (tmp_path / "site").exists()
    assert not list((after / "tmp").iterdir())                 # no half-written entry


@requires_mounts
def test_training_on_a_full_disk_keeps_the_saved_steps(project, tmp_path):
    seed = tmp_path / "seed"
    shutil.copytree(project / "models" / "Tiny", seed / "Tiny")
    before = _digests(seed)
    used = sum(p.stat().st_size for p in seed.rglob("*") if p.is_file())
    disk = tmp_path / "models"
    result, after = _on_small_disk(["--models-dir", disk, "train", "Tiny", "--resume",
                                    "--epochs", "40"], project, disk, used // 1024 + 160,
                                   seed=seed)
    line = _one_error_line(result)
    assert f"No space left on the disk to write {disk}" in line
    assert "needed" in line and "free" in line and "--models-dir" in line
    for name, digest in before.items():     # every step saved before is still there, intact
        if name.endswith(".weights.h5"):
            assert _digests(after)[name] == digest, name
    from reportgen.model_folder import ModelFolder

    records = ModelFolder("Tiny", after / "Tiny").history()    # still a valid history
    assert [r["step"] for r in records][:4] == ["0-0", "1-2", "1-4", "1-5"]


@requires_mounts
def test_an_import_into_a_read_only_models_folder_is_one_line(project, tmp_path):
    torch = pytest.importorskip("torch", reason="writes a PyTorch checkpoint to import")
    from test_import_safetensors import gram_ai_state

    path = tmp_path / "epoch_1.pt"
    torch.save({k: torch.from_numpy(v) for k, v in gram_ai_state(units=()).items()}, path)
    disk = tmp_path / "models"
    result, after = _on_small_disk(["--models-dir", disk, "import", path, "--from", "gram-ai"],
                                   project, disk, 64, read_only=True)
    line = _one_error_line(result)
    assert f"Cannot write {disk}" in line and "read-only" in line
    assert not list(after.iterdir())


@requires_mounts
def test_an_export_that_does_not_fit_keeps_the_old_supplement(project, tmp_path):
    seed = tmp_path / "seed"
    seed.mkdir()
    exported = subprocess.run([sys.executable, "-m", "reportgen", "export", "--site-dir",
                               "site", "--out", seed / "supplement.zip"], cwd=project,
                              capture_output=True, text=True, timeout=600)
    assert exported.returncode == 0, exported.stdout + exported.stderr
    old = (seed / "supplement.zip").read_bytes()
    disk = tmp_path / "out"         # room for the old supplement, not for a second one beside it
    result, after = _on_small_disk(["export", "--site-dir", "site", "--out",
                                    disk / "supplement.zip", "--force"],
                                   project, disk, len(old) * 3 // 2048 + 4, seed=seed)
    line = _one_error_line(result)
    assert f"No space left on the disk to write {disk / 'supplement.zip'} (about" in line
    assert "needed" in line and "free" in line and "--out" in line
    assert (after / "supplement.zip").read_bytes() == old
    assert sorted(p.name for p in after.iterdir()) == ["supplement.zip"]
