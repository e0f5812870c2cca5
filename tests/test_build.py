"""`reportgen build` end to end on a tiny model: nothing computed twice, broken checkpoints
reported and skipped, models without steps named with the command that trains them."""

import shutil

import pytest
from click.testing import CliRunner

from reportgen.catalog import Catalog
from reportgen.cli import main
from reportgen.commands.build import BuildOptions, build, select_steps
from reportgen.errors import ReportgenError
from reportgen.training.checkpoints import Step
from test_training import TINY_TOML, _tiny_data


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from reportgen.training.trainer import TrainOptions, train

    tmp = tmp_path_factory.mktemp("build")
    data = _tiny_data(tmp / "toy.npz")
    root = tmp / "models"
    for name in ("Tiny", "Untrained"):
        (root / name).mkdir(parents=True)
        (root / name / "params.toml").write_text(TINY_TOML.format(data=data))
    train(Catalog(root).get("Tiny"), TrainOptions(epochs=1))
    return root


def _options(tmp_path, **kw):
    base = dict(models="Tiny", steps="last", images="test:0-2", analyses="none",
                render_site=False, cache_dir=str(tmp_path / "cache"),
                project_dir=str(tmp_path / "mkdocs"), site_dir=str(tmp_path / "site"))
    return BuildOptions(**{**base, **kw})


def test_second_identical_build_computes_nothing(models, tmp_path):
    first = build(Catalog(models), _options(tmp_path))
    assert first.ok and first.computed > 0 and first.reused == 0
    second = build(Catalog(models), _options(tmp_path))
    assert second.ok and second.computed == 0 and second.drawn == 0
    assert second.reused == first.computed
    # a new input only computes that input's results
    third = build(Catalog(models), _options(tmp_path, images="test:0-3"))
    assert third.computed == first.computed // 3


def test_each_checkpoint_is_loaded_once_and_only_when_needed(models, tmp_path, monkeypatch):
    import reportgen.training.checkpoints as checkpoints

    loads = []
    real = checkpoints.load_weights
    monkeypatch.setattr(checkpoints, "load_weights", lambda net, path: (loads.append(path),
                                                                         real(net, path)))
    build(Catalog(models), _options(tmp_path, steps="all"))
    assert sorted(loads) == sorted(set(loads)) and len(loads) == len(Catalog(models).get("Tiny").steps)
    loads.clear()
    build(Catalog(models), _options(tmp_path, steps="all"))
    assert loads == []


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


def test_cli_build_exits_non_zero_on_failure_and_builds_the_site(models, tmp_path):
    broken = tmp_path / "models"
    shutil.copytree(models, broken)
    (broken / "Tiny" / "0-0.weights.h5").write_bytes(b"not hdf5")
    args = ["--models-dir", str(broken), "build", "--models", "Tiny", "--images", "test:0-1",
            "--analyses", "none", "--cache-dir", str(tmp_path / "c"),
            "--site-dir", str(tmp_path / "site")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert "FAILED" in result.output and "0-0.weights.h5" in result.output
    assert (tmp_path / "site" / "index.html").is_file()   # the rest still became a site


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


def test_dataset_analyses_trends_and_comparisons_are_cached(models, tmp_path):
    twin = tmp_path / "models"
    shutil.copytree(models, twin)
    shutil.rmtree(twin / "Untrained")
    shutil.copytree(twin / "Tiny", twin / "Twin")     # comparisons need two models
    options = _options(tmp_path, models="*", steps="all", analyses="all", render_site=True,
                       techniques=("predictions", "routing_diagnostics", "affine_robustness"),
                       eval_images=30)
    first = build(Catalog(twin), options)
    assert first.ok
    trends = list((tmp_path / "mkdocs" / "docs" / "artifacts" / "Tiny" / "trends").iterdir())
    assert any(p.suffix == ".png" for p in trends)
    compare = list((tmp_path / "mkdocs" / "docs" / "artifacts" / "_compare").iterdir())
    assert any(p.suffix == ".png" for p in compare)
    # two analyses never share (and overwrite) a figure file
    for folder in (trends, compare):
        pngs = [p.name for p in folder if p.suffix == ".png"]
        assert {n.split("-")[0] for n in pngs} == {"routing_diagnostics", "affine_robustness"}
    second = build(Catalog(twin), options)
    assert second.computed == 0 and second.drawn == 0
