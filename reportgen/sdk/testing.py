"""The testing kit a family or technique package runs on itself, as reportgen's own packages
do: Keras's `run_layer_test` habit for a capsule layer, a family check on the family's own
example model, and the technique table (every registered technique over that model: applies
or says why not, computes from only what it declared, renders, summarises).

    from reportgen.sdk.testing import check_capsule_layer, check_family, technique_table

    def test_my_layer():
        check_capsule_layer(lambda: MyCaps(10, 16), np.zeros((2, 36, 8), np.float32))

    def test_my_family():
        check_family("my_family")

    def test_every_technique_over_my_family():
        for row in technique_table("my_family"):
            assert row.ok, row.problem

Each check raises AssertionError naming what failed; each returns what it built so a test can
look further. TensorFlow is imported inside the functions.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["check_capsule_layer", "check_family", "technique_table", "TechniqueRow",
           "example_network", "parse_example", "build_network", "EXAMPLE_IMAGES",
           "run_probe", "subset", "check_network", "check_outputs", "required_outputs",
           "get_technique", "all_techniques", "registered_families", "get_family",
           "default_plan", "train_model", "params_toml", "evaluate_technique",
           "check_summary_csv"]

# Images the example model is probed with: seeded uniform noise (the contract holds for any
# input), as many as the evaluation of a dataset technique needs to have every class.
EXAMPLE_IMAGES = 12
# Smaller options for the slow built-in analyses (the code paths stay the same).
SMALL_OPTIONS = {
    "activation_maximization": {"steps": 3},
    "explanation_fidelity": {"images": 6, "patch": 4},
    "explanation_quality": {"images": 6, "subsets": 8, "perturbations": 6,
                            "sensitivity_samples": 2, "road_fractions": (0.2, 0.6)},
    "explanation_randomisation": {"images": 6},
    "capsule_semantics": {"images": 4, "steps": 3, "perturbation_steps": 3},
    "affine_robustness": {"rotation": (-30.0, 30.0), "translation_x": (2.0,),
                          "translation_y": (), "scale": (0.9,), "shear_x": (), "shear_y": ()},
    "adversarial_robustness": {"images": 6, "epsilons": (0.0, 0.1), "pgd_steps": 2},
    "affnist_benchmark": {"images": 20},
    "multimnist_segmentation": {"images": 12},
    "explanation_localisation": {"images": 6},
}


def _arrays(value) -> list[np.ndarray]:
    if isinstance(value, dict):
        return [np.asarray(v) for _, v in sorted(value.items())]
    if isinstance(value, (list, tuple)):
        return [np.asarray(v) for v in value]
    return [np.asarray(value)]


def check_capsule_layer(make: Callable[[], Any], inputs, *, atol: float = 1e-6,
                        custom_objects: dict | None = None):
    """A Keras 3 capsule layer keeps Keras's layer contract (Keras's own `run_layer_test`):
    `make()` gives a fresh, unbuilt layer; called on `inputs` (an array or a list of arrays) it
    builds its weights; `compute_output_shape` (where the layer defines it) gives the shapes it
    returns; `get_config` holds every constructor argument (`from_config` makes an equal
    layer that computes the same with the same weights); and a model of it survives a `.keras`
    save and load, registered serializable, with the same outputs. Returns the layer's outputs
    (as NumPy) for the test to compare with its own reference."""
    import keras

    layer = make()
    assert not layer.built, "make() must give an unbuilt layer (weights are made in build())"
    args = inputs if isinstance(inputs, (list, tuple)) else [inputs]
    args = [np.asarray(a, np.float32) for a in args]
    call = (lambda lay: lay(args)) if isinstance(inputs, (list, tuple)) else \
        (lambda lay: lay(args[0]))
    outputs = call(layer)
    assert layer.built, "calling the layer must build it"
    got = _arrays(keras.tree.map_structure(keras.ops.convert_to_numpy, outputs))
    shapes = [a.shape for a in args]
    try:
        declared = layer.compute_output_shape(shapes if len(shapes) > 1 else shapes[0])
    except NotImplementedError:
        declared = None
    if declared is not None:
        declared = declared if isinstance(declared, (list, tuple)) and declared and \
            isinstance(declared[0], (list, tuple)) else [declared]
        for shape, array in zip(declared, got):
            want = tuple(d if d is not None else a for d, a in zip(shape, array.shape))
            assert want == array.shape, (f"{type(layer).__name__}.compute_output_shape says "
                                         f"{tuple(shape)}, the call gives {array.shape}")
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config, \
        f"{type(layer).__name__}: from_config(get_config()) does not give the same config"
    call(clone)
    clone.set_weights(layer.get_weights())
    again = _arrays(keras.tree.map_structure(keras.ops.convert_to_numpy, call(clone)))
    for a, b in zip(got, again):
        np.testing.assert_allclose(b, a, atol=atol, err_msg=f"{type(layer).__name__} from its "
                                                            f"config computes otherwise")
    symbolic = [keras.Input(a.shape[1:]) for a in args]
    model_out = layer(symbolic) if isinstance(inputs, (list, tuple)) else layer(symbolic[0])
    model = keras.Model(symbolic, model_out)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "layer.keras"
        model.save(path)
        loaded = keras.saving.load_model(path, custom_objects=custom_objects)
    reloaded = _arrays(keras.tree.map_structure(keras.ops.convert_to_numpy,
                                                loaded(args if len(args) > 1 else args[0])))
    for a, b in zip(got, reloaded):
        np.testing.assert_allclose(b, a, atol=atol, err_msg=f"{type(layer).__name__} after a "
                                                            f".keras save and load")
    return got


def run_probe(net, images, needs=None, **kwargs):
    """reportgen's one forward (and backward) pass over `images`, keeping the probe tensors
    `needs` names (reportgen.probe.probe.run_probe): what a technique's `compute` receives."""
    from reportgen.probe.probe import run_probe as probe

    return probe(net, images, needs, **kwargs)


def subset(batch, index):
    """The same probe tensors for some of the batch's images (no model work)."""
    from reportgen.probe.probe import subset as pick

    return pick(batch, index)


def evaluate_technique(name: str, net, images, labels, options: dict | None = None,
                       class_names=None) -> dict[str, np.ndarray]:
    """The arrays technique `name` computes over an evaluation set, as a build computes them:
    its `compute` on `images` (N, H, W, C) in [0, 1] with `labels` (N,), its default options
    replaced by `options` (e.g. `{"attacks": ("pgd",)}`), reading only the tensors it declared. For
    a technique whose scope is the evaluation set (robustness, fidelity, semantics ...); what a
    test compares with an independent computation of the same number."""
    from reportgen.probe.evaluation import EvalBatch
    from reportgen.techniques import get_technique as technique_named

    technique = technique_named(name)
    if technique.scope != "dataset":
        raise ValueError(f"technique '{name}' is computed per {technique.scope}, not over an "
                         f"evaluation set: run it with run_probe and its compute")
    defaults = next(iter(technique.variants(net)), None)
    if defaults is None:
        raise ValueError(f"technique '{name}' does not apply to this network")
    params = dataclasses.replace(defaults, **options) if options else defaults
    labels = np.asarray(labels, np.int64)
    names = tuple(class_names) if class_names is not None else \
        tuple(str(k) for k in range(net.description.classes))
    evaluation = EvalBatch(net, np.asarray(images, np.float32), labels, names)
    declared = technique.needs_for(params, net)
    arrays = technique.compute(evaluation.restricted(declared, f"Technique '{name}'"), params)
    return {key: np.asarray(value) for key, value in arrays.items()}


def check_network(net, family_name: str, described=None) -> None:
    """The network contract (reportgen.contract.check_network): one-line error naming what
    the built network lacks."""
    from reportgen.contract import check_network as check

    check(net, family_name, described)


def check_outputs(net, family_name: str, images=None) -> None:
    """The declarations checked on a batch (reportgen.capsnet.declarations): the encoder's
    scores are the head's `scores`, the routing weights normalised as declared."""
    from reportgen.capsnet.declarations import check_outputs as check

    check(net, family_name, images)


def required_outputs(description) -> dict:
    """{model output: why} the contract requires of a network of `description`."""
    from reportgen.contract import required_outputs as required

    return required(description)


def check_summary_csv(summary: dict) -> dict[str, dict[str, str]]:
    """The CSV the build writes of a dataset technique's `summary` (key, value, low, high, n,
    method), checked to carry every 95% interval the summary records (summary["intervals"],
    reportgen.results.intervals.attach) in its row, paired differences included, and no
    interval columns on a number without one; returns its rows by key."""
    import csv
    import io

    from reportgen.pages.assemble import export_figures, plain

    data = next(f.data for f in export_figures("summary", summary) if f.kind == "csv")
    table = list(csv.DictReader(io.StringIO(data.decode())))
    rows = {row["key"]: row for row in table}
    assert len(rows) == len(table), "a key appears twice in the CSV"
    assert table and list(table[0]) == ["key", "value", "low", "high", "n", "method"], \
        "the CSV lacks the interval columns"
    intervals = plain(summary).get("intervals", {})
    assert not any(k.startswith("intervals.") for k in rows), "the intervals repeated as rows"

    def cell(value):
        if isinstance(value, list):
            return " ".join("" if v is None else str(v) for v in value)
        return "" if value is None else str(value)

    for key, entry in intervals.items():
        assert key in rows, f"no CSV row for the interval of {key!r}"
        for column in ("low", "high", "n", "method"):
            assert rows[key][column] == cell(entry[column]), (key, column, rows[key])
    for key, row in rows.items():
        if key not in intervals:
            assert row["low"] == row["high"] == row["method"] == "", \
                f"{key!r} has interval columns but no interval"
    return rows


def get_technique(name: str):
    """The registered technique `name` (entry points, reportgen's own first)."""
    from reportgen.techniques import get_technique as get

    return get(name)


def all_techniques():
    """Every registered technique, in page order."""
    from reportgen.techniques import all_techniques as every

    return every()


def registered_families() -> tuple[str, ...]:
    from reportgen.settings.families import registered

    return registered()


def get_family(name: str):
    from reportgen.settings.families import family

    return family(name)


def default_plan(params):
    """What a default build computes for a model of `params`: (the techniques computed, {the
    others: their not-applicable clause}), as the site lists them."""
    from reportgen.engine.model import ModelHandle, not_applicable_reason
    from reportgen.engine.step import plan
    from reportgen.techniques import all_techniques as every

    chosen = plan([t for t in every() if not t.experimental], ModelHandle(params))
    return ({t.name for t, _ in chosen.variants},
            {t.name: not_applicable_reason(m) for t, m in chosen.not_applicable})


def train_model(models_dir, name: str, **options):
    """Train models_dir/NAME with reportgen's trainer (options of
    reportgen.training.trainer.TrainOptions, e.g. limit=1600); returns the history records
    (one per saved step, "val_accuracy" on the held-out split among them)."""
    from reportgen.catalog import Catalog
    from reportgen.training.trainer import TrainOptions, train

    return train(Catalog(Path(models_dir)).get(name), TrainOptions(**options))


def params_toml(raw: dict, training: dict | None = None) -> str:
    """The params.toml text of a model document (top-level values, `[[conv]]` arrays, tables)
    and its `[training]` table, for a model folder a test writes."""
    import json

    def value(v) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(v)

    lines = [f"{k} = {value(v)}" for k, v in raw.items()
             if not isinstance(v, dict) and not (k == "conv" and isinstance(v, list))]
    for conv in raw.get("conv", []):
        lines += ["[[conv]]", *(f"{k} = {value(v)}" for k, v in conv.items())]
    tables = {**{k: v for k, v in raw.items() if isinstance(v, dict)},
              **({"training": training} if training else {})}
    for table, entries in tables.items():
        lines += [f"[{table}]", *(f"{k} = {value(v)}" for k, v in entries.items())]
    return "\n".join(lines) + "\n"


def build_network(raw, seed: int = 0, source: str = "the test's model"):
    """The network of a params.toml document (a dict) or of ModelParams, weights seeded, held
    to the contract as every build is."""
    import keras

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.settings.model_params import parse_model_params

    params = parse_model_params(raw, source=source) if isinstance(raw, dict) else raw
    keras.utils.set_random_seed(seed)
    return build_capsnet(params)


def parse_example(name: str, **changes):
    """The family's example model (Family.example) as ModelParams, its tables updated by
    `changes` (e.g. decoder={"enabled": False})."""
    from reportgen.settings.families import example_params
    from reportgen.settings.model_params import parse_model_params

    raw = example_params(name)
    for table, values in changes.items():
        raw[table] = {**raw.get(table, {}), **values} if isinstance(values, dict) else values
    return parse_model_params(raw, source=f"the example model of family '{name}'")


def example_network(name: str, seed: int = 0, **changes):
    """The family's example model built (weights seeded), held to the network contract and
    checked on a batch as every build is (reportgen.contract)."""
    return build_network(parse_example(name, **changes), seed)


def check_family(name: str, seed: int = 0):
    """A family is held to what reportgen's own are: its example model describes, counts and
    builds alike (`describe(params)` is the built network's description, `count_params` its
    trainable weights); it keeps the network contract and its declarations hold on a batch
    (the encoder's scores, the routing weights' normalisation: reportgen.contract); every
    routed layer's weights have the shape its description gives; and its Keras model survives
    a `.keras` save and load with the same outputs. Returns the built network."""
    import keras

    from reportgen.capsnet.description import describe, parents_per_child
    from reportgen.settings.families import family

    declared = family(name)
    assert declared.example is not None, f"family '{name}' declares no example model"
    params = parse_example(name)
    net = example_network(name, seed)
    description = describe(params)
    assert net.description == description, "the built network's description is not describe()'s"
    counted = declared.count_params(params)
    assert counted == net.trainable_params(), (
        f"count_params says {counted:,} trainable parameters, the built model has "
        f"{net.trainable_params():,}")
    images = np.random.default_rng(seed).uniform(
        0, 1, (3, *description.input_shape)).astype(np.float32)
    outputs = {k: np.asarray(v) for k, v in net.model(images, training=False).items()}
    layers = description.capsule_layers
    for layer, after in zip(layers, layers[1:]):
        if layer.routing is None or not layer.routing.paths:
            continue
        weights = outputs[layer.routing.output_of(layer.name)]
        if weights.ndim == 3:
            assert weights.shape[1:] == (layer.capsules, after.capsules), (
                f"routing weights of {layer.name}: shape {weights.shape[1:]}, the description "
                f"gives (children {layer.capsules}, parents {after.capsules})")
            reach = parents_per_child(description, layer.name)
            assert np.all(weights[:, reach == 0] == 0), \
                f"routing weights of {layer.name} are not 0 where a child cannot route"
        else:
            grid = after.grid
            assert weights.shape[1:3] == tuple(grid) and weights.shape[5:] == \
                (layer.types, after.types), (f"routing weights of {layer.name}: window form "
                                             f"{weights.shape[1:]} does not fit the grids")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{name}.keras"
        net.model.save(path)
        loaded = keras.saving.load_model(path)
    again = {k: np.asarray(v) for k, v in loaded(images, training=False).items()}
    assert sorted(again) == sorted(outputs), "the loaded model has other outputs"
    for key, value in outputs.items():
        np.testing.assert_allclose(again[key], value, rtol=1e-4, atol=1e-5,
                                   err_msg=f"output '{key}' after a .keras save and load")
    return net


@dataclass(frozen=True)
class TechniqueRow:
    """One technique over a family's example model: whether it applies (else the plain
    clause why not), and what computing, rendering and summarising it gave ("" = fine)."""

    technique: str
    applies: bool
    reason: str = ""
    computed: int = 0          # result sets computed (one per variant)
    rendered: int = 0          # figures drawn
    summarised: int = 0        # summaries made (dataset techniques)
    problem: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem


def technique_table(name: str, techniques: Sequence[str] | None = None, seed: int = 0,
                    options: dict | None = None) -> list[TechniqueRow]:
    """Every registered technique (or those named) over family `name`'s example model, as
    reportgen's own contract table runs them: where it applies, computed through a probe view
    that refuses any tensor it did not declare (Technique.needs), its first result rendered to
    at least one figure and, for a dataset technique, summarised to JSON and to a CSV that
    carries its intervals (`check_summary_csv`); where it does not,
    the plain "not applicable" clause (no sentence, no line break). `options` {technique:
    {option: value}} replace the built-in slow analyses' SMALL_OPTIONS."""
    import json

    from reportgen.engine.model import not_applicable_reason
    from reportgen.engine.result_checks import checked_result
    from reportgen.engine.step import plan
    from reportgen.figures.figure import RenderContext
    from reportgen.probe.evaluation import EvalBatch
    from reportgen.probe.probe import empty_batch, run_probe
    from reportgen.techniques import all_techniques, get_technique

    net = example_network(name, seed)
    description = net.description
    chosen = [get_technique(t) for t in techniques] if techniques is not None else \
        list(all_techniques())
    small = {**SMALL_OPTIONS, **(options or {})}
    rng = np.random.default_rng(seed)
    images = rng.uniform(0, 1, (EXAMPLE_IMAGES, *description.input_shape)).astype(np.float32)
    labels = np.arange(EXAMPLE_IMAGES) % description.classes
    class_names = tuple(str(k) for k in range(description.classes))
    rows = []
    for technique in chosen:
        variants = [dataclasses.replace(p, **small[technique.name])
                    if p is not None and technique.name in small else p
                    for p in technique.variants(net)]
        if not variants:
            planned = plan([technique], net)
            reason = not_applicable_reason(planned.not_applicable[0][1]) \
                if planned.not_applicable else "it names another number of classes per image"
            problem = ""
            if "\n" in reason or reason.endswith(".") or not reason.strip():
                problem = f"the not-applicable clause is no plain clause: {reason!r}"
            rows.append(TechniqueRow(technique.name, False, reason, problem=problem))
            continue
        computed = rendered = summarised = 0
        try:
            for params in variants:
                declared = technique.needs_for(params, net)
                reader = f"Technique '{technique.name}'"
                if technique.scope == "input":
                    batch = run_probe(net, images[:3], needs=declared, labels=labels[:3])
                    arrays = technique.compute(batch.restricted(declared, reader), params)
                    item = {k: np.asarray(v)[0] for k, v in arrays.items()}
                elif technique.scope == "checkpoint":
                    arrays = technique.compute(empty_batch(net).restricted(declared, reader),
                                               params)
                    item = dict(arrays)
                else:
                    evaluation = EvalBatch(net, images, labels.astype(np.int64), class_names)
                    arrays = technique.compute(evaluation.restricted(declared, reader), params)
                    item = dict(arrays)
                    if technique.summarize is not None:
                        summary = technique.summarize(arrays, params)
                        json.dumps(summary, allow_nan=True)
                        check_summary_csv(summary)      # its CSV carries its intervals
                        summarised += 1
                computed += 1
                # what the engine checks before it stores a result (one row per input,
                # numeric, finite): reportgen.engine.result_checks
                checked_result(technique, arrays,
                               len(images[:3]) if technique.scope == "input" else None)
                if computed == 1:
                    ctx = RenderContext(model=f"example of {name}", step="0-0",
                                        class_names=class_names, input_label="noise #0",
                                        image=images[0], description=description)
                    figures = technique.render(item, params, ctx)
                    assert figures, "render drew no figure"
                    rendered += len(figures)
        except Exception as exc:          # the table reports every technique, not the first
            rows.append(TechniqueRow(technique.name, True, computed=computed,
                                     rendered=rendered, summarised=summarised,
                                     problem=f"{type(exc).__name__}: {exc}"))
            continue
        rows.append(TechniqueRow(technique.name, True, computed=computed, rendered=rendered,
                                 summarised=summarised))
    return rows
