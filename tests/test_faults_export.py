"""`reportgen export` against files it did not write and under `kill -9`, with real processes:
a user's file at --out (their own zip, a text file, a link) is refused in one line and left byte
for byte, with or without --force; a supplement reportgen wrote is replaced only with --force;
an export killed mid-write leaves --out as it was (or absent), and its temporary file goes with
the next export, but never one whose process lives or whose bytes reportgen did not begin."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from reportgen.commands.supplement import SUPPLEMENT_MARKER
from trained_tiny import copy_trained_tiny

pytestmark = [pytest.mark.faults, pytest.mark.slow]

# `reportgen export` (the real command line) that stalls after the zip's third entry, the
# bytes so far on disk, so that it can be killed mid-write.
STALLED = """
import os, sys, time, zipfile
from pathlib import Path
ready, entries = Path(sys.argv[1]), []
real = zipfile.ZipFile.writestr

def writestr(self, info, data, *args, **kwargs):
    real(self, info, data, *args, **kwargs)
    entries.append(info)
    if len(entries) == 3:
        self.fp.flush()
        partial = ready.with_name(ready.name + ".partial")   # whole or absent to the reader
        partial.write_text(str(os.getpid()))
        os.replace(partial, ready)
        time.sleep(600)

zipfile.ZipFile.writestr = writestr
from reportgen.cli import main
main(sys.argv[2:], prog_name="reportgen")
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A tiny model trained one epoch and built (last step, one input, two techniques):
    (site dir, cache dir)."""
    from reportgen.catalog import Catalog
    from reportgen.commands.build import BuildOptions, build

    root = tmp_path_factory.mktemp("export-faults")
    models = root / "models"
    copy_trained_tiny(tmp_path_factory, models / "Tiny")
    summary = build(Catalog(models), BuildOptions(
        models="Tiny", steps="last", images="test:0-1", analyses="none",
        techniques=("predictions", "conv_feature_maps"), cache_dir=str(root / "cache"),
        site_dir=str(root / "site")))
    assert summary.ok, summary.failed
    return root / "site", root / "cache"


def _args(built, out: Path, *extra: str) -> list[str]:
    site, cache = built
    return ["export", "--site-dir", str(site), "--cache-dir", str(cache), "--out", str(out),
            *extra]


def _export(built, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reportgen", *_args(built, out, *extra)],
                          capture_output=True, text=True, timeout=240, cwd=out.parent)


def _error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_file_reportgen_did_not_write_is_never_replaced(built, tmp_path):
    thesis = tmp_path / "thesis.zip"                     # the user's own zip
    with zipfile.ZipFile(thesis, "w") as archive:
        archive.writestr("chapter1.tex", "\\chapter{Capsules}")
    notes = tmp_path / "notes.txt"
    notes.write_text("not a zip at all")
    ours = tmp_path / "supplement.zip"
    assert _export(built, ours).returncode == 0
    link = tmp_path / "link.zip"                         # a link, even to a supplement
    link.symlink_to(ours)
    before = {p: p.read_bytes() for p in (thesis, notes, ours)}

    for user_file in (thesis, notes):
        for extra in ((), ("--force",)):
            line = _error(_export(built, user_file, *extra))
            assert str(user_file) in line and "not a supplement reportgen wrote" in line, line
            assert "Fix: choose another --out" in line, line
    line = _error(_export(built, link, "--force"))
    assert str(link) in line and "symbolic link" in line and "another --out" in line, line
    assert link.is_symlink() and os.readlink(link) == str(ours)
    assert {p: p.read_bytes() for p in before} == before
    assert _leftovers(tmp_path) == []


def test_a_supplement_is_replaced_only_with_force(built, tmp_path):
    out = tmp_path / "supplement.zip"
    assert _export(built, out, "--inputs", "none").returncode == 0
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
        assert names[0] == SUPPLEMENT_MARKER and names == sorted(names)
        assert json.loads(archive.read(SUPPLEMENT_MARKER))["written_by"] == "reportgen export"
    before = out.read_bytes()

    line = _error(_export(built, out))
    assert str(out) in line and "supplement reportgen wrote earlier" in line
    assert "pass --force to replace it, or choose another --out" in line
    assert out.read_bytes() == before

    result = _export(built, out, "--force")
    assert result.returncode == 0, result.stderr
    with zipfile.ZipFile(out) as archive:       # replaced: now with the per-input figures
        added = set(archive.namelist()) - set(names)
    assert any("/test-0/" in name for name in added), sorted(added)
    assert _leftovers(tmp_path) == []


def _killed_export(built, out: Path, ready: Path) -> Path:
    """Start an export to `out` that stalls mid-write, kill -9 it; its temporary file."""
    proc = subprocess.Popen([sys.executable, "-c", STALLED, str(ready),
                             *_args(built, out, "--force")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=out.parent)
    try:
        deadline = time.monotonic() + 240
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the export never reached its third entry"
            time.sleep(0.05)
        pid = int(ready.read_text())
        os.kill(pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:          # a failed check: no stalled export outlives the test
            proc.kill()
            proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    temp = out.with_name(f".{out.name}.{pid}.tmp")
    assert [n for n in _leftovers(out.parent) if n.startswith(f".{out.name}.")] == [temp.name]
    return temp


def test_kill_9_mid_export_keeps_out_and_the_next_export_cleans_only_its_own_leftovers(
        built, tmp_path):
    out = tmp_path / "supplement.zip"
    assert _export(built, out).returncode == 0
    before = out.read_bytes()

    temp = _killed_export(built, out, tmp_path / "ready")
    assert out.read_bytes() == before                   # the old supplement, untouched
    assert temp.read_bytes()[:4] == b"PK\x03\x04"

    fresh = tmp_path / "fresh.zip"                      # killed before it ever existed
    fresh_temp = _killed_export(built, fresh, tmp_path / "ready-fresh")
    assert not fresh.exists()
    fresh_temp.unlink()

    # Beside the leftover: a file of the same pattern whose process lives (this test), and one
    # of a gone process that reportgen did not begin (other bytes); both must stay.
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    live = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    live.write_bytes(temp.read_bytes())
    foreign = out.with_name(f".{out.name}.{finished.pid}.tmp")
    foreign.write_bytes(b"a user's file that happens to have this name")

    result = _export(built, out, "--force")
    assert result.returncode == 0, result.stderr
    assert not temp.exists()
    assert sorted(p.name for p in (live, foreign) if p.exists()) == sorted([live.name,
                                                                            foreign.name])
    assert out.read_bytes() == before                   # the same site gives the same bytes
    with zipfile.ZipFile(out) as archive:
        assert archive.testzip() is None
