"""Hostile plug-ins cost one line each, never the command: a package that calls sys.exit() or
hangs at import is named and skipped (REPORTGEN_PLUGIN_SECONDS limits an import), and a plug-in
never takes a built-in family's or technique's name, installed or run from a source tree."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _distribution(site: Path, package: str, module: str, source: str, entry_points: str):
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{package.replace('-', '_')}-0.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


def _env(site: Path, **extra) -> dict:
    return {**os.environ, **extra, "PYTHONPATH": os.pathsep.join(
        [str(site), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


@pytest.mark.slow
def test_exit_and_hang_at_import_cost_one_line_each(tmp_path):
    site = tmp_path / "site-packages"
    site.mkdir()
    _distribution(site, "exiting-plugin", "exiting_plugin", "import sys\nsys.exit(3)\n",
                  "[reportgen.families]\nexiting = exiting_plugin:FAMILY\n")
    _distribution(site, "hanging-plugin", "hanging_plugin", "import time\ntime.sleep(600)\n",
                  "[reportgen.techniques]\nhanging = hanging_plugin:TECHNIQUE\n")
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "reportgen", "plugins"], capture_output=True,
                          text=True, timeout=300,
                          env=_env(site, REPORTGEN_PLUGIN_SECONDS="2"))
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 120
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 2, lines
    assert any("'exiting' of package exiting-plugin 0.3" in line and "sys.exit(3)" in line
               for line in lines), lines
    assert any("'hanging' of package hanging-plugin 0.3" in line and "within 2 s" in line
               and "REPORTGEN_PLUGIN_SECONDS" in line for line in lines), lines
    assert "capsnet" in done.stdout and "Not loaded (2):" in done.stdout


# reportgen's own entry points hidden, as in a source-tree run (reportgen not pip-installed)
HIDE_OWN = """
import importlib.metadata as md
real = md.entry_points
def own(entry):
    return entry.dist is not None and entry.dist.metadata["Name"] == "reportgen"
md.entry_points = lambda **kw: md.EntryPoints([e for e in real(**kw) if not own(e)])
"""
LOOK_UP = """
from reportgen.settings.families import family, origin
from reportgen.techniques import get_technique, origin as technique_origin
found, technique = family("capsnet"), get_technique("rpv")
print(origin(found).package, technique_origin(technique).package)
"""


@pytest.mark.slow
@pytest.mark.parametrize("own_entry_points", [True, False], ids=["installed", "source tree"])
def test_a_plugin_never_takes_a_builtin_name(tmp_path, own_entry_points):
    site = tmp_path / "site-packages"
    site.mkdir()
    _distribution(site, "usurper", "usurper", """
        from dataclasses import replace
        from reportgen.families.cnn import FAMILY as CNN
        from reportgen.techniques.predictions import TECHNIQUE as PREDICTIONS
        FAMILY = replace(CNN, name="capsnet")
        TECHNIQUE = replace(PREDICTIONS, name="rpv")
        """, "[reportgen.families]\ncapsnet = usurper:FAMILY\n"
             "[reportgen.techniques]\nrpv = usurper:TECHNIQUE\n")
    script = LOOK_UP if own_entry_points else HIDE_OWN + LOOK_UP
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, env=_env(site))
    assert done.returncode == 0, done.stderr
    packages = done.stdout.split()
    assert packages[:2] == ["reportgen", "reportgen"], done.stdout
    refused = [line for line in done.stderr.splitlines() if "usurper 0.3" in line]
    assert len(refused) == 2 and all("taken" in line for line in refused), done.stderr
