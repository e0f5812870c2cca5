"""Findings (reportgen/results/findings.py): sentences from hand-made numbers, each with its
threshold, its figure and the untrained step's value; and the model overview and Home showing
them, linked to the analyses page's cards."""

from __future__ import annotations

import copy
import math
import re

import numpy as np
import pytest

from reportgen.pages.sitedata import FigureFile, Panel
from reportgen.results import findings as F
from reportgen.results import intervals as iv
from site_fixture import make_site


def with_ci(summary: dict, key: str, low: float, high: float, n: int = 200,
            method: str = iv.BOOTSTRAP) -> dict:
    """`summary` with a hand-made interval on its score `key` (a list-valued score: lists)."""
    out = copy.deepcopy(summary)
    value = out[key]
    if isinstance(value, list):
        iv.attach(out, key, [iv.Interval(v, lo, hi, n, method)
                             for v, lo, hi in zip(value, low, high)])
    else:
        iv.attach(out, key, iv.Interval(value, low, high, n, method))
    return out


def with_difference(summary: dict, a: str, b: str, low: float, high: float,
                    n: int = 200) -> dict:
    """`summary` with a hand-made paired difference a - b (its value from the two scores)."""
    out = copy.deepcopy(summary)
    iv.attach_difference(out, a, b, iv.Interval(out[a] - out[b], low, high, n, iv.BOOTSTRAP))
    return out


def wilson(right: int, n: int) -> tuple[float, float]:
    """Wilson's interval from SciPy, independently of reportgen's."""
    from scipy.stats import binomtest

    found = binomtest(right, n).proportion_ci(confidence_level=0.95, method="wilson")
    return found.low, found.high


ROUTING = with_ci({"entropy_mean": 2.3004, "entropy_max": math.log(10), "images": 200},
                  "entropy_mean", 2.2990, 2.3015)
DEAD = {"dead_filter_count": 13, "filter_count": 128, "filter_layers": ["conv1", "primary_conv"],
        "filter_count_per_layer": [64, 64], "dead_filter_count_per_layer": [5, 8],
        "dead_type_count": 0, "type_count": 8, "images": 200}
FIDELITY = {"builtin_method": "rpv_modified", "deletion_aopc_rpv_modified": 0.30,
            "deletion_aopc_gradcam_pp": 0.50, "deletion_aopc_random": 0.28,
            "insertion_auc_rpv_modified": 0.72, "insertion_auc_gradcam_pp": 0.73,
            "insertion_auc_random": 0.58, "agreement_mean": 0.21, "agreement_valid": 100}
# deletion: Grad-CAM++ beats RPV and random; RPV cannot be told from random. insertion: the
# two methods cannot be told apart, both beat random. agreement: weakly (0 < CI < 0.5)
for a, b, low, high in (("deletion_aopc_rpv_modified", "deletion_aopc_gradcam_pp", -0.26, -0.14),
                        ("deletion_aopc_rpv_modified", "deletion_aopc_random", -0.01, 0.05),
                        ("deletion_aopc_gradcam_pp", "deletion_aopc_random", 0.15, 0.29),
                        ("insertion_auc_rpv_modified", "insertion_auc_gradcam_pp", -0.04, 0.02),
                        ("insertion_auc_rpv_modified", "insertion_auc_random", 0.10, 0.18),
                        ("insertion_auc_gradcam_pp", "insertion_auc_random", 0.11, 0.19)):
    FIDELITY = with_difference(FIDELITY, a, b, low, high, n=100)
FIDELITY = with_ci(FIDELITY, "agreement_mean", 0.15, 0.27, n=100)


def test_accuracy_is_read_against_chance_by_its_interval():
    good = F.accuracy_finding(0.95, 10, 200, untrained=0.098)
    low, high = wilson(190, 200)
    assert (f"Accuracy is 95.0% (95% CI {100 * low:.1f}–{100 * high:.1f}%) on 200 evaluation "
            f"images, above chance (10.0% = 1/10; Wilson interval).") == good.text
    assert good.untrained == "untrained (0-0): 9.8%"
    # 110 of 1,000 right: Wilson 9.2–13.1% holds chance (10%); 12% (10.1–14.2%) does not
    assert "not distinguishable from chance on 1,000 images" in \
        F.accuracy_finding(0.11, 10, 1000).text
    assert "above chance" in F.accuracy_finding(0.12, 10, 1000).text
    assert "not distinguishable from chance on 30 images" in F.accuracy_finding(0.2, 10, 30).text
    assert "below chance" in F.accuracy_finding(0.01, 10, 200).text
    assert F.accuracy_finding(None, 10, 200) is None


def test_routing_near_uniform_names_the_gap_and_the_threshold():
    f = F.routing_finding(ROUTING, 10, untrained={"entropy_mean": math.log(10) - 1e-6,
                                                  "entropy_max": math.log(10)})
    gap, top = math.log(10) - 2.3004, math.log(10)
    assert f.text.startswith(
        f"Routing stays within 0.05 nats of uniform ({gap:.2g} nats (95% CI "
        f"{top - 2.3015:.2g}–{top - 2.2990:.2g}) below the uniform entropy, threshold 0.05 nats)")
    assert "1/10" in f.text and f.technique == "routing_entropy"
    assert f.untrained == "untrained (0-0): 1e-06 nats from uniform"
    decided = F.routing_finding(with_ci({"entropy_mean": 1.5, "entropy_max": math.log(10)},
                                        "entropy_mean", 1.45, 1.55), 10)
    assert "departs from uniform" in decided.text and "0.8 nats" in decided.text
    # a gap whose interval holds the threshold is neither
    unclear = F.routing_finding(with_ci({"entropy_mean": top - 0.05, "entropy_max": top},
                                        "entropy_mean", top - 0.09, top - 0.01), 10)
    assert unclear.text.startswith("Whether routing departs from uniform by more than 0.05 "
                                   "nats cannot be told on 200 images")


def test_em_routing_is_judged_at_every_layer():
    em = {"entropy_mean_per_layer": [2.19, 2.299], "entropy_uniform_per_layer": [2.2, 2.3026]}
    f = F.routing_finding(with_ci(em, "entropy_mean_per_layer", [2.18, 2.297], [2.199, 2.3]),
                          10)
    assert "at every layer" in f.text and "stays within 0.05 nats" in f.text
    assert "layer 1: 0.01 nats (95% CI 0.001–0.02)" in f.text
    em["entropy_mean_per_layer"] = [2.0, 2.299]
    f = F.routing_finding(with_ci(em, "entropy_mean_per_layer", [1.95, 2.297], [2.05, 2.3]), 10)
    assert "layer 1: 0.2 nats" in f.text and "departs from uniform at layer 1" in f.text


def test_dead_filters_are_counted_and_flagged_per_layer():
    untrained = {**DEAD, "dead_filter_count_per_layer": [2, 0], "dead_type_count": 1}
    f = F.dead_units_finding(DEAD, untrained=untrained)
    # each conv layer on its own: never "13 of 128" (two layers' filters added up)
    assert f.text.startswith("conv1: 5 of 64 filters dead (7.8%); primary_conv: 8 of 64 "
                             "filters dead (12.5%); 0 of 8 capsule types inactive (0.0%).")
    assert "128" not in f.text
    assert f.technique == "dead_units"
    assert f.text.endswith("conv1 and primary_conv are above the 5% of dead units we flag "
                           "(threshold 5% per layer).")
    assert f.untrained == ("untrained (0-0): conv1: 2 of 64 filters dead; primary_conv: 0 of "
                           "64 filters dead; 1 of 8 capsule types inactive")
    few = F.dead_units_finding({**DEAD, "dead_filter_count_per_layer": [3, 0]})
    assert "every layer is within the 5%" in few.text
    # 8 of 320 filters in all is 2.5%, but one layer has 12.5% of its filters dead
    hidden = F.dead_units_finding({**DEAD, "filter_count_per_layer": [256, 64],
                                   "dead_filter_count_per_layer": [0, 8]})
    assert "primary_conv is above" in hidden.text and "conv1: 0 of 256" in hidden.text
    # a summary without per-layer counts says its total is of all conv layers together
    summed = {k: v for k, v in DEAD.items() if "per_layer" not in k and k != "filter_layers"}
    assert F.dead_units_finding(summed).text.startswith("conv layers: 13 of 128 filters dead")


def test_dead_filter_counts_per_layer_from_the_dead_units_arrays():
    """dead_units' summary counts each conv layer's dead filters (max output 0 over the
    evaluation set) against that layer's filters, in the model's order."""
    from reportgen.techniques.dead_units.numbers import dead_filter_summary, dead_units

    conv1, primary = np.ones(64), np.ones(32)
    conv1[[1, 5, 9, 20, 63]] = 0.0
    primary[:8] = 0.0
    arrays = {"filter_max_conv1": conv1, "filter_max_primary_conv": primary,
              "dead_type_threshold": np.float64(1e-3), "type_max_length": np.ones(8)}
    summary = dead_filter_summary(dead_units(arrays))
    assert summary["filter_layers"] == ["conv1", "primary_conv"]
    assert summary["filter_count_per_layer"] == [64, 32]
    assert summary["dead_filter_count_per_layer"] == [5, 8]
    assert summary["dead_filters_conv1"] == [1, 5, 9, 20, 63]
    assert (summary["dead_filter_count"], summary["filter_count"]) == (13, 96)
    text = F.dead_units_finding({**summary, "dead_type_count": 0, "type_count": 8}).text
    assert "conv1: 5 of 64 filters dead (7.8%); primary_conv: 8 of 32 filters dead (25.0%)" \
        in text


def test_explanation_methods_are_compared_by_their_paired_differences():
    deletion, insertion, agreement = F.explanation_findings(FIDELITY, untrained=FIDELITY)
    assert ("By deletion AOPC, Grad-CAM++ beats RPV (modified) (0.300 vs 0.500; difference "
            "-0.200, 95% CI -0.260 to -0.140); Grad-CAM++ beats a random order (0.280), "
            "RPV (modified) cannot be told from it") in deletion.text
    assert deletion.technique == "explanation_fidelity"
    assert ("RPV (modified) and Grad-CAM++ cannot be told apart on 100 images (0.720 vs 0.730; "
            "difference -0.010") in insertion.text
    assert "about " in insertion.text and "would tell a difference this size" in insertion.text
    assert "RPV (modified) and Grad-CAM++ beat a random order (0.580)" in insertion.text
    assert "agree only weakly" in agreement.text and "0.21 (95% CI 0.15–0.27)" in agreement.text
    assert agreement.untrained == "untrained (0-0): 0.21"
    # an agreement whose interval holds the threshold is not called either way
    unsure = with_ci({**FIDELITY, "agreement_mean": 0.5}, "agreement_mean", 0.4, 0.6)
    assert "cannot be told to agree or not" in F.explanation_findings(unsure)[-1].text
    # the same numbers with no difference recorded decide nothing
    bare = {k: v for k, v in FIDELITY.items() if k != iv.INTERVALS}
    text = F.explanation_findings(bare)[0].text
    assert "no interval to tell them apart" in text and "beats" not in text


def test_explanation_quality_says_above_or_below_a_baseline_only_by_the_paired_interval():
    quality = {"images": 50, "methods": ["gradcam_pp", "random_map", "uniform_map"],
               "faithfulness_gradcam_pp": 0.30, "faithfulness_random_map": 0.01,
               "infidelity_gradcam_pp": 2e-6, "infidelity_uniform_map": 3e-6,
               "infidelity_random_map": 2.1e-6, "sensitivity_gradcam_pp": 0.9,
               "sensitivity_random_map": 0.7}
    quality = with_difference(quality, "faithfulness_gradcam_pp", "faithfulness_random_map",
                              0.2, 0.4)
    quality = with_difference(quality, "infidelity_gradcam_pp", "infidelity_uniform_map",
                              -2e-6, -1e-7)
    quality = with_difference(quality, "infidelity_gradcam_pp", "infidelity_random_map",
                              -3e-7, 1e-7)
    quality = with_difference(quality, "sensitivity_gradcam_pp", "sensitivity_random_map",
                              0.1, 0.3)
    [finding] = F.explanation_quality_findings(quality, untrained=None)
    assert finding.technique == "explanation_quality" and finding.untrained == ""
    assert finding.text.startswith(
        "Grad-CAM++: faithfulness correlation above the random map's; infidelity below the "
        "uniform map's; infidelity not told apart from the random map's; max-sensitivity above "
        "the random map's (over 50 images;")
    # no paired difference recorded: nothing to decide, no finding
    assert F.explanation_quality_findings({"methods": ["gradcam_pp"],
                                           "faithfulness_gradcam_pp": 0.3}) == []


def test_robustness_by_the_paired_drop_and_against_gu_reference():
    affine = {"clean_accuracy": 0.95, "rotation_mean_accuracy": 0.59,
              "rotation_min_accuracy": 0.17, "shear_x_mean_accuracy": 0.93,
              "scale_mean_accuracy": 0.91}
    affine = with_difference(affine, "rotation_mean_accuracy", "clean_accuracy", -0.40, -0.32)
    affine = with_difference(affine, "shear_x_mean_accuracy", "clean_accuracy", -0.035, -0.005)
    affine = with_difference(affine, "scale_mean_accuracy", "clean_accuracy", -0.07, -0.01)
    f = F.affine_finding(affine, 10, untrained={"rotation_mean_accuracy": 0.1})
    assert f.text.startswith("Accuracy (clean 95.0%) holds within 5 points of clean under "
                             "horizontal shear; falls more than 5 points below clean under "
                             "rotation; cannot be told to hold within 5 points under scaling "
                             "on 200 images.")
    assert "Rotation hurts most: 59.0% on average" in f.text
    assert "17.0% at its worst" in f.text and f.untrained == "untrained (0-0): 10.0% under rotation"
    ref = ("Aff-CapsNet", "7.5M", 99.23, 93.21)
    close = F.affnist_finding(with_ci({"affnist_accuracy": 0.91, "clean_accuracy": 0.992},
                                      "affnist_accuracy", 0.89, 0.95, method=iv.WILSON), ref)
    assert "cannot be told from Gu 2022's 93.21% for his Aff-CapsNet" in close.text
    assert "loose" not in close.text
    far = F.affnist_finding(with_ci({"affnist_accuracy": 0.70, "clean_accuracy": 0.95},
                                    "affnist_accuracy", 0.66, 0.74, method=iv.WILSON), ref)
    assert "is below" in far.text and "comparison is loose" in far.text
    assert "Gu" not in F.affnist_finding({"affnist_accuracy": 0.7}, None).text
    adv = {"accuracy_capsules_pgd_0.1": 0.765, "clean_accuracy": 0.95,
           "accuracy_votes_pgd_0.1": 0.735}
    stronger = F.adversarial_finding(with_difference(
        adv, "accuracy_votes_pgd_0.1", "accuracy_capsules_pgd_0.1", -0.05, -0.01), 10)
    assert "leaves 76.5% accuracy (clean 95.0%, chance 10.0%)" in stronger.text
    assert "votes (Gu 2022) is stronger: 73.5%" in stronger.text
    tie = F.adversarial_finding(with_difference(
        adv, "accuracy_votes_pgd_0.1", "accuracy_capsules_pgd_0.1", -0.07, 0.01), 10)
    assert "cannot be told apart from it on 200 images" in tie.text
    same = F.adversarial_finding(with_difference(
        {**adv, "accuracy_votes_pgd_0.1": 0.765}, "accuracy_votes_pgd_0.1",
        "accuracy_capsules_pgd_0.1", 0.0, 0.0), 10)
    assert "leaves the same images right, every one of the 200 (76.5%)" in same.text


def test_every_finding_states_a_threshold_and_missing_numbers_say_nothing():
    found = F.findings({"routing_entropy": ROUTING, "dead_units": DEAD,
                        "explanation_fidelity": FIDELITY}, 10, accuracy=0.9, images=100)
    assert [f.topic for f in found] == ["accuracy", "routing", "dead_units", "explanations",
                                        "explanations", "explanations"]
    # each says what decided it: its threshold or the interval
    assert all("threshold" in f.text or "interval" in f.text for f in found)
    assert F.findings({}, 10) == []


def _analysed(site, model_i=0):
    """The fixture's first model with routing entropy at its last analysed step and at
    0-0 (the same PNG as its affine panel)."""
    model = site.models[model_i]
    last = next(s for s in reversed(model.steps) if s.dataset_panels)
    shown = last.dataset_panels[0].figures[0]
    for step, numbers in ((last, ROUTING), (model.steps[0], {**ROUTING, "entropy_mean": 2.3}) ):
        step.dataset_panels.append(Panel(
            technique="routing_entropy", variant="argmax", title="Routing entropy",
            layer="class", caption="Routing.", figures=[FigureFile("png", shown.path)],
            numbers=copy.deepcopy(numbers)))
    return model, last


def test_overview_and_home_show_findings_linked_to_their_figures(tmp_path):
    from reportgen.pages.render import render_site

    docs = tmp_path / "docs"
    site = make_site(docs)
    model, last = _analysed(site)
    render_site(site, docs, theme="mkdocs")
    overview = (docs / "models" / "MNIST_Demo" / "index.md").read_text()
    section = overview[overview.index('id="findings"'):overview.index('id="training-curves"')]
    assert f"step <b>{last.step}</b>" in section
    assert "Routing stays within" in section and "threshold 0.05 nats" in section
    assert "Untrained (0-0): 0.0026 nats from uniform." in section
    assert 'href="../../models/MNIST_Demo/analyses.html#routing_entropy-argmax"' in section
    assert 'href="../../models/MNIST_Demo/index.html#evaluation"' in section
    analyses = (docs / "models" / "MNIST_Demo" / "analyses.md").read_text()
    assert 'id="routing_entropy-argmax"' in analyses
    home = (docs / "index.md").read_text()
    block = home[home.index('<h2 id="findings">'):]
    assert "MNIST_Demo" in block and "Routing stays within" in block
    assert len(re.findall(r"<li>", block[:block.index("</ul>")])) <= 3
    assert 'href="models/MNIST_Demo/analyses.html#routing_entropy-argmax"' in block


# --- a step whose predictions say its network is untrained -----------------------------------

def test_a_step_predicting_one_class_is_called_untrained():
    constant = [[0, 10, 0], [0, 10, 0], [0, 10, 0]]            # every image -> class "b"
    verdict = F.untrained_verdict(constant, ["a", "b", "c"])
    assert verdict.kind == "one_class"
    assert verdict.headline == ("this step predicts one class: its analyses describe an "
                                "untrained network")
    assert verdict.details == "class b for 100.0% of the 30 evaluation images; threshold 95%"
    # 19 of 20 images to one class (95%) is one class; 18 of 20 (90%) is not, but its
    # accuracy, 60%, is within 3 standard errors of chance (50% + 3 x 11.2% = 83.5%)
    nineteen = [[10, 0], [9, 1]]
    assert F.untrained_verdict(nineteen, ["x", "y"]).kind == "one_class"
    eighteen = [[10, 0], [8, 2]]
    assert F.untrained_verdict(eighteen, ["x", "y"], available=20).kind == "chance"
    assert F.untrained_verdict(eighteen, ["x", "y"]).kind == F.UNCLEAR     # 1,000 held out
    # a class that makes up 96% of the labels may be predicted that often: right, not untrained
    skewed = [[96, 0], [0, 4]]
    assert F.untrained_verdict(skewed, ["x", "y"]) is None
    assert F.untrained_verdict(None, ["x"]) is None and F.untrained_verdict([], []) is None
    assert F.untrained_verdict([[0, 0], [0, 0]], ["x", "y"]) is None


def ci_words(right: int, n: int) -> str:
    """"16.7% (95% CI 7.3–33.6%)" from SciPy's Wilson interval."""
    low, high = wilson(right, n)
    return f"{100 * right / n:.1f}% (95% CI {100 * low:.1f}–{100 * high:.1f}%)"


def test_a_step_is_called_untrained_while_its_interval_holds_chance():
    def matrix(correct: int) -> list[list[int]]:
        """200 images, 20 per class, `correct` on the diagonal, the others spread over the
        classes (no class predicted for more than a fifth of them)."""
        rows = [[0] * 10 for _ in range(10)]
        for i in range(10):
            right = correct // 10 + (1 if i < correct % 10 else 0)
            rows[i][i] = right
            for k in range(20 - right):
                rows[i][(i + 1 + k % 9) % 10] += 1
        return rows

    names = [str(d) for d in range(10)]
    # the most right answers of 200 whose Wilson interval still holds chance (10%)
    edge = max(k for k in range(200) if wilson(k, 200)[0] <= 0.1)
    at = F.untrained_verdict(matrix(edge), names, available=200)   # every held-out image
    assert at.kind == "chance"
    assert at.headline == ("this step predicts at chance level: its analyses describe an "
                           "untrained network")
    assert at.details == (f"accuracy {ci_words(edge, 200)} on 200 evaluation images (Wilson), "
                          f"chance 10.0% = 1/10; the 95% interval does not lie above chance")
    assert F.untrained_verdict(matrix(edge + 1), names) is None    # its interval above chance
    assert F.untrained_verdict(matrix(0), names, available=200).kind == "chance"   # below too
    assert F.untrained_verdict(matrix(190), names) is None


def test_untrained_only_where_the_data_show_it():
    """A model held out 25.5% of 1,000 digits: far above chance. On 30 evaluation images its
    5 right (16.7%, Wilson 7.3–33.6%) cannot be told from chance: the banner says that, not
    "untrained", and no property finding is read from that step."""
    names = [str(d) for d in range(10)]
    thirty = [[0] * 10 for _ in range(10)]
    for i in range(10):                                   # 3 images per class, 5 right
        right = 1 if i < 5 else 0
        thirty[i][i] = right
        thirty[i][(i + 1) % 10] += 3 - right
    held = F.Scored(0.255, 1000, "held-out images")
    assert F.untrained_verdict(thirty, names, held, available=1000) is None
    unclear = F.untrained_verdict(thirty, names, None, available=1000)
    assert unclear.kind == F.UNCLEAR and not unclear.untrained
    assert unclear.headline == "this step's accuracy cannot be told from chance on 30 images"
    assert unclear.details.startswith(f"accuracy {ci_words(5, 30)} on 30 evaluation images "
                                      f"(Wilson), chance 10.0% = 1/10; the 95% interval does "
                                      f"not lie above chance; about ")
    at_chance = F.untrained_verdict(thirty, names, F.Scored(0.11, 1000, "held-out images"))
    assert at_chance.kind == "chance" and "11.0% (95% CI 9.2–13.1%) on 1,000 held-out images" in at_chance.details
    read = F.findings({"routing_entropy": ROUTING}, 10, accuracy=5 / 30, images=30,
                      predicts_nothing=unclear)
    # no property finding while the accuracy cannot be told from chance
    assert [f.topic for f in read] == ["accuracy", "untrained"]
    assert "not distinguishable from chance on 30 images" in read[0].text
    assert read[1].text.startswith("This step's accuracy cannot be told from chance on 30 "
                                   "images") and "Until it can" in read[1].text
    read = F.findings({}, 10, accuracy=0.255, images=1000, accuracy_counted="held-out images")
    assert read[0].text.startswith(f"Accuracy is {ci_words(255, 1000)} on 1,000 held-out "
                                   f"images, above chance")


def test_a_steps_banner_reads_the_held_out_accuracy_training_measured():
    """A step at 25.5% over the 1,000 held-out digits (history.json) and 5 of 30
    evaluation images: no banner; without the training record, the unclear one."""
    from reportgen.pages.sitedata import ModelData, StepData
    from reportgen.pages.views import step_verdict

    thirty = [[0] * 10 for _ in range(10)]
    for i in range(10):
        thirty[i][i] = 1 if i < 5 else 0
        thirty[i][(i + 1) % 10] += 3 - thirty[i][i]
    step = StepData(step="20-0", confusion_matrix=thirty, accuracy=5 / 30)
    model = ModelData(name="MNIST_EM", dataset="mnist", description="", params=0,
                      class_names=[str(d) for d in range(10)], architecture=[], steps=[step],
                      history=[{"step": "20-0", "val_accuracy": 0.255, "val_images": 1000}],
                      inputs=[], test_images=1000)
    assert step_verdict(model, step) is None
    del model.history[0]["val_images"]          # an older run: up to 1,000 of the test split
    assert step_verdict(model, step) is None
    model.history = []
    assert step_verdict(model, step).kind == F.UNCLEAR


def test_findings_of_an_untrained_step_say_so_instead_of_reading_its_numbers():
    summaries = {"routing_entropy": ROUTING, "dead_units": DEAD,
                 "explanation_fidelity": FIDELITY}
    read = F.findings(summaries, 10, accuracy=0.1, images=200)
    assert {"routing", "dead_units", "explanations"} <= {f.topic for f in read}
    verdict = F.untrained_verdict([[20 if j == 3 else 0 for j in range(10)]
                                   for _ in range(10)], [str(d) for d in range(10)])
    found = F.findings(summaries, 10, accuracy=0.1, images=200, predicts_nothing=verdict)
    assert [f.topic for f in found] == ["accuracy", "untrained"]
    assert found[1].text.startswith("This step predicts one class: its analyses describe an "
                                     "untrained network (class 3 for 100.0% of the 200 "
                                     "evaluation images; threshold 95%).")
    assert "not read as properties" in found[1].text and found[1].threshold == "95% of images"


def _predicting(step, kind: str, classes: int, column: int = 0) -> None:
    """Make a fixture step's evaluation predict one class (`column`) or at chance."""
    n = 10
    matrix = [[n if j == column else 0 for j in range(classes)] for _ in range(classes)] \
        if kind == "one_class" else [[n] * classes for _ in range(classes)]
    step.confusion_matrix = matrix
    step.per_class_accuracy = [row[i] / sum(row) for i, row in enumerate(matrix)]
    step.accuracy = sum(matrix[i][i] for i in range(classes)) / sum(map(sum, matrix))


def test_untrained_steps_have_a_banner_on_every_page_and_on_home(tmp_path):
    from reportgen.pages.render import render_site
    from site_fixture import EVIL_CLASS, EVIL_MODEL

    docs = tmp_path / "docs"
    site = make_site(docs)
    demo, evil = site.models
    _predicting(demo.steps[0], "one_class", 10, column=7)           # 0-0: not shown by default
    _predicting(evil.steps[1], "one_class", 3, column=1)            # 1-15: class EVIL_CLASS
    _predicting(evil.steps[-1], "chance", 3)                        # 3-5: its default step
    evil.test_images = 90            # evaluated on every held-out image: enough to tell
    for record in evil.history:      # no held-out accuracy from training (as if imported)
        record.pop("val_accuracy", None)
    _analysed(site, model_i=1)       # routing numbers that would otherwise make findings
    render_site(site, docs, theme="mkdocs")
    one_class = ("<b>This step predicts one class: its analyses describe an untrained "
                 "network</b>")
    chance = ("<b>This step predicts at chance level: its analyses describe an untrained "
              "network</b>")

    def banners(html: str) -> list[str]:
        return re.findall(r'<div class="rg-untrained" role="note"[^>]*>.*?</div>', html)

    demo_dir = docs / "models" / "MNIST_Demo"
    for page in ("index.md", "conv.md", "class-caps.md", "analyses.md"):
        [banner] = banners((demo_dir / page).read_text())
        # without JavaScript the default step (2-20) shows: the 0-0 banner is hidden
        assert banner.startswith('<div class="rg-untrained" role="note" data-rg-step="0-0" '
                                 'hidden data-search-exclude>' + one_class), page
        assert "(step 0-0: class 7 for 100.0% of the 100 evaluation images; threshold " \
               "95%)." in banner
    # every step at once: the banner names its step, never "this step" (the outlined one)
    [strip] = banners((demo_dir / "filmstrip.md").read_text())
    assert 'data-rg-step' not in strip and "hidden" not in strip
    assert strip.startswith('<div class="rg-untrained" role="note"><b>Step 0-0 predicts one '
                            'class: its analyses describe an untrained network</b> (class 7 '
                            'for 100.0% of the 100 evaluation images'), strip
    assert "this step" not in strip.lower()
    evil_dir = next(p for p in (docs / "models").iterdir() if p.name != "MNIST_Demo")
    for page in ("index.md", "conv.md", "analyses.md"):
        first, last = banners((evil_dir / page).read_text())
        assert 'data-rg-step="1-15" hidden' in first and one_class in first
        assert "&lt;script&gt;alert(&#39;class&#39;)&lt;/script&gt;" in first
        assert EVIL_CLASS not in first
        assert 'data-rg-step="3-5">' in last and chance in last       # shown: not hidden
        assert (f"(step 3-5: accuracy {ci_words(30, 90)} on 90 evaluation images (Wilson), "
                f"chance 33.3% = 1/3; the 95% interval does not lie above chance).") in last
    overview = (evil_dir / "index.md").read_text()
    section = overview[overview.index('id="findings"'):overview.index('id="training-curves"')]
    assert "This step predicts at chance level" in section and "Routing" not in section
    home = (docs / "index.md").read_text()
    table = home[home.index("<table"):home.index("</table>")]
    rows = table.split("<tr>")
    [evil_row] = [r for r in rows if "rg-model-link" in r and "MNIST_Demo" not in r]
    assert banners(evil_row) == [
        '<div class="rg-untrained" role="note"><b>Step 3-5</b> (the step its pages open at): '
        'this step predicts at chance level: its analyses describe an untrained network '
        f'(accuracy {ci_words(30, 90)} on 90 evaluation images (Wilson), chance 33.3% = 1/3; '
        'the 95% interval does not lie above chance).</div>']
    [demo_row] = [r for r in rows if "MNIST_Demo" in r]
    assert not banners(demo_row)
    assert EVIL_MODEL not in home


@pytest.mark.slow
def test_a_real_build_flags_a_constant_model_and_not_a_trained_one(tmp_path):
    """Decided from each step's predictions over the evaluation set: a hand-made constant
    network (class capsules all zero: every length 0, so every image gets class 0) and a tiny
    network trained to 100% on learnable toy data, whose untrained step 0-0 is flagged too."""
    from conftest import TINY_PARAMS
    from family_nets import write_model
    from test_training import _tiny_data

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.catalog import Catalog
    from reportgen.commands.build import BuildOptions, build
    from reportgen.model_folder import Step
    from reportgen.training.checkpoints import save_weights
    from reportgen.training.trainer import TrainOptions, train

    data = _tiny_data(tmp_path / "toy.npz", n=60)
    models = tmp_path / "models"
    for name in ("Constant", "Trained"):
        write_model(models, name, TINY_PARAMS, data)
    constant = Catalog(models).get("Constant")
    net = build_capsnet(constant.params)
    net.class_caps.kernel.assign(np.zeros(net.class_caps.kernel.shape, np.float32))
    save_weights(net, constant.weights_path(Step(1, 0)))
    history = train(Catalog(models).get("Trained"), TrainOptions(save_every=5))
    assert [r["step"] for r in history] == ["0-0", "1-5"] and history[-1]["val_accuracy"] == 1.0
    site = tmp_path / "site"
    summary = build(Catalog(models), BuildOptions(
        steps="last", images="test:0", techniques=("predictions", "routing_entropy", "dead_units"),
        analyses="last", eval_images=12, cache_dir=str(tmp_path / "cache"), site_dir=str(site)))
    assert summary.ok, summary.failed

    def banners(html: str) -> list[str]:
        return re.findall(r'<div class="rg-untrained" role="note"[^>]*>.*?</div>', html)

    def findings_of(html: str) -> str:
        return html[html.index('id="findings"'):html.index('id="training-curves"')]

    const = (site / "models" / "Constant" / "index.html").read_text("utf-8")
    [banner] = banners(const)
    assert 'data-rg-step="1-0">' in banner                              # shown, not hidden
    assert "This step predicts one class: its analyses describe an untrained network" in banner
    assert "(step 1-0: class 0 for 100.0% of the 12 evaluation images; threshold 95%)" in banner
    assert "This step predicts one class" in findings_of(const)
    assert "Routing" not in findings_of(const)
    trained = (site / "models" / "Trained" / "index.html").read_text("utf-8")
    [untrained] = banners(trained)               # 0-0 only, hidden: the pages open at 1-5
    assert 'data-rg-step="0-0" hidden' in untrained
    assert "an untrained network" in untrained
    assert "Routing" in findings_of(trained) and "an untrained network" not in \
        findings_of(trained)
    home = (site / "index.html").read_text("utf-8")
    rows = home[home.index("<tbody>"):home.index("</tbody>")].split("<tr>")
    assert [bool(banners(r)) for r in rows if "rg-model-link" in r] == [True, False]


# --- images of two digits (MultiMNIST): top-2 accuracy, no confusion matrix ------------------

def _pair_scores(labels: np.ndarray, right: int, rng) -> np.ndarray:
    """Class scores whose top-2 is the true pair on the first `right` images and a random
    other pair on the rest."""
    scores = rng.uniform(0, 0.5, (len(labels), 10))
    for i, (a, b) in enumerate(labels):
        if i >= right:
            a, b = next(p for p in (rng.choice(10, 2, replace=False) for _ in range(100))
                        if sorted(p) != sorted((a, b)))
        scores[i, [a, b]] = 1.0
    return scores


def test_a_two_digit_step_at_chance_or_on_one_pair_is_called_untrained():
    """The rule for top-2 accuracy (chance 1/C(10, 2) = 1/45) on stand-in class scores, the
    most often predicted pair counted against collections.Counter."""
    from collections import Counter

    from reportgen.pages.assemble import evaluation_tables, predicted_pairs

    rng = np.random.default_rng(0)
    names = [str(d) for d in range(10)]
    labels = np.array([rng.choice(10, 2, replace=False) for _ in range(500)])

    def verdict(scores):
        accuracy = evaluation_tables(scores, labels, 10)[0]
        return F.untrained_pair_verdict(accuracy, predicted_pairs(scores, labels), names,
                                        available=500)

    # a random network: top-2 right about 1 time in 45
    noise = rng.uniform(size=(500, 10))
    counted = Counter(tuple(sorted(np.argsort(-s, kind="stable")[:2])) for s in noise)
    (pair, times), = counted.most_common(1)
    found = predicted_pairs(noise, labels)
    assert found["images"] == 500 and found["predicted"] == times
    assert found["labelled"] == Counter(tuple(sorted(p)) for p in labels)[tuple(found["pair"])]
    at_chance = verdict(noise)
    assert at_chance.kind == "chance" and "top-2 accuracy" in at_chance.details
    assert at_chance.details.endswith("chance 2.2% = 1/45; the 95% interval does not lie "
                                      "above chance")
    # every image given the same pair (as by a network whose class capsules are all zero)
    constant = np.zeros((500, 10))
    one = verdict(constant)
    assert one.kind == "one_pair" and one.headline.startswith("this step predicts one pair")
    assert one.details == "classes 0 and 1 for 100.0% of the 500 evaluation images; threshold 95%"
    # a trained network: 80% of the pairs right, the rest spread; and the interval's edge
    assert verdict(_pair_scores(labels, 400, rng)) is None
    edge = max(k for k in range(500) if wilson(k, 500)[0] <= 1 / 45)
    assert verdict(_pair_scores(labels, edge, rng)).kind == "chance"
    assert verdict(_pair_scores(labels, edge + 1, rng)) is None
    # one pair predicted for 96% of images whose true pair it is: right, not untrained
    labels[:480] = [3, 5]
    assert verdict(_pair_scores(labels, 500, rng)) is None
    assert predicted_pairs(constant, labels[:, 0]) is None           # one class per image
    # 20 evaluation images at 5% is chance (its interval holds 1/45); the step's MultiMNIST
    # analysis over 500 test pairs, 6.4% (Wilson 4.6–8.9%), is not: the finding reads that
    few = {"images": 20, "pair": [0, 1], "predicted": 2, "labelled": 0}
    assert F.untrained_pair_verdict(0.05, few, names, available=20).kind == "chance"
    assert F.untrained_pair_verdict(0.05, few, names).kind == F.UNCLEAR
    assert F.untrained_pair_verdict(0.05, few, names,
                                    {"top2_accuracy": 0.064, "images": 500}) is None
    low = F.untrained_pair_verdict(0.5, few, names, {"top2_accuracy": 0.03, "images": 500},
                                   available=500)
    assert low.details.startswith(f"top-2 accuracy {ci_words(15, 500)} on 500 MultiMNIST test "
                                  f"pairs")
    assert F.untrained_pair_verdict(0.05, few, names, {"top2_accuracy": 0.9, "images": 10},
                                    available=20).kind == "chance"   # fewer pairs: not read
    # the held-out top-2 accuracy training measured on 1,000 pairs decides over both
    held = F.Scored(0.40, 1000, "held-out images")
    assert F.untrained_pair_verdict(0.05, few, names, {"top2_accuracy": 0.03, "images": 500},
                                    held) is None
    assert F.untrained_pair_verdict(0.5, None, names) is None


def test_findings_of_a_two_digit_model_read_top2_accuracy_against_1_in_45():
    read = F.findings({"routing_entropy": ROUTING}, 10, accuracy=0.03, images=500,
                      labels_per_image=2)
    assert read[0].text == (f"Top-2 accuracy is {ci_words(15, 500)} on 500 evaluation images, "
                            f"not distinguishable from chance on 500 images (2.2% = 1/45; "
                            f"Wilson interval).")
    assert F.findings({}, 10, accuracy=0.5, images=500, labels_per_image=2)[0].text.startswith(
        f"Top-2 accuracy is {ci_words(250, 500)} on 500 evaluation images, above chance "
        f"(2.2% = 1/45")
    verdict = F.untrained_pair_verdict(0.03, {"images": 500, "pair": [0, 1], "predicted": 20,
                                              "labelled": 11}, [str(d) for d in range(10)],
                                      available=500)
    found = F.findings({"routing_entropy": ROUTING}, 10, accuracy=0.03, images=500,
                       predicts_nothing=verdict, labels_per_image=2)
    assert [f.topic for f in found] == ["accuracy", "untrained"]
    assert found[1].text.startswith("This step predicts at chance level: its analyses describe "
                                     f"an untrained network (top-2 accuracy {ci_words(15, 500)} "
                                     f"on 500 evaluation images (Wilson), chance 2.2% = 1/45;")


def test_no_minus_zero_and_no_transform_list_that_is_empty():
    """A score that rounds to zero prints "0.000", not "-0.000"; an accuracy that holds under
    no transform says so in words ("falls ... under every transform"), not "under none of the
    transforms"; Compare's table prints a near-zero score as 0.000, never "-9e-06"."""
    from reportgen.pages.views import score_text

    fidelity = {**FIDELITY, "deletion_aopc_rpv_modified": -0.0002,
                "deletion_aopc_gradcam_pp": -0.0004, "deletion_aopc_random": -0.0001}
    fidelity = with_difference(fidelity, "deletion_aopc_rpv_modified", "deletion_aopc_gradcam_pp",
                               -0.0003, 0.0001)
    deletion = F.explanation_findings(fidelity)[0]
    assert "-0.000" not in deletion.text
    assert "cannot be told apart on 200 images (0.000 vs 0.000; difference 0.000" in deletion.text
    affine = {"clean_accuracy": 0.95, "rotation_mean_accuracy": 0.40,
              "shear_x_mean_accuracy": 0.60}
    for factor, low, high in (("rotation", -0.6, -0.5), ("shear_x", -0.4, -0.3)):
        affine = with_difference(affine, f"{factor}_mean_accuracy", "clean_accuracy", low, high)
    text = F.affine_finding(affine, 10).text
    assert text.startswith("Accuracy (clean 95.0%) falls more than 5 points below clean under "
                           "every transform. Rotation hurts most: 40.0%"), text
    assert "none of" not in text
    assert score_text("compactness_rotation", -9e-06) == "0.000"
    assert score_text("compactness_rotation", 0.0123) == "0.0123"
    assert score_text("clean_accuracy", -1e-9) == "0.0%"


def test_a_segmentation_iou_within_its_references_interval_cannot_be_told_apart():
    """MultiMNIST: IoU 23.3% against the class-prototype decoder's 23.0% on 500 pairs, the
    paired difference's interval holding 0: not "above" but cannot be told apart, with the
    pairs that would tell; a clear difference says "above"."""
    s = {"images": 500, "top2_accuracy": 0.80, "top2_chance": 1 / 45,
         "segmentation_iou": 0.233, "segmentation_reference": 0.230}
    s = with_ci(s, "top2_accuracy", *wilson(400, 500), n=500, method=iv.WILSON)
    s = with_ci(s, "segmentation_iou", 0.224, 0.242, n=500)
    tie = with_difference(s, "segmentation_iou", "segmentation_reference", -0.004, 0.010, n=500)
    text = F.multimnist_finding(tie).text
    assert "above the 23.0%" not in text
    assert ("which cannot be told apart from the 23.0% of a decoder that knows only the classes "
            "and draws each class's typical digit at the centre on 500 pairs (paired difference "
            "95% CI -0.4 to 1.0 points; about ") in text
    clear = with_difference(s, "segmentation_iou", "segmentation_reference", 0.001, 0.005, n=500)
    assert ", above the 23.0% of a decoder" in F.multimnist_finding(clear).text


def _clrp_summary(diff_low: float, drops: dict, steps: dict) -> dict:
    """A clrp_evaluation summary by hand: 1 - cos of CLRP1 0.65 and LRP 0.14 (the paired
    difference's interval from `diff_low`), pointing hit rates, mean drops `drops` and the
    paired differences' lower ends `steps` {(a, b): low}."""
    from reportgen.techniques.clrp_evaluation import verdicts

    s = {"discriminativeness_lrp": 0.14, "discriminativeness_clrp1": 0.65, "patch": 9,
         "threshold": 0.5}
    iv.attach_difference(s, "discriminativeness_clrp1", "discriminativeness_lrp",
                         iv.Interval(0.51, diff_low, diff_low + 0.4, 30, iv.BOOTSTRAP))
    for i, k in enumerate(("random", "gradient", "lrp", "clrp1", "clrp2")):
        iv.attach(s, f"pointing_{k}", iv.Interval(0.2 * i, 0.2 * i - 0.1, 0.2 * i + 0.1, 30,
                                                  iv.WILSON))
        s[f"ablation_drop_{k}"] = drops[k]
    for (a, b), low in steps.items():
        iv.attach_difference(s, f"ablation_drop_{a}", f"ablation_drop_{b}",
                             iv.Interval(drops[a] - drops[b], low, low + 1.0, 30, iv.BOOTSTRAP))
    s.update(verdicts(s))
    return s


def test_clrp_findings_are_decided_by_the_paired_intervals():
    ordered = {"random": 1.0, "gradient": 2.0, "lrp": 3.0, "clrp1": 4.0, "clrp2": 4.5}
    pairs = [("gradient", "random"), ("lrp", "gradient"), ("clrp1", "lrp"), ("clrp2", "lrp")]
    s = _clrp_summary(0.2, ordered, {p: 0.3 for p in pairs})
    disc, pointing, ablation = F.clrp_findings(s)
    assert disc.text.startswith("CLRP's top-2 maps differ more than LRP's: ")
    assert "difference 0.510, 95% CI 0.200–0.600, over 30 images" in disc.text
    assert disc.technique == pointing.technique == ablation.technique == "clrp_evaluation"
    assert "LRP 40.0% (95% CI 30.0–50.0%)" in pointing.text
    assert "orders the maps random < gradient < LRP < CLRP1 < CLRP2, which follows Gu et al.'s " \
           "Table 1 ordering, every step separated" in ablation.text
    # an interval holding 0 for LRP vs gradient: the means follow, not every step is separated
    s = _clrp_summary(-0.1, ordered, {**{p: 0.3 for p in pairs}, ("lrp", "gradient"): -0.5})
    disc, _, ablation = F.clrp_findings(s)
    assert disc.text.startswith("CLRP's and LRP's top-2 maps cannot be told apart")
    assert "in its means, but not every step is separated" in ablation.text
    assert "LRP and gradient cannot be told apart on 30 images" in ablation.text
    # the ordering found otherwise is said as found
    swapped = {**ordered, "lrp": 1.5}
    s = _clrp_summary(-0.6, swapped, {p: 0.3 for p in pairs})
    disc, _, ablation = F.clrp_findings(s)
    assert disc.text.startswith("LRP's top-2 maps differ more than CLRP's")
    assert "orders the maps random < LRP < gradient < CLRP1 < CLRP2, which does not follow" \
        in ablation.text
    assert F.clrp_findings({}) == []
