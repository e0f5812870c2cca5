"""The analyses on the other model families: what applies to a CNN (predictions as
probabilities, Grad-CAM++, conv maps, affine and adversarial robustness, capsule semantics on its
feature units) and what says "not applicable"; GraCapsNet's explanation in explanation fidelity;
the affNIST-like benchmark; the Capsules vs CNNs tables."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from family_nets import CNN_HEADS, TINY_CNN40, TINY_GRACAPS, build, tiny_cnn

from reportgen.engine.step import plan
from reportgen.engine.model import not_applicable_reason
from reportgen.figures.figure import RenderContext
from reportgen.probe.evaluation import EvalBatch
from reportgen.probe.probe import empty_batch, run_probe
from reportgen.results.capsules_vs_cnns import (TABLE1_REFERENCE, TABLE5_REFERENCE, ModelRecord,
                                                matched_step, record_from_site, table1, table5)
from reportgen.techniques import all_techniques, get_technique

CLASSES = ("a", "b", "c")
SMALL = {"capsule_semantics": {"images": 3, "steps": 3, "perturbation_steps": 3},
         "affine_robustness": {"rotation": (-30.0, 30.0), "translation_x": (2.0,),
                               "translation_y": (), "scale": (), "shear_x": (), "shear_y": ()},
         "adversarial_robustness": {"images": 6, "epsilons": (0.0, 0.1), "pgd_steps": 2},
         "explanation_fidelity": {"images": 6, "patch": 4},
         "explanation_quality": {"images": 6, "subsets": 8, "perturbations": 6,
                                 "sensitivity_samples": 2},
         "explanation_randomisation": {"images": 6},
         "activation_maximization": {"steps": 2}}
CNN_ANALYSES = {"predictions", "gradcam_pp", "conv_feature_maps", "conv_kernels",
                "affine_robustness", "adversarial_robustness", "draw_panel", "lrp_clrp",
                "clrp_evaluation"}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(4)
    return (rng.random((4, 12, 12, 1), dtype=np.float32),
            rng.random((9, 12, 12, 1), dtype=np.float32), np.arange(9) % 3)


def _run(net, technique, params, data):
    """compute through the restricted view, render one item: the arrays."""
    images, x, y = data
    params = dataclasses.replace(params, **SMALL.get(technique.name, {})) \
        if params is not None and technique.name in SMALL else params
    needs = technique.needs_for(params, net)
    ctx = RenderContext(model="m", step="1-1", class_names=CLASSES, image=images[0],
                        description=net.description)
    if technique.scope == "input":
        out = technique.compute(run_probe(net, images, needs=needs).restricted(needs), params)
        item = {k: v[0] for k, v in out.items()}
    elif technique.scope == "checkpoint":
        out = item = technique.compute(empty_batch(net), params)
    else:
        evaluation = EvalBatch(net, x, y, CLASSES)
        out = item = technique.compute(evaluation.restricted(needs), params)
        if technique.summarize is not None:
            technique.summarize(out, params)
    assert technique.render(item, params, ctx)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("head", CNN_HEADS)
def test_a_cnn_gets_the_analyses_of_any_classifier(head, data):
    net = build(tiny_cnn(head))
    result = plan(all_techniques(), net)
    applies = {t.name for t, _ in result.variants}
    features = head in ("r", "cr", "cr_sf")
    assert applies == CNN_ANALYSES | ({"capsule_semantics"} if features else set())
    missing = dict((t.name, m) for t, m in result.not_applicable)
    for name in ("rpv", "routing_entropy", "vote_agreement", "primary_heatmaps", "class_capsules",
                 "decoder_length", "live_decoder", "explanation_fidelity", "explanation_quality",
                 "explanation_randomisation", "gracaps_attention", "pose_space"):
        reason = not_applicable_reason(missing[name])   # one short plain clause
        assert reason.startswith("it has no ") and len(reason.split()) <= 14, (name, reason)
    for technique, params in result.variants:
        out = _run(net, technique, params, data)
        if technique.name == "predictions":     # the CNN's probabilities, drawn as such
            np.testing.assert_array_equal(out["lengths"], out["probabilities"])
            if head in ("avg", "fc", "r"):
                np.testing.assert_allclose(out["lengths"].sum(1), 1.0, rtol=1e-5)
        if technique.name == "adversarial_robustness":
            assert params.targets == ("capsules",)         # no votes without routing
        if technique.name == "capsule_semantics":
            dims = 12 if head == "r" else 4                # R: 160-like units as one vector
            assert out["dim_variance"].shape == (dims,)
            if head != "r":                                # a class-conditional decoder
                offsets = out["perturbation_multiples"] * out["perturbation_sigma"][0, 0]
                np.testing.assert_allclose(offsets[[0, -1]], [-8.0, 8.0])
                assert float(out["perturbation_absolute"]) == 8.0
            else:
                assert "perturbation_images" not in out


def test_gradcam_of_a_cnn_differentiates_its_logit(data):
    from reportgen.techniques.gradcam_pp import gradcam_plus_plus, normalize_maps

    net = build(tiny_cnn("avg"))
    images = data[0]
    batch = run_probe(net, images)
    assert "logits" in batch.tensors and "grad:conv2" in batch.tensors
    import tensorflow as tf

    x = tf.constant(images)
    with tf.GradientTape() as tape:
        out = net.model(x)
        target = tf.gather(out["logits"], batch["predicted"], axis=1, batch_dims=1)
    grads = tape.gradient(target, out["conv2"]).numpy()
    np.testing.assert_allclose(batch["grad:conv2"], grads, rtol=1e-5, atol=1e-7)
    scores = batch["logits"][np.arange(len(images)), batch["predicted"]]
    want = normalize_maps(gradcam_plus_plus(batch["conv:conv2"], grads, scores))
    got = get_technique("gradcam_pp").compute(batch, get_technique("gradcam_pp").params_type(
        layer="conv2"))["map"]
    np.testing.assert_allclose(got, want, atol=1e-6)


@pytest.mark.slow
def test_gracaps_explanation_in_explanation_fidelity(data):
    net = build(TINY_GRACAPS)
    technique = get_technique("explanation_fidelity")
    [params] = technique.variants(net)
    out = _run(net, technique, params, data)
    from reportgen.techniques.explanation_fidelity.numbers import METHODS as methods

    own = [methods.index(m) for m in ("builtin", "gradcam_pp", "random")]
    rpv = [methods.index(m) for m in ("rpv_modified", "rpv_original")]
    assert np.isfinite(out["deletion"][own]).all() and np.isnan(out["deletion"][rpv]).all()
    assert methods[int(out["builtin_method"])] == "builtin"
    summary = technique.summarize(out, dataclasses.replace(params, **SMALL[technique.name]))
    assert summary["builtin_method"] == "builtin"
    assert isinstance(summary["deletion_aopc_builtin"], float)
    assert "deletion_aopc_rpv_modified" not in summary       # not a GraCapsNet's
    # The examples show E of the target class, the mean over heads of the attention.
    images, x, y = data
    from reportgen.techniques.explanation_fidelity import EXAMPLES, _example_rows

    index, targets = out["index"], out["targets"]
    attention = run_probe(net, x[index], needs={"attention"})["attention"]
    want = attention.mean(1)[np.arange(len(index)), :, targets].reshape(-1, 4, 4)
    shown = _example_rows(out["labels"], EXAMPLES)
    np.testing.assert_allclose(out["example_rpv_grid"], want[shown], rtol=1e-5, atol=1e-7)
    # The figures name GraCapsNet's attention as the model's own map, never RPV (it has none).
    ctx = RenderContext(model="m", step="1-1", class_names=CLASSES, image=images[0],
                        description=net.description)
    small = dataclasses.replace(params, **SMALL[technique.name])
    figures = technique.render(out, small, ctx)
    captions = {f.name.rsplit(".", 1)[0]: f.caption for f in figures}
    assert set(captions) >= {"curves", "agreement", "examples"}
    assert "graph-pooling attention averaged over the heads, E)" in captions["curves"]
    assert captions["examples"].startswith("The built-in explanation and Grad-CAM++ side by side")
    assert not any("RPV" in c for c in captions.values()), captions
    [trend] = [f for f in technique.render_trend([("0-0", summary), ("1-1", summary)], small,
                                                 ctx) if f.kind == "png"]
    assert "built-in explanation and Grad-CAM++" in trend.caption
    assert "RPV" not in trend.caption


@pytest.mark.slow
def test_gracaps_explanation_in_explanation_quality(data):
    """GraCapsNet's built-in map is scored (with Grad-CAM++ and the baselines), RPV is not; its
    max-sensitivity is that of E recomputed on the perturbed copies."""
    net = build(TINY_GRACAPS)
    technique = get_technique("explanation_quality")
    [params] = technique.variants(net)
    out = _run(net, technique, params, data)
    from reportgen.techniques.explanation_quality.numbers import METHODS as methods

    own = [methods.index(m) for m in ("builtin", "gradcam_pp", "random_map", "uniform_map")]
    rpv = [methods.index(m) for m in ("rpv_modified", "rpv_original")]
    assert out["has"][own].all() and not out["has"][rpv].any()
    assert np.isfinite(out["infidelity"][own]).all() and np.isnan(out["infidelity"][rpv]).all()
    summary = technique.summarize(out, dataclasses.replace(params, **SMALL[technique.name]))
    assert isinstance(summary["sensitivity_builtin"], float)
    assert "sensitivity_rpv_modified" not in summary
    assert summary["verdict_faithfulness_builtin_random_map"]
    ctx = RenderContext(model="m", step="1-1", class_names=CLASSES, description=net.description)
    [png] = [f for f in technique.render(out, params, ctx) if f.kind == "png"]
    assert "built-in explanation on" in png.caption and "RPV" not in png.caption


def test_affnist_benchmark_on_a_40x40_model():
    from reportgen.data.datasets import load_dataset
    from reportgen.techniques import affnist_benchmark as bench

    net = build(TINY_CNN40)
    technique = bench.TECHNIQUE
    assert technique.variants(net) == [bench.Params()]
    small = build(tiny_cnn("avg"))                                      # 12x12: not its input
    assert technique.variants(small) == [] and not technique.applicable(small)
    assert technique.unsuited_reason(small) == ("its input is 12x12x1, not the affine "
                                                "benchmark's 40x40 grayscale digits")
    clean = load_dataset("mnist40")
    evaluation = EvalBatch(net, clean.x_test[:20], clean.y_test[:20], clean.class_names)
    params = bench.Params(images=30)
    out = bench.compute(evaluation.restricted({"predicted"}), params)
    affine = load_dataset("affnist_like")
    from reportgen.probe.evaluation import stratified_sample

    index = stratified_sample(affine.y_test, 30)
    predicted = np.asarray(net.encoder(affine.x_test[index])[1]).argmax(1)
    assert float(out["affnist_accuracy"]) == pytest.approx(np.mean(predicted == affine.y_test[
        index]))
    clean_predicted = np.asarray(net.encoder(clean.x_test[:20])[1]).argmax(1)
    assert float(out["clean_accuracy"]) == pytest.approx(np.mean(clean_predicted ==
                                                                 clean.y_test[:20]))
    summary = bench.summarize(out, params)
    assert summary["images"] == 30 and summary["gap"] == pytest.approx(
        summary["clean_accuracy"] - summary["affnist_accuracy"], abs=1e-6)


def _record(name, kind, accuracies, summaries=None, parameters=1):
    history = [{"step": s, "val_accuracy": a} for s, a in accuracies]
    return ModelRecord(name=name, kind=kind, parameters=parameters, history=history,
                       summaries=summaries or {})


def test_matched_step_is_the_first_reaching_the_target():
    history = [{"step": "0-0", "val_accuracy": 0.1}, {"step": "1-100", "val_accuracy": 0.991},
               {"step": "1-200", "val_accuracy": 0.9925}, {"step": "2-100", "val_accuracy": 0.995}]
    assert matched_step(history, 0.9922) == ("1-200", 0.9925, True)
    assert matched_step(history, 0.999) == ("2-100", 0.995, False)        # best, not reached
    assert matched_step(history, 0.99, built={"0-0", "2-100"}) == ("2-100", 0.995, True)
    assert matched_step([], 0.99) == (None, None, False)


def test_capsules_vs_cnns_tables():
    summaries = {"1-100": {"affnist_benchmark": {"affnist_accuracy": 0.5, "clean_accuracy": 0.98},
                           "adversarial_robustness": {"accuracy_capsules_fgsm_0.1": 0.4,
                                                      "accuracy_capsules_pgd_0.1": 0.2}},
                 "2-100": {"affnist_benchmark": {"affnist_accuracy": 0.7, "clean_accuracy": 0.99},
                           "capsule_semantics": {"compactness_rotation": 0.004}}}
    records = [_record("A", "Aff-CapsNet", [("1-100", 0.995), ("2-100", 0.996)], summaries,
                       7_578_688),
               _record("B", "ConvNet-R", [("2-100", 0.99)], summaries),
               _record("C", "GraCapsNet", [("1-100", 0.5)])]
    rows = table1(records, target=0.9922)
    assert rows[0]["step"] == "1-100" and rows[0]["reached"]
    # the clean accuracy over the evaluation images the other scores count, not validation's
    assert rows[0]["affnist_accuracy"] == 0.5 and rows[0]["clean_accuracy"] == 0.98
    assert rows[0]["validation_accuracy"] == 0.995
    assert rows[0]["fgsm_0.1_accuracy"] == 0.4 and rows[0]["pgd_0.1_accuracy"] == 0.2
    assert (rows[0]["reference_parameters"], rows[0]["reference_mnist"],
            rows[0]["reference_affnist"]) == TABLE1_REFERENCE["Aff-CapsNet"] == ("7.5M", 99.23,
                                                                                 93.21)
    assert rows[1]["reached"] is False and rows[1]["step"] == "2-100"
    assert rows[1]["reference_affnist"] is None                 # not in Gu's Table 1
    assert rows[2]["reference_mnist"] == 99.50 and rows[2]["affnist_accuracy"] is None
    compact = table5(records, target=0.9922)
    assert [r["model"] for r in compact] == ["B"]              # the rows with class vectors
    assert compact[0]["compactness"] == 0.004 and compact[0]["reference"] == 0.0003
    assert TABLE5_REFERENCE == {"ConvNet-R": 0.0003, "ConvNet-CR": 0.0028,
                                "ConvNet-CR-SF": 0.0325, "CapsNet": 0.0031}


def test_record_from_site_reads_the_dataset_panels():
    from types import SimpleNamespace as NS

    from reportgen.settings.model_params import load_model_params

    panel = NS(technique="affnist_benchmark", numbers={"affnist_accuracy": 0.9})
    model = NS(name="M", params=7_578_688, history=[{"step": "1-1", "val_accuracy": 0.99}],
               steps=[NS(step="1-1", dataset_panels=[panel, NS(technique="x", numbers=None)]),
                      NS(step="2-1", dataset_panels=[])])          # not analysed: left out
    record = record_from_site(model, load_model_params("models/MNIST40_AffCapsNet/params.toml"))
    assert record.kind == "Aff-CapsNet" and record.parameters == 7_578_688
    assert record.summaries == {"1-1": {"affnist_benchmark": {"affnist_accuracy": 0.9}}}
