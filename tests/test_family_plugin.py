"""A model family is one plug-in: a toy family registered from this test (a conv layer and a
dense head, its own `[toy]` table) is read from a params.toml, described, built, counted,
trained, named and priced by reportgen's unchanged code; and no module of reportgen outside the
registry and the families' own modules names a family."""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from family_nets import write_model
from test_training import _tiny_data

from reportgen.capsnet.description import Head, ModelDescription, conv_stack, describe
from reportgen.capsnet.param_count import count_trainable_params
from reportgen.commands.build_settings import fitted_eval_images, seconds_per_eval_image
from reportgen.errors import ReportgenError
from reportgen.results.capsules_vs_cnns import model_kind
from reportgen.settings import families
from reportgen.settings.families import Family, FamilyCosts, register, registered
from reportgen.settings.model_params import conv_grid, parse_model_params

PACKAGE = Path(__file__).resolve().parents[1] / "reportgen"


@dataclass(frozen=True)
class ToyParams:
    hidden: int = 6


def _describe(params) -> ModelDescription:
    convs = conv_stack(params.input_shape, [
        (f"conv{i + 1}", c.filters, c.kernel_size, c.strides, "valid", c.activation, "")
        for i, c in enumerate(params.conv)])
    return ModelDescription(input_shape=tuple(params.input_shape), conv_layers=convs,
                            capsule_layers=(), head=Head("logits", params.num_classes, "logits"))


def _count(params) -> int:
    d = _describe(params)
    last, hidden = d.conv_layers[-1], params.family_settings.hidden
    flat = last.grid[0] * last.grid[1] * last.filters
    convs = sum(math.prod(c.kernel_size) * channels * c.filters + c.filters for c, channels in
                zip(d.conv_layers, (d.input_shape[2], *(c.filters for c in d.conv_layers))))
    return convs + flat * hidden + hidden + hidden * params.num_classes + params.num_classes


def _build(params):
    import keras
    from keras import layers, ops

    from reportgen.capsnet.network import Network, build_convs

    description = _describe(params)
    image = keras.Input(params.input_shape, name="image")
    x, outputs, _ = build_convs(description, image)
    hidden = layers.Dense(params.family_settings.hidden, activation="relu", name="hidden")(
        layers.Flatten()(x))
    logits = layers.Dense(params.num_classes, name="logits")(hidden)
    probabilities = layers.Softmax(name="probabilities")(logits)
    outputs.update(logits=logits, probabilities=probabilities)
    model = keras.Model(image, outputs, name="toy")
    encoder = keras.Model(image, [logits, probabilities])
    scores = keras.Model(image, [logits, probabilities])

    def losses(images, one_hot):
        logit, probability = scores(images, training=True)
        loss = ops.categorical_crossentropy(one_hot, logit, from_logits=True)
        return loss, ops.zeros_like(loss), probability

    return Network(params=params, description=description, model=model, encoder=encoder,
                   training_losses=losses)


def _check(params, raw, source):
    conv_grid(params, source)
    return params


CITATION = """@misc{toy2026, author = {Doe, Jane}, title = {A Toy Network}, year = {2026}}"""
TOY = Family(name="toy", describe=_describe, build=_build, count_params=_count,
             display_name=lambda p: f"ToyNet-{p.family_settings.hidden}", table="toy",
             settings=ToyParams, check=_check,
             costs=FamilyCosts(seconds_per_eval_image=0.25), modules=(__name__,),
             citations=(CITATION,),
             example={"input_shape": [12, 12, 1], "num_classes": 3,
                      "conv": [{"filters": 4, "kernel_size": 3, "strides": 2}]})
RAW = {"dataset": "mnist", "input_shape": [12, 12, 1], "num_classes": 3, "family": "toy",
       "conv": [{"filters": 4, "kernel_size": 3, "strides": 2}], "toy": {"hidden": 5}}


@pytest.fixture
def toy():
    register(TOY)
    yield TOY
    families.unregister(TOY.name)


def test_a_family_registered_from_outside_is_read_described_counted_named_and_priced(toy):
    assert "toy" in registered()
    params = parse_model_params(RAW, source="models/Toy/params.toml")
    assert params.family_settings == ToyParams(hidden=5)
    assert params.to_dict()["toy"] == {"hidden": 5}
    # at its defaults the table stays out of the dict (and of the cache keys), as every family's
    assert "toy" not in parse_model_params({**RAW, "toy": {}}).to_dict()
    with pytest.raises(ReportgenError) as err:          # its table is checked like any other
        parse_model_params({**RAW, "toy": {"hidden": 0}}, source="models/Toy/params.toml")
    assert "'toy.hidden' in models/Toy/params.toml" in err.value.message
    d = describe(params)
    assert d.features == {"conv", "logits"} and d.conv_layers[0].grid == (5, 5)
    # 3x3x1x4 + 4 conv, 5*5*4 -> 5 dense, 5 -> 3 logits
    assert count_trainable_params(params) == 40 + 505 + 18 == 563
    assert model_kind(params) == "ToyNet-5"
    assert seconds_per_eval_image(563, "toy") == 0.25
    assert fitted_eval_images(563, 1, "toy") == fitted_eval_images(10 ** 9, 1, "toy")


@pytest.mark.slow
def test_a_family_registered_from_outside_builds_and_trains(toy, tmp_path):
    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.catalog import Catalog
    from reportgen.training.trainer import TrainOptions, train

    net = build_capsnet(parse_model_params(RAW))
    assert net.trainable_params() == count_trainable_params(net.params) == 563
    assert net.description == describe(net.params)
    data = _tiny_data(tmp_path / "toy.npz", n=40)
    write_model(tmp_path / "models", "Toy", RAW, data)
    history = train(Catalog(tmp_path / "models").get("Toy"), TrainOptions(limit=10))
    steps = [r["step"] for r in history]
    assert steps[:2] == ["0-0", "1-1"]
    trained = [r for r in history if r["loss"] is not None]
    # one step of the family's own loss: cross-entropy of 3 classes starts near log 3
    assert trained and all(np.isfinite(r["loss"]) for r in trained)
    assert trained[0]["loss"] == pytest.approx(math.log(3), rel=0.5)


def test_an_unknown_family_is_one_line_naming_the_file_the_value_and_the_families():
    with pytest.raises(ReportgenError) as err:
        parse_model_params({**{k: v for k, v in RAW.items() if k != "toy"},
                            "family": "transformer"}, source="models/T/params.toml")
    message = str(err.value)
    assert "\n" not in message
    assert "models/T/params.toml" in message and "'transformer'" in message
    assert all(f"'{name}'" in message for name in registered())
    with pytest.raises(ReportgenError) as err:
        families.family("transformer", "models/T/params.toml")
    assert "models/T/params.toml" in str(err.value) and "\n" not in str(err.value)


# -- nothing outside the families names one -----------------------------------------------------

def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _names_in(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every string constant of `source` that is one of `names`."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and node.value in names]


def test_no_module_outside_the_families_names_a_family():
    """A string that is a family's name (or the name of its params.toml table) appears only in
    the registry and in the modules the family declares its own: adding a family edits no
    shared module."""
    names = set()
    own = {"reportgen.settings.families"}
    for name in registered():
        family = families.family(name)
        names |= {family.name, family.table} - {None}
        own |= set(family.modules)
    assert {"capsnet", "em", "cnn", "gracapsnet", "graph"} <= names
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        # inside a family's package (its tests and its own techniques too), and a package's
        # own tests (reportgen/**/tests/, which may name families as tests/ does)
        if module in own or module.startswith("reportgen.families.") or \
                ".tests." in f"{module}.":
            continue
        found += [f"{module}:{line}: {name!r}"
                  for line, name in _names_in(path.read_text(encoding="utf-8"), names)]
    assert found == [], "family names outside the families:\n" + "\n".join(found)


def test_no_module_outside_the_families_imports_one():
    """The registry finds the plug-ins by listing their package: no other module of reportgen
    imports a family's module (at module level or lazily), so none depends on which exist."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        if module.startswith("reportgen.families"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):      # `from reportgen import families` too
                targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module or ""]
            else:
                continue
            found += [f"{module}:{node.lineno}: {t}" for t in targets
                      if t == "reportgen.families" or t.startswith("reportgen.families.")]
    assert found == []


def test_the_check_sees_tests_by_name_and_not_other_strings():
    """What the check above reads: a family's name compared, or as a key, is found; a docstring
    or another word that contains it is not."""
    source = ('"""About the em family and cnn heads."""\n'
              'if params.family == "em":\n    kind = {"cnn": 1}.get("cnns", "gem")\n')
    assert sorted(_names_in(source, {"em", "cnn"})) == [(2, "em"), (3, "cnn")]
