"""Every registered technique keeps its declaration: it reads only the probe tensors it declared
(`needs`), the probe computes only those, and the engine computes a technique only for models it
applies to (`applies_to`)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from reportgen.capsnet.description import feature_words
from reportgen.engine.result_checks import checked_result
from reportgen.engine.step import compute_step, plan, step_keys
from reportgen.probe import probe as probe_module
from reportgen.probe.evaluation import EvalBatch
from reportgen.probe.probe import (TENSORS, UndeclaredTensorError, empty_batch, run_probe,
                                   tensor_kind)
from reportgen.data.label_arity import model_label_arity
from reportgen.engine.model import not_applicable_reason
from reportgen.sdk.testing import SMALL_OPTIONS
from reportgen.techniques import BUILT_IN, all_techniques, get_technique, technique_names

CLASS_NAMES = ("a", "b", "c")
# Smaller options for the slow analyses (the code paths stay the same): the SDK kit's.
SMALL = SMALL_OPTIONS


def _variants(technique, net):
    options = SMALL.get(technique.name, {})
    return [dataclasses.replace(p, **options) if options else p for p in technique.variants(net)]


@pytest.fixture(scope="module")
def evaluation_data():
    rng = np.random.default_rng(11)
    return rng.random((12, 12, 12, 1), dtype=np.float32), rng.integers(0, 3, 12).astype(np.int64)


def _assert_same(got: dict, want: dict, what: str):
    assert sorted(got) == sorted(want), what
    for key in want:
        np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(want[key]),
                                      err_msg=f"{what}: {key}")


def test_declarations_are_known():
    for technique in all_techniques():
        assert technique.applies_to <= set(feature_words()), technique.name
        assert technique.variants.choose is not None


# The nets every technique runs over: the example model of every registered family (a family
# from an installed package declares one too: Family.example), each CNN head, and the nets of
# the data sets some analyses need (two overlapping digits; the affine benchmark's 40x40).
def _nets() -> dict[str, dict]:
    import family_nets

    from reportgen.settings.families import example_params, registered

    nets = {name: example_params(name) for name in registered()}
    nets.update({f"cnn_{head}": family_nets.tiny_cnn(head) for head in family_nets.CNN_HEADS})
    nets.update(pair=family_nets.TINY_PAIR, cnn40=family_nets.TINY_CNN40)
    return nets


NETS = _nets()
_BUILT: dict = {}


def _net(name: str):
    if name not in _BUILT:
        import family_nets

        from reportgen.settings.families import XLA

        net = family_nets.build(NETS[name])
        # Plain tf.function passes: XLA is not what this table checks (tests/
        # test_compiled_passes.py holds XLA to the eager model), and compiling each batch shape
        # with XLA made EM's cases the fast loop's slowest.
        net.xla = XLA()
        _BUILT[name] = net
    return _BUILT[name]


@pytest.mark.parametrize("net_name", sorted(NETS))
@pytest.mark.parametrize("name", technique_names())
def test_every_technique_over_every_family(name, net_name, images, evaluation_data):
    """Table-driven, as Captum tests its methods: every technique over a tiny net of every
    family. Where it applies, through a view restricted to its needs, over a probe that
    computed only those, it gives exactly what it gives from the full probe; where it does not,
    the plan says why in one plain clause."""
    technique = get_technique(name)
    net = _net(net_name)
    variants = _variants(technique, net)
    if not variants:
        chosen = plan([technique], net)
        if chosen.not_applicable:
            reason = not_applicable_reason(chosen.not_applicable[0][1])
            # a plain clause after "Not applicable to this model:"
            assert reason.startswith(("it has no ", "each of its images", "its ")), reason
            assert "\n" not in reason and not reason.endswith(".")
        else:      # a one-label analysis on a two-label model (or the reverse): not named
            assert model_label_arity(net.params) not in technique.labels
        return
    # the full probe's results for comparison on the first net it runs on (the others: it
    # runs through the restricted view, reading only what it declared)
    first = next(n for n in sorted(NETS) if _variants(technique, _net(n)))
    for params in variants:
        _check_declared_reads(technique, params, net, images, evaluation_data,
                              compare=net_name == first)


def test_every_technique_runs_somewhere():
    names = {t: [n for n in NETS if _variants(get_technique(t), _net(n))]
             for t in technique_names()}
    assert all(names.values()), [t for t, found in names.items() if not found]


def _check_declared_reads(technique, params, tiny_net, images, evaluation_data,
                          compare: bool = True):
    name = technique.name
    declared = technique.needs_for(params, tiny_net)
    description = tiny_net.description
    assert all(tensor_kind(n) in TENSORS or n in description.outputs for n in declared), declared
    reader = f"Technique '{name}'"
    if technique.scope == "input":
        shape = tuple(description.input_shape)
        if images.shape[1:] != shape:     # the 36x36 and 40x40 nets
            images = np.random.default_rng(12).random((len(images), *shape), dtype=np.float32)
        probed = run_probe(tiny_net, images, needs=declared)
        assert set(probed.tensors) <= declared | {"images"}
        got = technique.compute(probed.restricted(declared, reader), params)
        want = technique.compute(run_probe(tiny_net, images), params) if compare else got
    elif technique.scope == "checkpoint":
        got = technique.compute(empty_batch(tiny_net).restricted(declared, reader), params)
        want = technique.compute(empty_batch(tiny_net), params) if compare else got
    else:
        x, y = evaluation_data
        shape = tuple(description.input_shape)
        if x.shape[1:] != shape:
            x = np.random.default_rng(11).random((len(x), *shape), dtype=np.float32)
        y = y % description.classes
        shared = EvalBatch(tiny_net, x, y, CLASS_NAMES[:description.classes]
                           if description.classes <= 3 else tuple(map(str, range(10))))
        got = technique.compute(shared.restricted(declared, reader), params)
        assert set(shared._tensors) <= declared       # the shared pass kept nothing more
        want = technique.compute(EvalBatch(tiny_net, x, y, shared.class_names), params) \
            if compare else got
    _assert_same(got, want, name)
    # and what the engine checks before storing it (reportgen.engine.result_checks)
    checked_result(technique, got, len(images) if technique.scope == "input" else None)


def test_an_undeclared_read_is_refused(tiny_net, images, evaluation_data):
    rpv = get_technique("rpv")
    declared = rpv.needs_for(rpv.params_type(), tiny_net) - {"routing:primary_caps"}
    view = run_probe(tiny_net, images).restricted(declared, "Technique 'rpv'")
    assert "routing:primary_caps" not in view.tensors
    with pytest.raises(UndeclaredTensorError,
                       match="Technique 'rpv' read the probe tensor 'routing:primary_caps' "
                             "without declaring it"):
        rpv.compute(view, rpv.params_type())
    diagnostics = get_technique("vote_agreement")
    x, y = evaluation_data
    declared = diagnostics.needs_for(None, tiny_net) - {"routing:primary_caps"}
    view = EvalBatch(tiny_net, x, y, CLASS_NAMES).restricted(declared, "Technique 'rd'")
    with pytest.raises(UndeclaredTensorError, match="'routing:primary_caps'"):
        diagnostics.compute(view, diagnostics.params_type())


def test_probe_targets_of_gradients(tiny_net, images):
    """grad[true] and grad[all] are the gradients of the true / every class's length; grad is
    the predicted class's (what Grad-CAM++ uses)."""
    labels = np.array([0, 1, 2, 1, 0])
    batch = run_probe(tiny_net, images, needs={"grad:conv1", "grad[true]:conv1",
                                               "grad[all]:conv1", "predicted"}, labels=labels)
    every = batch["grad[all]:conv1"]
    assert every.shape == (5, 3, 10, 10, 8)
    rows = np.arange(5)
    np.testing.assert_allclose(batch["grad[true]:conv1"], every[rows, labels], atol=1e-7)
    np.testing.assert_allclose(batch["grad:conv1"], every[rows, batch["predicted"]], atol=1e-7)
    assert not np.allclose(every[:, 0], every[:, 1])
    assert set(batch.tensors) == {"images", "grad:conv1", "grad[true]:conv1", "grad[all]:conv1",
                                  "predicted"}
    with pytest.raises(ValueError, match="true labels"):
        run_probe(tiny_net, images, needs={"grad[true]:conv1"})


class DictStore:
    def __init__(self):
        self.arrays = {}

    def has_arrays(self, key):
        return key in self.arrays

    def put_arrays(self, key, arrays, meta):
        self.arrays[key] = dict(arrays)


def test_engine_probes_only_what_missing_techniques_declared(tmp_path, make_net, images,
                                                             monkeypatch):
    net = make_net(seed=1)
    weights = tmp_path / "1-1.weights.h5"
    net.model.save_weights(str(weights))
    inputs = [SimpleNamespace(key=f"test-{i}", image=images[i], true_class=i % 3,
                              source_bytes_digest=f"digest-{i}") for i in range(3)]
    names = ("predictions", "primary_heatmaps", "gradcam_pp", "conv_kernels", "rpv")
    variants = plan([get_technique(n) for n in names], net).variants
    keys = step_keys("model", weights, variants, inputs, "eval", with_dataset=False)
    eval_set = (images, np.array([0, 1, 2, 0, 1]), CLASS_NAMES)
    asked = []
    real = probe_module.run_probe

    def recording(net, x, needs=None, **kwargs):
        asked.append((len(x), frozenset(needs)))
        return real(net, x, needs=needs, **kwargs)

    monkeypatch.setattr(probe_module, "run_probe", recording)
    store = DictStore()
    counts = compute_step(net, weights, variants, inputs, eval_set, keys, store, 16, {})
    assert counts.computed == 3 * (1 + 1 + 2 + 2) + 1
    # "probabilities" (a CNN's, declared by predictions) is asked for too; the probe skips
    # what this model cannot have. Family-neutral names come as the tensors that hold them.
    assert asked[0] == (3, {"lengths", "primary_lengths", "predicted", "routing:primary_caps",
                            "class_capsules", "conv:conv1", "conv:primary_conv", "scores",
                            "grad:conv1", "grad:primary_conv", "probabilities"})
    assert asked[1] == (5, {"lengths"})                 # the evaluation set's accuracy pass
    # Keys are found by equal params, not by the identity of the object that asked.
    rpv = get_technique("rpv")
    key = keys.inputs[("rpv", rpv.params_type(method="original"), "test-2")]
    expected = rpv.compute(run_probe(net, images[2:3]), rpv.params_type(method="original"))
    np.testing.assert_allclose(store.arrays[key]["maps"], expected["maps"][0], rtol=1e-5)

    # Only the predictions missing: no gradients, no conv maps.
    for item in inputs:
        del store.arrays[keys.inputs[("predictions", get_technique("predictions").params_type(),
                                      item.key)]]
    asked.clear()
    compute_step(net, weights, variants, inputs, eval_set, keys, store, 16, {})
    assert asked == [(3, {"lengths", "probabilities"})]     # probabilities: a CNN's only


def test_not_applicable_techniques_are_planned_out(make_net, evaluation_data):
    from reportgen.techniques.lrp_clrp.numbers import NOT_A_CNN

    plain = make_net(decoder={"enabled": False})
    result = plan([t for t in all_techniques() if t.name in BUILT_IN], plain)
    assert not {"live_decoder", "decoder_length", "decoder_perturbation"} & \
        {t.name for t, _ in result.variants}
    assert {t.name: m if isinstance(m, str) else set(m) for t, m in result.not_applicable} == {
        "live_decoder": {"decoder"}, "decoder_length": {"decoder"},
        "decoder_perturbation": {"decoder"}, "gracaps_attention": {"attention"},
        "affnist_benchmark": "its input is 12x12x1, not the affine benchmark's 40x40 grayscale "
                             "digits",
        "lrp_clrp": NOT_A_CNN, "clrp_evaluation": NOT_A_CNN}
    # A declared tensor the model cannot have (no decoder: no reconstruction) is skipped by the
    # shared pass instead of failing it; the analysis reads only what exists.
    adversarial = get_technique("adversarial_robustness")
    params = _variants(adversarial, plain)[0]
    x, y = evaluation_data
    shared = EvalBatch(plain, x, y, CLASS_NAMES)
    shared.prefetch(adversarial.needs_for(params, plain))
    assert set(shared._tensors) == {"lengths", "predicted"}
    result = adversarial.compute(shared.restricted(adversarial.needs_for(params, plain)), params)
    assert np.isnan(result["clean_distances"]).all()


def test_figures_never_import_techniques():
    """Drawings depend on data types (reportgen.figures.figure) and result vocabularies
    (reportgen.results), never on the techniques that compute the arrays."""
    import ast
    from pathlib import Path

    import reportgen

    root = Path(reportgen.__file__).parent
    offenders = []
    for package, forbidden in (("figures", ("reportgen.techniques",)),
                               ("results", ("reportgen.techniques", "reportgen.figures"))):
        for path in sorted((root / package).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                    [a.name for a in node.names] if isinstance(node, ast.Import) else []
                offenders += [f"{package}/{path.name}: {n}" for n in names
                              if n.startswith(forbidden)]
    assert not offenders
