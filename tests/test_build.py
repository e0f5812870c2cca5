"""`reportgen build` end to end on a tiny model: nothing computed twice, broken checkpoints
reported and skipped (and shown on Home), models without steps named with the command that
trains them; the site folder rules, its lock, the staged swap and the per-build working folders
(in-process; tests/test_faults_site.py races real processes)."""

import hashlib
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from reportgen.catalog import Catalog
from reportgen.cli import main
from reportgen.commands.build import BuildOptions, build, select_steps
from reportgen.errors import ReportgenError
from reportgen.training.checkpoints import Step
from test_training import TINY_TOML, _tiny_data
from trained_tiny import copy_trained_tiny


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("build")
    root = tmp / "models"
    copy_trained_tiny(tmp_path_factory, root / "Tiny")
    (root / "Untrained").mkdir(parents=True)
    (root / "Untrained" / "params.toml").write_text(
        TINY_TOML.format(data=_tiny_data(tmp / "toy.npz")))
    return root


def _options(tmp_path, **kw):
    base = dict(models="Tiny", steps="last", images="test:0-2", analyses="none",
                render_site=False, cache_dir=str(tmp_path / "cache"),
                project_dir=str(tmp_path / "mkdocs"), site_dir=str(tmp_path / "site"))
    return BuildOptions(**{**base, **kw})


@pytest.mark.slow
def test_second_identical_build_computes_nothing(models, tmp_path):
    first = build(Catalog(models), _options(tmp_path))
    assert first.ok and first.computed > 0 and first.reused == 0
    second = build(Catalog(models), _options(tmp_path))
    assert second.ok and second.computed == 0 and second.drawn == 0
    assert second.reused == first.computed
    # a new input only computes that input's results
    third = build(Catalog(models), _options(tmp_path, images="test:0-3"))
    assert third.computed == first.computed // 3


@pytest.mark.slow
def test_each_checkpoint_is_loaded_once_and_only_when_needed(models, tmp_path, monkeypatch):
    import reportgen.training.checkpoints as checkpoints

    loads = []
    real = checkpoints.load_weights
    monkeypatch.setattr(checkpoints, "load_weights", lambda net, path: (loads.append(path),
                                                                         real(net, path)))
    # one input: loading counts per step, not per input
    build(Catalog(models), _options(tmp_path, steps="all", images="test:0"))
    assert sorted(loads) == sorted(set(loads)) and len(loads) == len(Catalog(models).get("Tiny").steps)
    loads.clear()
    build(Catalog(models), _options(tmp_path, steps="all", images="test:0"))
    assert loads == []


@pytest.mark.slow
def test_broken_checkpoint_is_reported_and_the_rest_builds(models, tmp_path):
    broken = tmp_path / "models"
    shutil.copytree(models, broken)
    steps = Catalog(broken).get("Tiny").steps
    bad = broken / "Tiny" / steps[1].filename
    bad.write_bytes(bad.read_bytes()[:100])
    summary = build(Catalog(broken), _options(tmp_path, models="*", steps="all"))
    assert not summary.ok
    assert any(str(bad) in line and f"step {steps[1]}" in line for line in summary.failed)
    assert summary.computed > 0             # the other steps were built
    assert any("Untrained" in s and "reportgen train Untrained" in s for s in summary.skipped)


@pytest.mark.slow
def test_cli_build_exits_non_zero_on_failure_and_builds_the_site(models, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    broken = tmp_path / "models"
    shutil.copytree(models, broken)
    (broken / "Tiny" / "0-0.weights.h5").write_bytes(b"not hdf5")
    args = ["--models-dir", str(broken), "build", "--models", "Tiny", "--images", "test:0-1",
            "--analyses", "none", "--cache-dir", str(tmp_path / "c"),
            "--site-dir", str(tmp_path / "site")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert "FAILED" in result.output and "0-0.weights.h5" in result.output
    home = (tmp_path / "site" / "index.html").read_text("utf-8")   # the rest became a site
    assert "Failed in this build" in home and "Tiny step 0-0" in home
    assert "0-0.weights.h5" in home
    assert "latest 1-5" in home                                # the other steps were built
    assert not list((tmp_path / ".reportgen" / "builds").iterdir())   # working folder removed


def test_select_steps():
    steps = [Step(0, 0), Step(1, 2), Step(1, 4), Step(2, 2), Step(2, 4)]
    assert select_steps(steps, "all") == steps
    assert select_steps(steps, "last") == [Step(2, 4)]
    assert select_steps(steps, "every:2") == [Step(0, 0), Step(1, 4), Step(2, 4)]
    assert select_steps(steps, "every:3") == [Step(0, 0), Step(2, 2), Step(2, 4)]
    assert select_steps(steps, "2-2,1-2") == [Step(1, 2), Step(2, 2)]
    with pytest.raises(ReportgenError, match="was not saved"):
        select_steps(steps, "3-1")
    with pytest.raises(ReportgenError, match="every:N"):
        select_steps(steps, "every:0")


@pytest.mark.slow
def test_build_config_file_sets_options_and_the_command_line_wins(models, tmp_path, monkeypatch):
    import reportgen.commands.build as build_module

    seen = {}
    monkeypatch.setattr(build_module, "run_build", lambda models_dir, **kw: seen.update(kw))
    config = tmp_path / "build.toml"
    config.write_text('[build]\nmodels = "Tiny"\nsteps = "last"\neval_images = 50\n'
                      'transforms = "invert"\n')
    result = CliRunner().invoke(main, ["--models-dir", str(models), "build", "--config",
                                       str(config), "--steps", "all"])
    assert result.exit_code == 0, result.output
    assert seen["models"] == "Tiny" and seen["eval_images"] == 50
    assert seen["transforms"] == "invert"
    assert seen["steps"] == "all"          # given on the command line


@pytest.mark.parametrize("text, message", [
    ('[build]\nmodel = "x"\n', "Unknown option 'model'"),
    ('[build]\neval_images = "many"\n', "Invalid 'eval_images'"),
    ('models = "x"\n', "no [build] table"),
    ('[build\n', "not valid TOML"),
])
def test_bad_build_config_is_named(tmp_path, text, message):
    from reportgen.commands.build import load_build_config

    config = tmp_path / "build.toml"
    config.write_text(text)
    with pytest.raises(ReportgenError, match=message.replace("[", r"\[")) as err:
        load_build_config(config)
    assert "build.toml" in err.value.message


@pytest.mark.slow
def test_dataset_analyses_trends_and_comparisons_are_cached(models, tmp_path):
    twin = tmp_path / "models"
    shutil.copytree(models, twin)
    shutil.rmtree(twin / "Untrained")
    shutil.copytree(twin / "Tiny", twin / "Twin")     # comparisons need two models
    # two steps make a trend, ten images an analysis: the assertions need no more
    options = _options(tmp_path, models="*", steps="0-0,1-5", analyses="all", render_site=True,
                       techniques=("predictions", "routing_entropy", "affine_robustness"),
                       eval_images=10)
    first = build(Catalog(twin), options)
    assert first.ok
    trends = list((tmp_path / "mkdocs" / "docs" / "artifacts" / "Tiny" / "trends").iterdir())
    assert any(p.suffix == ".png" for p in trends)
    compare = list((tmp_path / "mkdocs" / "docs" / "artifacts" / "_compare").iterdir())
    assert any(p.suffix == ".png" for p in compare)
    # two analyses never share (and overwrite) a figure file
    for folder in (trends, compare):
        pngs = [p.name for p in folder if p.suffix == ".png"]
        assert {n.split("-")[0] for n in pngs} == {"routing_entropy", "affine_robustness"}
    second = build(Catalog(twin), options)
    assert second.computed == 0 and second.drawn == 0


# ------------------------------------------------------------------ the site folder


def _tree(folder):
    """Every file under `folder` with its bytes (what "left untouched" compares)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _site_options(tmp_path, **kw):
    return _options(tmp_path, render_site=True, project_dir=None,
                    techniques=("predictions", "conv_kernels"), **kw)


def test_site_folder_rules(tmp_path, monkeypatch):
    from reportgen.pages.site_output import check_site_folder, write_marker

    monkeypatch.chdir(tmp_path)
    rules = dict(models_dir=tmp_path / "models", cache_dir=tmp_path / "cache")
    (tmp_path / "models" / "M").mkdir(parents=True)
    (tmp_path / "models" / "M" / "params.toml").write_text("x = 1\n")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("mine")
    (tmp_path / "a_model").mkdir()
    (tmp_path / "a_model" / "params.toml").write_text("")
    (tmp_path / "holds" / "sub").mkdir(parents=True)
    (tmp_path / "holds" / "sub" / "params.toml").write_text("")
    (tmp_path / "file.txt").write_text("")
    refused = {"notes": "did not make (todo.txt)", "models": "the models folder",
               "models/other": "inside the models folder", ".": "project folder",
               "..": "project folder", "cache": "the artifact cache",
               "a_model": "holds a model (params.toml)", "holds": "holds a model (sub/params.toml)",
               "file.txt": "is a file"}
    for folder, why in refused.items():
        with pytest.raises(ReportgenError, match=re.escape(why)) as err:
            check_site_folder(folder, **rules)
        assert f"'{folder}'" in err.value.message and "--site-dir" in err.value.message
        assert "\n" not in err.value.message
    assert (notes / "todo.txt").read_text() == "mine"
    # absent, empty and reportgen-made folders are fine
    (tmp_path / "empty").mkdir()
    (tmp_path / "made").mkdir()
    (tmp_path / "made" / "index.html").write_text("old")
    write_marker(tmp_path / "made")
    for folder in ("site", "empty", "made", "deeper/site"):
        assert check_site_folder(folder, **rules) == (tmp_path / folder).resolve()
    with pytest.raises(ReportgenError, match="it contains the models folder"):
        check_site_folder("outer", models_dir=tmp_path / "outer" / "models")
    with pytest.raises(ReportgenError, match="inside the site reportgen made in"):
        check_site_folder("made/sub", **rules)
    # a marked site holding a model is still refused
    (tmp_path / "made" / "params.toml").write_text("")
    with pytest.raises(ReportgenError, match="holds a model"):
        check_site_folder("made", **rules)


def test_a_site_made_before_the_marker_is_refused(tmp_path):
    """It lists no files, so reportgen cannot tell its own from a user's (README: "Your folders
    are safe"); the message says an older reportgen made it and what to do."""
    from reportgen.pages.site_output import check_replaceable

    old = tmp_path / "site"
    (old / "assets" / "reportgen").mkdir(parents=True)
    (old / "assets" / "reportgen" / "reportgen.js").write_text("")
    (old / "index.html").write_text("")
    (old / "search").mkdir()
    (old / "models" / "M").mkdir(parents=True)
    (old / "models" / "M" / "thesis.tex").write_text("mine")
    before = _tree(old)
    with pytest.raises(ReportgenError, match=re.escape(
            "an older reportgen made it without listing the files it wrote, so they cannot be "
            "told from files you added (models/M/thesis.tex, search/, assets/reportgen/"
            "reportgen.js and 1 more)")):
        check_replaceable(old)
    assert _tree(old) == before


def test_failed_site_build_leaves_the_previous_site_untouched(tmp_path):
    from reportgen.pages.site_output import staged_site

    site = tmp_path / "site"
    with staged_site(site, {"digest": "a"}) as staging:
        (staging / "index.html").write_text("first")
    before = _tree(site)
    first = hashlib.sha256(b"first").hexdigest().encode()
    assert before == {".reportgen-site.json": b'{\n "digest": "a",\n "files": {\n  "index.html": "'
                                              + first + b'"\n },\n "generator": "reportgen"\n}\n',
                      "index.html": b"first"}
    with pytest.raises(RuntimeError):
        with staged_site(site) as staging:
            (staging / "index.html").write_text("second")
            raise RuntimeError("MkDocs failed")
    assert _tree(site) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]   # no staging left over
    with staged_site(site) as staging:
        (staging / "index.html").write_text("third")
    assert _tree(site)["index.html"] == b"third"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]   # old site deleted


def test_a_kill_between_the_two_renames_is_recovered(tmp_path):
    from reportgen.pages.site_output import recover_leftovers

    site = tmp_path / "site"
    # the state after "rename the old site away", before "rename the new one in"
    (tmp_path / ".site.reportgen-old-1-aa").mkdir()
    (tmp_path / ".site.reportgen-old-1-aa" / "index.html").write_text("old site")
    (tmp_path / ".site.reportgen-new-1-aa").mkdir()
    (tmp_path / ".site.reportgen-new-1-aa" / "index.html").write_text("new site")
    (tmp_path / ".site.reportgen-new-2-bb").mkdir()                 # an earlier killed build
    (tmp_path / ".other.reportgen-new-3-cc").mkdir()                # another site's: kept
    recover_leftovers(site)
    assert _tree(site) == {"index.html": b"old site"}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.reportgen-new-3-cc", "site"]
    # after "rename the new one in": the new site stays, the old one goes
    (tmp_path / ".site.reportgen-old-4-dd").mkdir()
    recover_leftovers(site)
    assert _tree(site) == {"index.html": b"old site"}
    assert not (tmp_path / ".site.reportgen-old-4-dd").exists()


def test_site_lock_refuses_or_names_the_holder(tmp_path, capsys):
    import os
    import threading
    import time

    from reportgen.pages.site_output import SiteLock

    site = tmp_path / "site"
    with SiteLock(site, label="site"):
        lock_file = tmp_path / ".site.reportgen-lock"
        assert lock_file.read_text().split()[0] == str(os.getpid())
        with pytest.raises(ReportgenError, match=f"Another build is writing site/ \\(pid "
                                                 f"{os.getpid()}\\)") as err:
            with SiteLock(site, wait=False, label="site"):
                pass
        assert "--no-wait" in err.value.message
        order = []

        def second_build():
            with SiteLock(site, label="site"):
                order.append("waiter")

        waiter = threading.Thread(target=second_build)
        waiter.start()
        for _ in range(200):
            if "waiting for another build of site/" in capsys.readouterr().err:
                break
            time.sleep(0.02)
        else:
            pytest.fail("the second build did not say it waits")
        order.append("holder done")
    waiter.join(10)
    assert order == ["holder done", "waiter"]
    assert not lock_file.exists()                   # removed by its last holder


def test_abandoned_working_folders_are_removed_and_live_ones_kept(tmp_path):
    import fcntl
    import os

    from reportgen.commands.work_folder import WorkFolder

    root = tmp_path / "builds"
    root.mkdir()
    for name in ("dead", "alive"):
        (root / name / "mkdocs").mkdir(parents=True)
        (root / f"{name}.lock").write_text("123 host\n")
    (root / "orphan").mkdir()                        # its build died while removing it
    holder = os.open(root / "alive.lock", os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        with WorkFolder(root) as path:
            assert path.is_dir() and path.parent == root
            assert sorted(p.name for p in root.iterdir()) == sorted(
                ["alive", "alive.lock", path.name, f"{path.name}.lock"])
        assert sorted(p.name for p in root.iterdir()) == ["alive", "alive.lock"]
    finally:
        os.close(holder)


@pytest.mark.slow
def test_store_error_stops_the_build(models, tmp_path, monkeypatch):
    import reportgen.engine.step as step_module
    from reportgen.errors import StoreError

    def unusable(*args, **kwargs):
        raise StoreError("The artifact store is unusable.", received="disk full")

    monkeypatch.setattr(step_module, "compute_step", unusable)
    with pytest.raises(StoreError, match="disk full"):
        build(Catalog(models), _options(tmp_path))


@pytest.mark.slow
def test_invalid_model_folders_are_failures_shown_on_home(models, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "models"
    shutil.copytree(models, folder)
    (folder / "Broken").mkdir()
    (folder / "Broken" / "params.toml").write_text(
        'dataset = "mnist"\ninput_shape = [12, 12, 1]\nnum_classes = -3\n')
    (folder / "Other").mkdir()
    (folder / "Other" / "params.toml").write_text("not toml [\n")
    summary = build(Catalog(folder), _site_options(tmp_path, models="[BT]*"))
    assert [subject for subject, _ in summary.failures] == ["Broken"]
    assert "num_classes" in summary.failures[0][1]
    assert not summary.ok and summary.steps_built == 1 and summary.site == "built"
    home = (tmp_path / "site" / "index.html").read_text("utf-8")
    assert "<b>Broken</b>: Invalid model parameter" in home and "num_classes" in home
    assert "Other" not in home                      # not matched by --models
    # the console names the file in full; the (published) site relative to the working folder
    assert str(folder / "Broken" / "params.toml") in summary.failures[0][1]
    assert str(tmp_path) not in home and "in models/Broken/params.toml" in home
    # a pattern matching only invalid folders builds nothing: the site stays
    before = _tree(tmp_path / "site")
    only = build(Catalog(folder), _site_options(tmp_path, models="Broken"))
    assert only.steps_built == 0 and only.site == "kept" and [s for s, _ in only.failures] == ["Broken"]
    assert _tree(tmp_path / "site") == before


def test_demo_refuses_a_user_folder_before_training(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    models = tmp_path / "models"
    shutil.copytree(Path(__file__).resolve().parents[1] / "models" / "MNIST_Demo",
                    models / "MNIST_Demo", ignore=shutil.ignore_patterns("*.h5", "*.npz",
                                                                         "*.json", "archive"))
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("mine")
    result = CliRunner().invoke(main, ["--models-dir", str(models), "demo", "--site-dir",
                                       "notes"])
    assert result.exit_code == 2
    assert "Refusing to write the site into 'notes'" in result.output
    assert sorted(p.name for p in (models / "MNIST_Demo").iterdir()) == ["params.toml"]
    assert (notes / "todo.txt").read_text() == "mine" and len(list(notes.iterdir())) == 1


@pytest.mark.slow
def test_nothing_built_keeps_the_site_and_is_an_error(models, tmp_path, monkeypatch):
    from reportgen.commands.build import run_build

    monkeypatch.chdir(tmp_path)
    options = dict(models="Tiny", steps="last", images="test:0-1", analyses="none",
                   cache_dir=str(tmp_path / "cache"), site_dir="site",
                   techniques=("predictions",))
    first = run_build(models_dir=models, **options)
    assert first.site == "built"
    before = _tree(tmp_path / "site")
    broken = tmp_path / "models"
    shutil.copytree(models, broken)
    last = Catalog(broken).get("Tiny").steps[-1]
    (broken / "Tiny" / last.filename).write_bytes(b"broken")
    # the summary printed above the error lists each reason; the error does not repeat it
    with pytest.raises(ReportgenError, match=r"^Nothing was built \(1 failed, listed above\); "
                                             r"site/ was left as it was\. Fix: "):
        run_build(models_dir=broken, **options)
    with pytest.raises(ReportgenError, match=r"^Nothing was built \(1 skipped, listed above\)"):
        run_build(models_dir=broken, **{**options, "models": "Untrained"})
    assert _tree(tmp_path / "site") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".reportgen", "cache", "models", "site"]
    assert not list((tmp_path / ".reportgen" / "builds").iterdir())


@pytest.mark.slow
def test_identical_rebuild_keeps_the_site_folder(models, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = build(Catalog(models), _site_options(tmp_path))
    inode = (tmp_path / "site").stat().st_ino
    before = _tree(tmp_path / "site")
    second = build(Catalog(models), _site_options(tmp_path))
    assert (first.site, second.site) == ("built", "unchanged")
    assert (tmp_path / "site").stat().st_ino == inode and _tree(tmp_path / "site") == before
    third = build(Catalog(models), _site_options(tmp_path, images="test:0-3"))
    assert third.site == "built" and "artifacts/Tiny/inputs/test-3.png" in _tree(tmp_path / "site")


# ------------------------------------------------------------------ one data path


def _arrays_entry(store_root, key):
    return store_root / "arrays" / key[:2] / key


@pytest.mark.slow
def test_a_stored_result_that_vanishes_before_drawing_is_computed_again(models, tmp_path,
                                                                        monkeypatch):
    import reportgen.engine.step as step_module

    real = step_module.compute_step
    calls = []

    def racing(model, weights, variants, inputs, eval_set, keys, store, *args):
        counts = real(model, weights, variants, inputs, eval_set, keys, store, *args)
        if not calls:        # a `cache clear` races the build and takes one result away
            key = next(k for (name, _, _), k in keys.inputs.items() if name == "predictions")
            shutil.rmtree(_arrays_entry(store.root, key))
        calls.append(counts.computed)
        return counts

    monkeypatch.setattr(step_module, "compute_step", racing)
    summary = build(Catalog(models), _options(tmp_path, techniques=("predictions",)))
    assert summary.ok, summary.failed
    assert calls[1] == 1 and summary.computed == calls[0] + 1   # only that result, once more


@pytest.mark.slow
def test_every_damaged_result_of_a_step_is_computed_again_in_the_same_build(models, tmp_path,
                                                                           capsys):
    options = _options(tmp_path, techniques=("predictions",))
    first = build(Catalog(models), options)
    assert first.ok
    # damage every stored result: the entries' listings stay, their arrays are gone
    damaged = list((tmp_path / "cache" / "arrays").glob("*/*/arrays.npz"))
    for path in damaged:
        path.unlink()
    capsys.readouterr()
    summary = build(Catalog(models), options)
    assert summary.ok, summary.failed
    assert summary.computed == first.computed and summary.reused == 0
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Damaged")]
    assert sorted(line.split("(arrays entry ")[1][:12] for line in said) == sorted(
        path.parent.name[:12] for path in damaged)       # the predictions and the evaluation
    assert all(line.endswith("arrays.npz is missing; removed, computing it again.")
               for line in said)
    assert build(Catalog(models), options).computed == 0


@pytest.mark.slow
def test_a_result_that_stays_unreadable_fails_its_step_in_one_line(models, tmp_path,
                                                                   monkeypatch):
    from reportgen.cache.store import ArtifactStore

    options = _options(tmp_path, techniques=("predictions",))
    assert build(Catalog(models), options).ok
    real = ArtifactStore.get_arrays
    monkeypatch.setattr(ArtifactStore, "get_arrays",
                        lambda self, key: None if self.has_arrays(key) else real(self, key))
    summary = build(Catalog(models), options)
    assert not summary.ok and summary.failed
    line = summary.failed[0]
    assert "step 1-5" in line and "missing or damaged" in line and "cache clear" in line
    assert "TypeError" not in line and "\n" not in line


@pytest.mark.slow
def test_panels_carry_their_numbers_and_store_files_and_a_model_its_missing_techniques(
        models, tmp_path, monkeypatch):
    """Numbers come from the store (never from docs/); a model without a decoder lists the
    decoder techniques as not applicable, with the reason."""
    import json

    import numpy as np

    import reportgen.pages.render as render
    from reportgen.techniques import get_technique
    from reportgen.training.trainer import TrainOptions, train
    from test_training import TINY_TOML, _tiny_data

    folder = tmp_path / "models"
    shutil.copytree(models / "Tiny", folder / "Tiny")
    (folder / "NoDec").mkdir()
    (folder / "NoDec" / "params.toml").write_text(
        TINY_TOML.format(data=_tiny_data(tmp_path / "toy.npz")).replace(
            "[decoder]\nunits = [16]", "[decoder]\nenabled = false"))
    train(Catalog(folder).get("NoDec"), TrainOptions(epochs=1))
    seen = []
    real = render.render_site
    monkeypatch.setattr(render, "render_site", lambda site, *a, **k: (seen.append(site),
                                                                      real(site, *a, **k))[1])
    monkeypatch.chdir(tmp_path)
    options = _options(tmp_path, models="*", render_site=True, analyses="last", eval_images=12,
                       techniques=("predictions", "class_capsules", "decoder_length",
                                   "routing_entropy"))
    assert build(Catalog(folder), options).ok
    site, = seen
    tiny, nodec = sorted(site.models, key=lambda m: m.name != "Tiny")
    assert tiny.not_applicable == []
    assert nodec.not_applicable == [{
        "technique": "decoder_length", "title": get_technique("decoder_length").title,
        "layer": "decoder",
        "reason": "it has no reconstruction decoder"}]
    step = tiny.steps[-1]
    cache = (tmp_path / "cache").resolve()
    for panels in [step.dataset_panels, *step.input_panels.values()]:
        for panel in panels:
            for f in panel.figures:
                assert Path(f.source).is_relative_to(cache)
                assert Path(f.source).read_bytes() == (tmp_path / "mkdocs" / "docs" /
                                                       f.path).read_bytes()
    capsules = next(p for p in step.input_panels["test-1"] if p.technique == "class_capsules")
    assert np.argmax(capsules.numbers["lengths"]) == capsules.numbers["predicted"]
    assert len(capsules.numbers["capsules"]) == 3
    diagnostics, = step.dataset_panels
    exported = next(f for f in diagnostics.figures if f.kind == "json")
    assert diagnostics.numbers == json.loads(Path(exported.source).read_text())
    assert diagnostics.numbers and all(p.numbers is None for p in step.checkpoint_panels
                                       if p.technique != "live_decoder")


@pytest.mark.slow
def test_each_models_progress_line_counts_its_own_results(models, tmp_path, capsys):
    """Two copies of one model: the second finds everything the first computed, and its line
    says so (computed=0), not the build's running total."""
    folder = tmp_path / "models"
    shutil.copytree(models / "Tiny", folder / "Tiny")
    shutil.copytree(models / "Tiny", folder / "Tiny2")
    capsys.readouterr()
    summary = build(Catalog(folder), _options(tmp_path, models="Tiny,Tiny2"))
    lines = [line for line in capsys.readouterr().err.splitlines()
             if line.startswith("build Tiny")]
    assert summary.computed > 0 and len(lines) == 2
    assert lines[0].startswith("build Tiny:") and f"computed={summary.computed}," in lines[0]
    assert lines[1].startswith("build Tiny2:") and "computed=0," in lines[1]
    assert re.search(rf"\breused={summary.reused}\b", lines[1]), lines[1]
