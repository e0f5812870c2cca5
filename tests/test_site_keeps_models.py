"""A build never silently drops a model the site showed: `build --models OTHER` keeps the
site's models (drawn from the artifact store, not computed again) and says what the site holds;
`--drop-model NAME` removes exactly that one, `--only` every other; a kept model whose results
the store no longer has is left out in one line naming it and the command that rebuilds it,
and the others still build; an entry of a --models list that matches no model is refused
before anything is written."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from reportgen.catalog import Catalog
from reportgen.commands.build import BuildOptions, build
from reportgen.errors import ReportgenError
from reportgen.pages.site_files import MARKER
from trained_tiny import copy_trained_tiny

QUICK = dict(steps="last", images="test:0-1", analyses="none")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two trained tiny models of different weights: A (seed 0) and B (seed 1)."""
    root = tmp_path_factory.mktemp("keeps") / "models"
    copy_trained_tiny(tmp_path_factory, root / "A", seed=0)
    copy_trained_tiny(tmp_path_factory, root / "B", seed=1)
    return root


def _build(root: Path, cache: Path, models: str, **more):
    return build(Catalog(root), BuildOptions(models=models, cache_dir=str(cache),
                                             site_dir=str(root.parent / "site"), **QUICK,
                                             **more))


def _shown(site: Path) -> list[str]:
    """The models the site's Home links to (its marker records the same ones)."""
    home = (site / "index.html").read_text("utf-8")
    linked = sorted(set(re.findall(r'href="models/([^/"]+)/', home)))
    recorded = json.loads((site / MARKER).read_text()).get("models")
    assert recorded is None or sorted(recorded) == linked, (linked, recorded)
    return linked


def _tree(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_another_model_is_added_beside_the_site_s_models_and_drop_model_removes_one(
        models, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(models.parent)
    site, cache = models.parent / "site", tmp_path / "cache"
    first = _build(models, cache, "A")
    assert first.ok and _shown(site) == ["A"] and first.computed > 0

    second = _build(models, cache, "B")
    assert second.ok and _shown(site) == ["A", "B"]
    assert second.holding == f"{site}/: 2 models (A kept from the previous build, B built now)"
    # A is drawn from the store: only B's results are computed (as many as A's were)
    assert second.computed == first.computed and second.reused == first.computed
    assert (site / "models" / "A" / "index.html").is_file()
    assert (site / "models" / "B" / "index.html").is_file()

    # a typo in a list, or a model to drop the site does not show: refused, nothing written
    before_site, before_cache = _tree(site), _tree(cache)
    with pytest.raises(ReportgenError) as typo:
        _build(models, cache, "B,Typo")
    assert typo.value.message.startswith("No model matches 'Typo', one entry of 'B,Typo'")
    assert "A, B" in typo.value.message and "leave it out ('B')" in typo.value.message
    with pytest.raises(ReportgenError, match="--drop-model C: .*site/ does not show C"):
        _build(models, cache, "B", drop_models=("C",))
    assert _tree(site) == before_site and _tree(cache) == before_cache

    third = _build(models, cache, "B", drop_models=("A",))
    assert third.ok and _shown(site) == ["B"] and not (site / "models" / "A").exists()
    assert third.holding == f"{site}/: 1 model (B built now); removed as asked: A"
    assert third.computed == 0


@pytest.mark.slow
def test_a_kept_model_whose_results_are_gone_is_left_out_in_one_line(models, tmp_path,
                                                                     monkeypatch, capsys):
    monkeypatch.chdir(models.parent)
    site = models.parent / "site"
    shutil.rmtree(site, ignore_errors=True)
    assert _build(models, tmp_path / "cache", "A").ok
    assert _build(models, tmp_path / "cache", "B").ok and _shown(site) == ["A", "B"]
    capsys.readouterr()

    # another (empty) store: as if the cache had been cleared
    summary = _build(models, tmp_path / "cleared", "B")
    err = capsys.readouterr().err
    assert summary.ok and _shown(site) == ["B"]
    [line] = [line for line in err.splitlines() if line.startswith("A, shown on")]
    assert "left out" in line and "no longer in the artifact store" in line
    assert "`reportgen build --models A,B`" in line
    assert summary.holding == f"{site}/: 1 model (B built now)"


@pytest.mark.slow
def test_only_keeps_just_the_models_built_now(models, tmp_path, monkeypatch):
    monkeypatch.chdir(models.parent)
    site = models.parent / "site"
    shutil.rmtree(site, ignore_errors=True)
    cache = tmp_path / "cache"
    assert _build(models, cache, "A,B").ok and _shown(site) == ["A", "B"]
    summary = _build(models, cache, "A", only=True)
    assert _shown(site) == ["A"] and summary.holding == \
        f"{site}/: 1 model (A built now); removed as asked: B"


def test_every_entry_of_a_models_list_must_match_a_model(tmp_path):
    """Not just the whole list: 'A,Typo' is refused naming Typo and the closest name."""
    for name in ("MNIST_Demo", "FASHION_X"):
        (tmp_path / name).mkdir()
        shutil.copy(Path(__file__).resolve().parents[1] / "models" / "MNIST_Demo" /
                    "params.toml", tmp_path / name)
    catalog = Catalog(tmp_path)
    assert [e.name for e in catalog.match("MNIST_Demo, FASHION_*")] == ["FASHION_X",
                                                                        "MNIST_Demo"]
    with pytest.raises(ReportgenError) as caught:
        catalog.match("MNIST_Demo,MNIST_Dmeo")
    message = caught.value.message
    assert message.startswith("No model matches 'MNIST_Dmeo', one entry of "
                              "'MNIST_Demo,MNIST_Dmeo'")
    assert "Did you mean 'MNIST_Demo'?" in message and "FASHION_X, MNIST_Demo" in message
    with pytest.raises(ReportgenError, match="No model matches 'CIFAR_\\*', one entry"):
        catalog.match("FASHION_X,CIFAR_*")


def test_the_marker_s_record_decides_what_is_kept_dropped_or_gone(tmp_path):
    """From the site's marker alone: every recorded model not built now is kept, unless
    dropped (by name, or all with --only) or no longer a model; a name to drop that the site
    does not show, or one being built, is refused in one line."""
    from reportgen.commands import site_models
    from reportgen.pages.site_files import GENERATOR

    site = tmp_path / "site"
    site.mkdir()
    (site / MARKER).write_text(json.dumps({"generator": GENERATOR, "digest": "d", "models": {
        name: {"steps": ["1-2"], "results": name} for name in ("A", "B", "C", "Gone")}}))
    held = site_models.choose(site, None, ["B"], ["A", "B", "C"], ("C",), False)
    assert sorted(held.kept) == ["A"] and held.dropped == ["C"] and held.gone == ["Gone"]
    assert held.built == ["B"] and held.steps_of("A") == ["1-2"] and held.steps_of("B") is None
    only = site_models.choose(site, None, ["B"], ["A", "B", "C"], (), True)
    assert not only.kept and only.dropped == ["A", "C", "Gone"]
    with pytest.raises(ReportgenError, match=r"--drop-model D: .* does not show D\. "
                                             r"Expected a model the site shows: A, B, C, Gone"):
        site_models.choose(site, None, ["B"], ["A", "B", "C"], ("D",), False)
    with pytest.raises(ReportgenError, match="--drop-model B: B is also chosen by --models"):
        site_models.choose(site, None, ["B"], ["A", "B", "C"], ("B",), False)
    # no site yet: nothing to keep; an older reportgen's marker without a record: unknown
    assert site_models.choose(tmp_path / "none", None, ["B"], ["B"], (), False).kept == {}
    (site / MARKER).write_text(json.dumps({"generator": GENERATOR, "digest": "d"}))
    assert site_models.choose(site, None, ["B"], ["A", "B"], (), False).unrecorded
    assert site_models.holding_line("site", ["B"], ["A", "C"], ["D"]) == \
        "site/: 3 models (A, C kept from the previous build, B built now); removed as asked: D"


@pytest.mark.slow
def test_the_command_line_refuses_a_model_to_drop_that_the_site_does_not_show(tmp_path,
                                                                             monkeypatch):
    from click.testing import CliRunner

    from reportgen.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "MNIST_Demo").mkdir(parents=True)
    shutil.copy(Path(__file__).resolve().parents[1] / "models" / "MNIST_Demo" / "params.toml",
                tmp_path / "models" / "MNIST_Demo")
    result = CliRunner().invoke(main, ["--models-dir", "models", "build", "--models",
                                       "MNIST_Demo", "--drop-model", "FASHION_X,Other"])
    assert result.exit_code == 2, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith("Error: --drop-model FASHION_X: site/ does not show FASHION_X")
    assert not (tmp_path / "site").exists()
    result = CliRunner().invoke(main, ["--models-dir", "models", "build", "--models",
                                       "MNIST_Demo,MNIST_Dmeo"])
    assert result.exit_code == 2 and "No model matches 'MNIST_Dmeo'" in result.output
    assert not (tmp_path / "site").exists()
