"""reportgen's own documentation: `mkdocs build --strict` passes (as in CI, whose install brings
the `docs` plugins through the `test` extra), and the built docs cover what they document —
every command and option of the command line, every params.toml key, every technique, model
family, bundled model and data set — because those pages are generated from the code; the
benchmark tables are what the bench scripts wrote; the README fits a screen."""

from __future__ import annotations

import datetime
import html
import re
import subprocess
import sys
from dataclasses import fields, is_dataclass
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 200


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "docs-site"
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                             str(out)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]
    return out


def _page(built: Path, path: str) -> str:
    return (built / path).read_text(encoding="utf-8")


def _sections(page: str) -> dict[str, str]:
    """{heading id: the HTML from that heading to the next one}."""
    parts = re.split(r'(<h[1-6][^>]* id="[^"]+")', page)
    found = {}
    for tag, body in zip(parts[1::2], parts[2::2]):
        found[re.search(r'id="([^"]+)"', tag).group(1)] = body
    return found


def _commands(command: click.Command, path: tuple[str, ...]):
    """(command path, command) of `command` and every subcommand under it."""
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from _commands(sub, (*path, name))


def _slug(path: tuple[str, ...]) -> str:
    return "-".join(path).lower()


@pytest.mark.slow
def test_docs_build_strict_without_remote_assets(built):
    index = _page(built, "index.html")
    assert "reportgen" in index
    # nothing is fetched when reading the docs: no web fonts, no CDN
    for page in built.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "fonts.googleapis" not in text and "cdn.jsdelivr" not in text, page


@pytest.mark.slow
def test_every_command_and_option_is_in_the_docs(built):
    from reportgen.cli import main

    sections = _sections(_page(built, "reference/cli.html"))
    commands = list(_commands(main, ("reportgen",)))
    assert len(commands) > 10
    for path, command in commands:
        section = html.unescape(sections.get(_slug(path), ""))
        assert section, f"no section for `{' '.join(path)}`"
        for param in command.params:
            if isinstance(param, click.Option):
                for opt in param.opts + param.secondary_opts:
                    assert opt in section, f"{opt} of `{' '.join(path)}`"
            else:
                assert param.name.upper() in section, f"{param.name} of `{' '.join(path)}`"


@pytest.mark.slow
def test_every_params_key_technique_family_model_and_dataset_is_in_the_docs(built):
    from reportgen.data.datasets import known_datasets
    from reportgen.settings import families
    from reportgen.settings import model_params as mp
    from reportgen.techniques import all_techniques

    params = html.unescape(_page(built, "reference/params.html"))
    for cls in (mp.ModelParams, mp.ConvParams, mp.PrimaryCapsParams, mp.ClassCapsParams,
                mp.DecoderParams, mp.LossParams, mp.TrainingParams):
        for f in fields(cls):
            if f.name != "family_settings":
                assert f"<code>{f.name}</code>" in params, f"{cls.__name__}.{f.name}"
    sections = _sections(_page(built, "reference/techniques.html"))
    for technique in all_techniques():
        assert technique.name in sections, technique.name
        assert technique.title in html.unescape(sections[technique.name])
    family_page = _sections(_page(built, "reference/families.html"))
    for name in families.registered():
        assert name in family_page, name
    models = _page(built, "reference/models.html")
    for folder in sorted((ROOT / "models").iterdir()):
        if (folder / "params.toml").is_file():
            assert f"<code>{folder.name}</code>" in models, folder.name
    datasets = _page(built, "reference/datasets.html")
    for name in known_datasets():
        assert f"<code>{name}</code>" in datasets, name


@pytest.mark.slow
def test_python_api_and_benchmark_tables_are_rendered(built):
    api = _page(built, "reference/python-api.html")
    for name in ("load_model", "analyze", "import_checkpoint", "load_dataset", "em_routing"):
        assert f"{name}" in api, name
    bench = _page(built, "explanation/benchmarks.html")
    assert bench.count("<table>") >= 8
    pages = "".join(p.read_text(encoding="utf-8") for p in built.rglob("*.html"))
    assert "--8&lt;--" not in pages and "--8<--" not in pages     # every snippet included
    for script in sorted((ROOT / "docs" / "benchmarks" / "tables").glob("bench_*.md")):
        assert f"Measured by <code>python bench/{script.stem}.py" in pages, script.name


def _settings_classes():
    """Every settings dataclass a params.toml table becomes: the shared ones and each
    registered family's own (nested tables too)."""
    import typing

    from reportgen.settings import families
    from reportgen.settings import model_params as mp

    todo = [mp.ModelParams, mp.ConvParams, mp.PrimaryCapsParams, mp.ClassCapsParams,
            mp.DecoderParams, mp.LossParams, mp.TrainingParams]
    todo += [families.family(n).settings for n in families.registered()
             if families.family(n).settings is not None]
    seen = []
    while todo:
        cls = todo.pop(0)
        if cls in seen:
            continue
        seen.append(cls)
        for hint in typing.get_type_hints(cls).values():
            for arg in (hint, *typing.get_args(hint)):
                if is_dataclass(arg):
                    todo.append(arg)
    return seen


def test_every_params_key_has_a_meaning_where_it_is_declared():
    from reportgen.docs_reference.field_docs import field_meanings

    missing = [f"{cls.__module__}.{cls.__name__}.{name}" for cls in _settings_classes()
               for name, meaning in field_meanings(cls).items()
               if not meaning and name != "family_settings"]
    assert missing == []


def test_field_meanings_read_the_comments_beside_and_above_a_field():
    from reportgen.docs_reference.field_docs import field_meanings
    from reportgen.settings.model_params import ClassCapsParams, LossParams

    meanings = field_meanings(ClassCapsParams)
    assert meanings["routing"].startswith('"none": coupling coefficients fixed uniform')
    assert "CapsNet-Keras" in meanings["length_epsilon"]
    assert "0.392 = 0.0005 x 784" in field_meanings(LossParams)["reconstruction_weight"]


def test_params_page_lists_types_defaults_and_allowed_values():
    from reportgen.docs_reference.params_page import params_page

    page = params_page()
    row = next(line for line in page.splitlines() if line.startswith("| `routing_softmax`"))
    assert '`"classes"`, `"inputs"`' in row and '| `"classes"` |' in row
    row = next(line for line in page.splitlines() if line.startswith("| `units`"))
    assert "list of integers" in row and "`[512, 1024]`" in row
    assert "## `[[conv]]` {#conv}" in page and "## `[em]` {#em}" in page
    assert "## `[[em.conv_caps]]` {#em-conv_caps}" in page


def test_bench_scripts_write_their_printed_tables_into_the_docs(tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import docs_tables
    finally:
        sys.path.remove(str(ROOT / "bench"))
    with docs_tables.recorded("bench_toy", out_dir=tmp_path, args=["--models", "MNIST"]):
        print("Batch 64, median of 5")
        print("| model | img/s |\n|---|---|\n| MNIST | 169 |")
        print("whole run 12 s")
    assert "| MNIST | 169 |" in capsys.readouterr().out       # still printed
    text = (tmp_path / "bench_toy.md").read_text()
    assert "`python bench/bench_toy.py --models MNIST`" in text
    assert datetime.date.today().isoformat() in text
    assert "Batch 64, median of 5\n\n| model | img/s |" in text
    assert "| MNIST | 169 |\n\nwhole run 12 s" in text
    with pytest.raises(RuntimeError):
        with docs_tables.recorded("bench_failed", out_dir=tmp_path, args=[]):
            print("| half |")
            raise RuntimeError("the run failed")
    assert not (tmp_path / "bench_failed.md").exists()


def test_readme_fits_a_screen_and_links_into_the_docs():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES
    for page in re.findall(r"\]\((docs/[^)#]+)", "\n".join(lines)):
        assert (ROOT / page).is_file(), page


@pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
                    reason="git is not installed")
def test_publish_puts_the_docs_beside_the_site(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from reportgen.cli import main

    site, docs = tmp_path / "site", tmp_path / "docs-site"
    for folder, text in ((site, "analysis site"), (docs, "reportgen docs")):
        (folder / "assets").mkdir(parents=True)
        (folder / "index.html").write_text(text)
        (folder / "assets" / "x.css").write_text("body{}")
    (docs / "search").mkdir()                       # what every `mkdocs build` writes too
    (docs / "search" / "search_index.json").write_text("{}")
    (docs / "sitemap.xml").write_text("<urlset/>")
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["publish", "--site-dir", str(site), "--remote-url",
                                       str(bare), "--docs-dir", str(docs)])
    assert result.exit_code == 0, result.output
    assert "with " + str(docs) + " under docs/" in result.output
    listed = subprocess.run(["git", "--git-dir", str(bare), "ls-tree", "-r", "--name-only",
                             "gh-pages"], capture_output=True, text=True, check=True).stdout
    assert sorted(listed.split()) == [".nojekyll", ".reportgen-published.json", "assets/x.css",
                                      "docs/assets/x.css", "docs/index.html",
                                      "docs/search/search_index.json", "docs/sitemap.xml",
                                      "index.html"]
    shown = subprocess.run(["git", "--git-dir", str(bare), "show", "gh-pages:docs/index.html"],
                           capture_output=True, text=True, check=True).stdout
    assert shown == "reportgen docs"
    result = CliRunner().invoke(main, ["publish", "--site-dir", str(site), "--remote-url",
                                       str(bare), "--docs-dir", str(tmp_path / "none")])
    assert result.exit_code == 2 and "mkdocs build" in result.output


def test_no_command_in_the_docs_holds_a_placeholder_to_fill_in():
    """A reader runs the docs' commands as written: a shell block holds no URL or name to be
    replaced first (the tutorial's `git clone https://github.com/OWNER/...` could not work)."""
    placeholder = re.compile(r"\b(OWNER|YOUR[_-]?NAME|USERNAME|<your[^>]*>)\b|github\.com/OWNER")
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md"),
             *(ROOT / "examples").glob("*/README.md")]
    found = []
    for page in pages:
        for block in re.findall(r"```(?:bash|sh|console)\n(.*?)```", page.read_text(), re.S):
            found += [f"{page.relative_to(ROOT)}: {line}" for line in block.splitlines()
                      if placeholder.search(line)]
    assert not found, found


def test_the_docs_404_page_links_relative_and_finds_its_root(built):
    """MkDocs writes the docs' 404.html with links from the server's root (/assets/...), wrong
    under a project page (/REPO/docs/): the build makes them relative and adds the script that
    finds the root by the docs' own search index, as the analysis site's 404 page does."""
    page = _page(built, "404.html")
    assert not re.search(r'(?:href|src)="/(?!/)', page), re.findall(r'(?:href|src)="/[^"]*"',
                                                                    page)[:5]
    assert "reportgen: the site's root" in page and '"search/search_index.json"' in page
    assert (built / "search" / "search_index.json").is_file()
