"""Plug-ins from installed packages (reportgen.plugins): families and techniques found through
the entry-point groups `reportgen.families` and `reportgen.techniques`, reportgen's own the same
way; a plug-in that fails to import or declares something invalid costs one line naming its
package and the reason, and every other one still works; `reportgen plugins` lists them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from reportgen import bibtex, plugins
from reportgen.errors import ReportgenError
from reportgen.settings import families
from reportgen.settings.families import Family, check_family, registered
from reportgen.techniques import BUILT_IN, all_techniques, check_technique, get_technique

ROOT = Path(__file__).resolve().parents[1]


def test_reportgen_registers_its_own_through_its_entry_points():
    """Every family package of reportgen/families and every technique of BUILT_IN has its entry
    point in pyproject.toml (what `pip install` registers), and every entry point is one of
    them."""
    groups = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    modules = {p.parent.name for p in (ROOT / "reportgen" / "families").glob("*/__init__.py")}
    assert not list((ROOT / "reportgen" / "families").glob("[!_]*.py"))    # one package each
    assert groups[plugins.FAMILIES] == {m: f"reportgen.families.{m}:FAMILY" for m in modules}
    from reportgen.techniques import OWN_MODULES

    # a family's own technique is declared in its family's package
    assert OWN_MODULES == {"gracaps_attention": "reportgen.families.gracapsnet.attention"}
    assert groups[plugins.TECHNIQUES] == {
        t: f"{OWN_MODULES.get(t, f'reportgen.techniques.{t}')}:TECHNIQUE" for t in BUILT_IN}
    # and they are what the registries loaded, from the installed package's metadata
    found = {p.name: p for p in families.plugin_records()}
    assert set(modules) <= set(found) and all(found[m].builtin for m in modules)
    assert [t.name for t in all_techniques() if t.name in BUILT_IN] == list(BUILT_IN)


def test_the_shared_tables_are_the_parameters_every_family_reads():
    from dataclasses import fields

    from reportgen.settings.model_params import ModelParams

    assert set(families.SHARED_TABLES) == \
        {f.name for f in fields(ModelParams)} - {"family_settings"}


def test_every_declaration_cites_parseable_bibtex():
    """Citations belong to the declarations: each family and technique's entries parse; the
    Self-Routing family cites Hahn, Pyeon & Kim 2019, not Sabour et al. 2017."""
    for name in registered():
        bibtex.check_entries(families.family(name).citations, name)
    for technique in all_techniques():
        bibtex.check_entries(technique.citations, technique.name)
    assert [bibtex.entry_key(e) for e in families.family("self_routing").citations] == \
        ["hahn2019self"]
    assert bibtex.short(families.family("self_routing").citations[0]) == "Hahn et al. 2019"
    assert "bhullar2020rpv" in {bibtex.entry_key(e) for e in get_technique("rpv").citations}


def _family(**changes) -> Family:
    base = dict(name="toy_check", describe=lambda p: None, build=lambda p: None,
                count_params=lambda p: 0, display_name=lambda p: "Toy")
    return Family(**{**base, **changes})


@pytest.mark.parametrize("changes, words", [
    ({"name": "capsnet"}, "taken"),
    ({"name": "Bad-Name"}, "lower-case"),
    ({"table": "primary"}, "must be a new lower-case name"),
    ({"table": "graph", "settings": object}, "family 'gracapsnet's"),
    ({"capabilities": {"telepathy"}}, "unknown capabilities ['telepathy']"),
    ({"outputs": {"lengths": "(B, K)"}}, "is a name of the network contract"),
    ({"outputs": {"maps": ""}}, "say what output 'maps' holds"),
    ({"citations": ("Sabour 2017",)}, "one BibTeX entry"),
    ({"citations": ("@misc{x, title = {a}",)}, "braces of BibTeX entry 'x'"),
    ({"example": "tiny"}, "params.toml document"),
])
def test_an_invalid_family_declaration_is_refused_with_its_reason(changes, words):
    others = {n: families.family(n) for n in registered()}
    with pytest.raises((ValueError, TypeError), match=None) as err:
        check_family(_family(**changes), others)
    assert words in str(err.value)
    with pytest.raises(TypeError, match="not a reportgen.settings.families.Family"):
        check_family(object(), others)


def test_an_invalid_technique_declaration_is_refused_with_its_reason():
    predictions = get_technique("predictions")
    with pytest.raises(ValueError, match="'predictions' is taken"):
        check_technique(predictions, {"predictions": predictions})
    with pytest.raises(TypeError, match="not a reportgen.techniques.base.Technique"):
        check_technique("predictions", {})
    import dataclasses

    with pytest.raises(ValueError, match="one BibTeX entry"):
        dataclasses.replace(predictions, name="other", citations=("Sabour 2017",))


# -- installed packages, in a real process ------------------------------------------------------

# The toy family of tests/test_family_plugin.py, from a package of its own (the tests folder is
# on the subprocess's path).
TOY_FAMILY = "from test_family_plugin import TOY as FAMILY\n"


def _distribution(site: Path, package: str, module: str, source: str, entry_points: str) -> None:
    """An installed distribution as pip leaves one: its module and its .dist-info."""
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{package.replace('-', '_')}-0.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


@pytest.fixture
def installed(tmp_path):
    """A site folder holding a good family package, a package whose module fails to import, and
    one that declares a family with an unknown capability and a technique that is no
    Technique."""
    site = tmp_path / "site-packages"
    site.mkdir()
    _distribution(site, "toy-family", "toy_family", TOY_FAMILY,
                  "[reportgen.families]\ntoy = toy_family:FAMILY\n")
    _distribution(site, "broken-plugin", "broken_plugin",
                  "raise ImportError('needs torchvision, which is not installed')\n",
                  "[reportgen.families]\nbroken = broken_plugin:FAMILY\n"
                  "[reportgen.techniques]\nbroken_figure = broken_plugin:TECHNIQUE\n")
    _distribution(site, "odd-plugin", "odd_plugin", '''
        from reportgen.settings.families import Family
        FAMILY = Family(name="odd", describe=print, build=print, count_params=len,
                        display_name=str, capabilities={"telepathy"})
        TECHNIQUE = "not a technique"
        ''', "[reportgen.families]\nodd = odd_plugin:FAMILY\n"
             "[reportgen.techniques]\nodd_figure = odd_plugin:TECHNIQUE\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(site), str(ROOT), str(ROOT / "tests"),
         *filter(None, [os.environ.get("PYTHONPATH")])])}
    return env


def _reportgen(env, *args, cwd=None):
    return subprocess.run([sys.executable, "-m", "reportgen", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_broken_plugins_cost_one_line_each_and_the_rest_work(installed, tmp_path):
    done = _reportgen(installed, "plugins")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    # one line per broken plug-in, naming its package, version and the reason
    assert len(lines) == 4, lines
    broken = [line for line in lines if "broken-plugin 0.3" in line]
    assert len(broken) == 2 and all("needs torchvision" in line for line in broken)
    assert any("'odd'" in line and "unknown capabilities ['telepathy']" in line
               for line in lines)
    assert any("'odd_figure'" in line and "not a reportgen.techniques.base.Technique" in line
               for line in lines)
    # the listing names every family and technique with its package and citation
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith("  ")}
    assert "toy-family 0.3" in rows["toy"] and "Doe 2026" in rows["toy"]
    assert "declares 'toy'" not in done.stderr
    assert "reportgen" in rows["capsnet"] and "Sabour et al. 2017" in rows["capsnet"]
    assert "Hahn et al. 2019" in rows["self_routing"]
    assert all(t in rows for t in BUILT_IN)
    assert "Not loaded (4):" in done.stdout


@pytest.mark.slow
def test_a_family_from_an_installed_package_trains_and_builds_beside_broken_ones(installed,
                                                                                 tmp_path):
    from test_training import _tiny_data

    data = _tiny_data(tmp_path / "toy.npz", n=30)
    folder = tmp_path / "project" / "models" / "Toy"
    folder.mkdir(parents=True)
    (folder / "params.toml").write_text(
        f'dataset = "{data}"\nfamily = "toy"\ninput_shape = [12, 12, 1]\nnum_classes = 3\n'
        '[[conv]]\nfilters = 4\nkernel_size = 3\nstrides = 2\n[toy]\nhidden = 5\n'
        '[training]\nepochs = 1\nbatch_size = 10\nsave_every = 1\n')
    project = tmp_path / "project"
    trained = _reportgen(installed, "train", "Toy", cwd=project)
    assert trained.returncode == 0, trained.stderr
    built = _reportgen(installed, "build", "--models", "Toy", "--steps", "last", "--images",
                       "test:0-1", "--eval-images", "10", cwd=project)
    assert built.returncode == 0, built.stderr + built.stdout
    problems = [line for line in built.stderr.splitlines() if "was not loaded" in line]
    assert len(problems) == 4                 # said once each, however often looked up
    page = (project / "site" / "methods.html").read_text("utf-8")
    assert "Doe, J. (2026). A Toy Network." in page


def test_registering_a_family_in_code_is_checked_like_a_plug_in():
    with pytest.raises(ValueError, match="unknown capabilities"):
        families.register(_family(capabilities={"telepathy"}))
    assert "toy_check" not in registered()
    with pytest.raises(ReportgenError, match="Unknown technique 'nope'.*reportgen plugins"):
        get_technique("nope")
