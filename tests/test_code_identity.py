"""A plug-in's code is part of what its results are keyed by (reportgen.engine.code_identity):
editing a family's module changes the digest of its models and of no other family's; editing a
technique's module changes its keys and no other technique's; editing its drawing module
changes its figures' keys and keeps its arrays'. The families and techniques here are modules
written into tmp_path and registered from code, as a researcher's package would declare them."""

from __future__ import annotations

import importlib
import re
import sys

import pytest

from reportgen import plugins, techniques
from reportgen.cache.keys import hash_bytes
from reportgen.engine import code_identity
from reportgen.engine.code_identity import (REGISTERED_IN_CODE, drawing_code as _drawing,
                                            family_code as _family,
                                            module_digest, technique_code as _technique)
from reportgen.engine.model import model_digest
from reportgen.engine.step import step_keys
from reportgen.figures.figure import RenderContext
from reportgen.pages.assemble import Assembler
from reportgen.settings import families
from reportgen.settings.model_params import parse_model_params


def family_code(family):
    return _family(family, families.origin(family))


def technique_code(technique):
    return _technique(technique, techniques.origin(technique))


def drawing_code(technique):
    return _drawing(technique, techniques.origin(technique))

# A family of a conv layer and a dense head (tests/test_family_plugin.py's toy, without a table
# of its own); TensorFlow only inside `build`.
FAMILY_SOURCE = '''
from reportgen.capsnet.description import Head, ModelDescription, conv_stack
from reportgen.settings.families import Family
from reportgen.settings.model_params import conv_grid

HIDDEN = 5


def describe(params):
    convs = conv_stack(params.input_shape, [
        (f"conv{i + 1}", c.filters, c.kernel_size, c.strides, "valid", c.activation, "")
        for i, c in enumerate(params.conv)])
    return ModelDescription(input_shape=tuple(params.input_shape), conv_layers=convs,
                            capsule_layers=(), head=Head("logits", params.num_classes, "logits"))


def count_params(params):
    last = describe(params).conv_layers[-1]
    flat = last.grid[0] * last.grid[1] * last.filters
    conv = params.conv[0]
    return (conv.kernel_size ** 2 * params.input_shape[2] * conv.filters + conv.filters
            + flat * HIDDEN + HIDDEN + HIDDEN * params.num_classes + params.num_classes)


def build(params):
    import keras
    from keras import layers, ops

    from reportgen.capsnet.network import Network, build_convs

    description = describe(params)
    image = keras.Input(params.input_shape, name="image")
    x, outputs, _ = build_convs(description, image)
    hidden = layers.Dense(HIDDEN, activation="relu", name="hidden")(layers.Flatten()(x))
    logits = layers.Dense(params.num_classes, name="logits")(hidden)
    probabilities = layers.Softmax(name="probabilities")(logits)
    outputs.update(logits=logits, probabilities=probabilities)
    model = keras.Model(image, outputs, name=NAME)
    scores = keras.Model(image, [logits, probabilities])

    def losses(images, one_hot):
        logit, probability = scores(images, training=True)
        loss = ops.categorical_crossentropy(one_hot, logit, from_logits=True)
        return loss, ops.zeros_like(loss), probability

    return Network(params=params, description=description, model=model, encoder=scores,
                   training_losses=losses)


def check(params, raw, source):
    conv_grid(params, source)
    return params


FAMILY = Family(name=NAME, describe=describe, build=build, count_params=count_params,
                display_name=lambda params: "CodeKeyNet", check=check, modules=(__name__,))
'''
# The edit a researcher makes to their network: the same weights, other numbers.
FAMILY_EDIT = ('activation="relu", name="hidden"', 'activation="tanh", name="hidden"')

# A technique of input scope (the mean of each image) drawn by a module of its own (`lazy`).
TECHNIQUE_SOURCE = '''
from dataclasses import dataclass

import numpy as np

from reportgen.techniques.base import Technique, lazy


@dataclass(frozen=True)
class Params:
    """No options."""


def compute(batch, params=None):
    return {"mean": np.asarray(batch.images, np.float32).mean(axis=(1, 2, 3))}


TECHNIQUE = Technique(name=NAME, title="Mean brightness", layer="model", scope=SCOPE,
                      needs=frozenset(), applies_to=frozenset(), params_type=Params, version=1,
                      compute=compute, render=lazy(NAME + "_figures", "render"))
'''
TECHNIQUE_EDIT = ("mean(axis=(1, 2, 3))", "mean(axis=(1, 2, 3)) * 2")
FIGURES_SOURCE = '''
from reportgen.figures.figure import Figure


def render(arrays, params, ctx):
    return [Figure(name="mean.json", data=b"{}", kind="json")]
'''


@pytest.fixture
def plugin_modules(tmp_path, monkeypatch):
    """`write(name, source)` puts module `name` in tmp_path (on sys.path) and imports it;
    `edit(name, old, new)` edits one line of it and imports it again, as a new process would.
    Every module and registration is undone afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    written, registered = [], []

    class Modules:
        @staticmethod
        def write(name: str, source: str, **constants):
            head = "".join(f"{key} = {value!r}\n" for key, value in constants.items())
            (tmp_path / f"{name}.py").write_text(head + source, encoding="utf-8")
            written.append(name)
            importlib.invalidate_caches()
            return importlib.import_module(name)

        @staticmethod
        def edit(name: str, old: str, new: str, reload: bool = True):
            path = tmp_path / f"{name}.py"
            text = path.read_text(encoding="utf-8")
            assert text.count(old) == 1, old
            path.write_text(text.replace(old, new), encoding="utf-8")
            return importlib.reload(sys.modules[name]) if reload else sys.modules[name]

        @staticmethod
        def register(declared):
            if isinstance(declared, families.Family):
                families.register(declared)
            else:
                techniques.register(declared)
            registered.append(declared)
            return declared

    yield Modules
    for declared in registered:
        (families if isinstance(declared, families.Family) else techniques).unregister(
            declared.name)
    for name in written:
        sys.modules.pop(name, None)


def _toy_raw(family: str) -> dict:
    return {"dataset": "mnist", "input_shape": [12, 12, 1], "num_classes": 3, "family": family,
            "conv": [{"filters": 4, "kernel_size": 3, "strides": 2}]}


def _family_module(modules, name):
    module = modules.write(name, FAMILY_SOURCE, NAME=name)
    modules.register(module.FAMILY)
    return module


def test_editing_a_family_changes_its_models_digest_and_no_other_familys(plugin_modules):
    _family_module(plugin_modules, "codekey_a")
    _family_module(plugin_modules, "codekey_b")
    a, b = (parse_model_params(_toy_raw(n)) for n in ("codekey_a", "codekey_b"))
    capsnet = parse_model_params({**_toy_raw("capsnet"), "primary": {"kernel_size": 3}})
    before = {name: model_digest(p) for name, p in (("a", a), ("b", b), ("capsnet", capsnet))}
    assert before["a"] != before["b"]        # the same parameters, other code
    # the file edited under a running process: it still runs (and keys) the code it imported
    plugin_modules.edit("codekey_a", *FAMILY_EDIT, reload=False)
    assert model_digest(a) == before["a"]
    # imported again (the next build's process), and registered again
    edited = plugin_modules.edit("codekey_a", "HIDDEN = 5", "HIDDEN = 5  # fixed")
    plugin_modules.register(edited.FAMILY)
    after = {name: model_digest(p) for name, p in (("a", a), ("b", b), ("capsnet", capsnet))}
    assert after["a"] != before["a"]
    assert after["b"] == before["b"] and after["capsnet"] == before["capsnet"]


def test_a_familys_own_modules_are_part_of_its_code(plugin_modules):
    """Family.modules: a module of the family's network, imported by its build only, keys its
    models like the declaring module does."""
    plugin_modules.write("codekey_layers", "SCALE = 1.0\n")
    module = _family_module(plugin_modules, "codekey_c")
    declared = plugin_modules.register(
        families.Family(**{**module.FAMILY.__dict__, "modules": ("codekey_c", "codekey_layers")}))
    before = family_code(declared)
    plugin_modules.edit("codekey_layers", "SCALE = 1.0", "SCALE = 2.0")
    assert family_code(declared) != before


BUILT_IN_FAMILIES = ("capsnet", "cnn", "em", "gracapsnet", "self_routing")


def test_every_module_of_a_builtin_familys_package_is_its_code():
    """reportgen's own families are packages (reportgen/families/<name>/): their network,
    layers and routing modules are all in `Family.modules`, so an edit of any recomputes the
    family's models; their tests are not."""
    from pathlib import Path

    root = Path(families.__file__).resolve().parents[1] / "families"
    for name in BUILT_IN_FAMILIES:
        family = families.family(name)
        package = f"reportgen.families.{name}"
        files = {f"{package}.{p.stem}" for p in (root / name).glob("*.py") if p.stem != "__init__"}
        assert {"network", "layers"} <= {m.rpartition(".")[2] for m in files}, name
        covered = {package, family.describe.__module__, *family.modules}
        assert files | {package} <= covered, name
        assert not [m for m in family.modules if ".tests" in m], name


@pytest.mark.parametrize("edited, changed", [
    ("reportgen.families.em.routing", {"em"}),
    ("reportgen.families.em.layers", {"em"}),
    ("reportgen.families.capsnet.routing", {"capsnet"}),
    ("reportgen.families.self_routing.routing", {"self_routing"}),
    ("reportgen.families.gracapsnet.layers", {"gracapsnet"}),
    ("reportgen.families.cnn.network", {"cnn"}),
    # the shared core is covered by NUMERICS_VERSION, not by a family's code
    ("reportgen.capsnet.network", set()),
])
def test_editing_a_builtin_familys_module_changes_its_code_and_no_other_familys(
        monkeypatch, edited, changed):
    """As the source of one module reads after an edit: only the family whose package holds it
    gets another code digest (editing families/em/routing.py changes em's, not capsnet's)."""
    def codes():
        code_identity.forget()
        return {name: family_code(families.family(name)) for name in BUILT_IN_FAMILIES}

    before = codes()
    read = code_identity._source

    def edited_source(name, module, spec):
        source = read(name, module, spec)
        return source + b"\n# edited\n" if name == edited else source

    monkeypatch.setattr(code_identity, "_source", edited_source)
    try:
        after = codes()
    finally:
        monkeypatch.undo()
        code_identity.forget()
    assert {name for name in BUILT_IN_FAMILIES if after[name] != before[name]} == changed


def _technique_module(modules, name, scope="checkpoint"):
    modules.write(f"{name}_figures", FIGURES_SOURCE)
    module = modules.write(name, TECHNIQUE_SOURCE, NAME=name, SCOPE=scope)
    return modules.register(module.TECHNIQUE)


def _checkpoint_keys(*declared) -> dict[str, str]:
    variants = [(t, t.params_type()) for t in declared]
    keys = step_keys("model", "w.weights.h5", variants, [], "eval", with_dataset=True,
                     digest=lambda path: "weights")
    return {name: key for (name, _), key in keys.checkpoint.items()}


def test_editing_a_technique_changes_its_keys_and_no_other_techniques(plugin_modules):
    first = _technique_module(plugin_modules, "codekey_mean")
    other = _technique_module(plugin_modules, "codekey_other")
    builtin = techniques.get_technique("conv_kernels")
    before = _checkpoint_keys(first, other, builtin)
    assert len(set(before.values())) == 3
    edited = plugin_modules.edit("codekey_mean", *TECHNIQUE_EDIT).TECHNIQUE
    plugin_modules.register(edited)
    after = _checkpoint_keys(edited, other, builtin)
    assert after["codekey_mean"] != before["codekey_mean"]
    assert after["codekey_other"] == before["codekey_other"]
    assert after["conv_kernels"] == before["conv_kernels"]


def test_editing_a_techniques_drawing_redraws_its_figures_and_keeps_its_arrays(plugin_modules):
    technique = _technique_module(plugin_modules, "codekey_drawn")
    params, ctx = technique.params_type(), RenderContext(model="M", step="1-1",
                                                         class_names=("a", "b"))
    arrays = _checkpoint_keys(technique)["codekey_drawn"]
    figures = Assembler.figure_key(technique, params, arrays, ctx)
    plugin_modules.edit("codekey_drawn_figures", 'name="mean.json"', 'name="brightness.json"')
    assert _checkpoint_keys(technique)["codekey_drawn"] == arrays
    assert Assembler.figure_key(technique, params, arrays, ctx) != figures



# reportgen's own techniques declared in a package with a numbers module (array orders, summary
# keys, labels and measures its figures read: reportgen/techniques/<name>/numbers.py)
PACKAGED_NUMBERS = ("routing_weights", "gracaps_attention", "dead_units", "capsule_semantics",
                    "explanation_fidelity", "explanation_quality", "affine_robustness",
                    "adversarial_robustness", "multimnist_segmentation")


def _package(name: str) -> str:
    """The package declaring reportgen's own technique `name` (a family's own: in its family's)."""
    return techniques.OWN_MODULES.get(name, f"reportgen.techniques.{name}")


@pytest.mark.parametrize("name", PACKAGED_NUMBERS)
def test_editing_a_techniques_numbers_redraws_its_figures_only(name, monkeypatch):
    """An edit of reportgen/techniques/<name>/numbers.py (the source code_identity reads, one
    comment line longer) changes that technique's drawing code, not its arrays' code, and
    neither code of any other technique."""
    edited = f"{_package(name)}.numbers"
    everyone = [techniques.get_technique(n) for n in techniques.BUILT_IN]
    code_identity.forget()
    before = {t.name: (technique_code(t), drawing_code(t)) for t in everyone}
    read = code_identity._source

    def source(module, loaded, spec):
        text = read(module, loaded, spec)
        return text + b"\n# edited\n" if module == edited else text

    monkeypatch.setattr(code_identity, "_source", source)
    code_identity.forget()
    try:
        after = {t.name: (technique_code(t), drawing_code(t)) for t in everyone}
    finally:
        monkeypatch.undo()
        code_identity.forget()
    assert after[name][0] == before[name][0]
    assert after[name][1] != before[name][1]
    assert {n: v for n, v in after.items() if n != name} == \
        {n: v for n, v in before.items() if n != name}


def test_only_a_package_s_own_numbers_module_is_part_of_its_drawing_code():
    """A technique declared in a plain module (or in a package without numbers.py) keys its
    figures by its renderers' modules alone, as before."""
    from reportgen.engine.code_identity import _package_numbers

    for name in PACKAGED_NUMBERS:
        technique = techniques.get_technique(name)
        assert _package_numbers(technique, techniques.origin(technique)) == \
            f"{_package(name)}.numbers"
    for name in ("routing_entropy", "vote_agreement", "live_decoder"):     # no numbers.py
        technique = techniques.get_technique(name)
        assert _package_numbers(technique, techniques.origin(technique)) is None
    plain = techniques.get_technique("conv_kernels")     # registered in code: its compute's module
    assert _package_numbers(plain, None) is None

def test_a_plugins_package_and_version_are_part_of_its_code(plugin_modules):
    technique = _technique_module(plugin_modules, "codekey_versioned")
    in_code = technique_code(technique)
    record = plugins.Plugin(group=plugins.TECHNIQUES, name=technique.name,
                            target="codekey_versioned:TECHNIQUE", package="codekey-plugins",
                            version="1.0")
    techniques._ORIGINS[technique.name] = record
    installed = technique_code(technique)
    techniques._ORIGINS[technique.name] = plugins.Plugin(**{**record.__dict__, "version": "1.1"})
    upgraded = technique_code(technique)
    assert len({in_code, installed, upgraded}) == 3
    # registered again from code: no package's any more
    plugin_modules.register(technique)
    assert techniques.origin(technique) is None and technique_code(technique) == in_code
    assert code_identity.describe_origin(None)["package"] == REGISTERED_IN_CODE


def test_reportgen_s_own_are_keyed_alike_with_or_without_entry_points(monkeypatch):
    """A source tree run without `pip install -e .` reads reportgen's own families and
    techniques from its package: their code is reportgen's, at the same version, with the same
    keys as when they are installed."""
    rpv = techniques.get_technique("rpv")
    capsnet = families.family("capsnet")
    installed = (technique_code(rpv), drawing_code(rpv), family_code(capsnet))
    assert techniques.origin(rpv).package == families.origin(capsnet).package == "reportgen"
    monkeypatch.setattr(plugins.metadata, "entry_points", lambda **kw: [])
    for registry, flag in ((techniques, "_LOADED"), (families, "_LOADED")):
        monkeypatch.setattr(registry, flag, False)
        monkeypatch.setattr(registry, "_REGISTRY", {})
        monkeypatch.setattr(registry, "_ORIGINS", {})
        monkeypatch.setattr(registry, "_FOUND", [])
    rpv, capsnet = techniques.get_technique("rpv"), families.family("capsnet")
    assert techniques.origin(rpv).version == plugins.own_version()
    assert (technique_code(rpv), drawing_code(rpv), family_code(capsnet)) == installed


def test_finding_a_modules_source_imports_nothing(tmp_path, monkeypatch):
    package = tmp_path / "codekey_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (package / "network.py").write_text("SCALE = 1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert module_digest("codekey_pkg.network") == hash_bytes(b"SCALE = 1.0\n")
    assert "codekey_pkg" not in sys.modules
    assert module_digest("codekey_no_such_module") == "no source"


# -- a build -------------------------------------------------------------------------------------

def _per_model(err: str) -> dict[str, tuple[int, int]]:
    """{model: (computed, reused)} from the build's progress lines."""
    found = {}
    for line in err.splitlines():
        match = re.match(r"build (\w+):.*\bcomputed=(\d+), reused=(\d+)", line)
        if match:
            found[match[1]] = (int(match[2]), int(match[3]))
    return found


@pytest.mark.slow
def test_a_build_after_a_plugin_edit_recomputes_what_it_touches_and_only_that(
        plugin_modules, tmp_path, tmp_path_factory, monkeypatch, capsys):
    """The report this guards against: a researcher fixed their family's network, rebuilt, and
    the build reused every stored result of the old network."""
    from family_nets import write_model
    from test_training import _tiny_data
    from trained_tiny import copy_trained_tiny

    from reportgen.catalog import Catalog
    from reportgen.commands.build import BuildOptions, build
    from reportgen.training.trainer import TrainOptions, train

    # the build's drawing worker is another process, which knows reportgen's registry only
    monkeypatch.setenv("REPORTGEN_DRAWING_PROCESSES", "0")
    _family_module(plugin_modules, "codekey_net")
    _technique_module(plugin_modules, "codekey_mean", scope="input")
    models = tmp_path / "models"
    copy_trained_tiny(tmp_path_factory, models / "Tiny")
    write_model(models, "Toy", _toy_raw("codekey_net"), _tiny_data(tmp_path / "toy.npz", n=30))
    train(Catalog(models).get("Toy"), TrainOptions(limit=10))
    options = BuildOptions(models="Tiny,Toy", steps="last", images="test:0-1", analyses="none",
                           render_site=False, techniques=("predictions", "codekey_mean"),
                           cache_dir=str(tmp_path / "cache"),
                           project_dir=str(tmp_path / "mkdocs"), site_dir=str(tmp_path / "site"))

    def built():
        capsys.readouterr()
        summary = build(Catalog(models), options)
        assert summary.ok, summary.failed
        return _per_model(capsys.readouterr().err)

    first = built()
    assert first["Tiny"][0] > 0 and first["Toy"][0] > 0
    assert built() == {"Tiny": (0, first["Tiny"][0]), "Toy": (0, first["Toy"][0])}
    # the family's network fixed: every result of its model again, nothing of the other's
    plugin_modules.register(plugin_modules.edit("codekey_net", *FAMILY_EDIT).FAMILY)
    second = built()
    assert second["Toy"][0] == first["Toy"][0] and second["Tiny"] == (0, first["Tiny"][0])
    # the technique fixed: its two results of each model again, nothing else
    plugin_modules.register(plugin_modules.edit("codekey_mean", *TECHNIQUE_EDIT).TECHNIQUE)
    third = built()
    assert third["Tiny"][0] == third["Toy"][0] == 2
    assert third["Tiny"][0] + third["Tiny"][1] == first["Tiny"][0]
