"""Findings (reportgen/results/findings.py): sentences from hand-made numbers, each with its
threshold, its figure and the untrained step's value; and the model overview and Home showing
them, linked to the analyses page's cards."""

from __future__ import annotations

import copy
import math
import re

import pytest

from reportgen.pages.sitedata import FigureFile, Panel
from reportgen.results import findings as F
from site_fixture import make_site

ROUTING = {"entropy_mean": 2.3004, "entropy_max": math.log(10), "dead_filter_count": 13,
           "filter_count": 128, "dead_type_count": 0, "type_count": 8, "images": 200}
FIDELITY = {"builtin_method": "rpv_modified", "deletion_aopc_rpv_modified": 0.30,
            "deletion_aopc_gradcam_pp": 0.50, "deletion_aopc_random": 0.28,
            "insertion_auc_rpv_modified": 0.72, "insertion_auc_gradcam_pp": 0.73,
            "insertion_auc_random": 0.58, "agreement_mean": 0.21, "agreement_valid": 100}


def test_accuracy_is_read_against_chance_with_its_margin():
    # 3 standard errors of a 1/10 classifier over 200 images: 3 * sqrt(0.09 / 200) = 6.4%
    assert F.chance_margin(10, 200) == pytest.approx(3 * math.sqrt(0.09 / 200))
    good = F.accuracy_finding(0.95, 10, 200, untrained=0.098)
    assert "well above chance (10.0% = 1/10" in good.text and "±6.4%" in good.text
    assert good.untrained == "untrained (0-0): 9.8%"
    assert "no better than chance" in F.accuracy_finding(0.12, 10, 200).text
    assert "below chance" in F.accuracy_finding(0.01, 10, 200).text
    assert F.accuracy_finding(None, 10, 200) is None


def test_routing_near_uniform_names_the_gap_and_the_threshold():
    f = F.routing_finding(ROUTING, 10, untrained={"entropy_mean": math.log(10) - 1e-6,
                                                  "entropy_max": math.log(10)})
    gap = math.log(10) - 2.3004
    assert f.text.startswith(
        f"Routing stays within {gap:.2g} nats of uniform (threshold 0.05 nats)")
    assert "1/10" in f.text and f.technique == "routing_diagnostics"
    assert f.untrained == "untrained (0-0): 1e-06 nats from uniform"
    decided = F.routing_finding({"entropy_mean": 1.5, "entropy_max": math.log(10)}, 10)
    assert "departs from uniform" in decided.text and "0.8 nats" in decided.text


def test_em_routing_is_judged_at_every_layer():
    em = {"entropy_mean_per_layer": [2.19, 2.299], "entropy_uniform_per_layer": [2.2, 2.3026]}
    f = F.routing_finding(em, 10)
    assert "at every layer" in f.text and "within 0.01 nats" in f.text
    em["entropy_mean_per_layer"] = [2.0, 2.299]
    f = F.routing_finding(em, 10)
    assert "layer 1: 0.2" in f.text and "departs" in f.text


def test_dead_units_are_flagged_above_the_stated_share():
    f = F.dead_units_finding(ROUTING, untrained={"dead_filter_count": 2, "dead_type_count": 1})
    assert "13 of 128 conv filters (10.2%)" in f.text and "0 of 8 capsule types" in f.text
    assert "above the 5% of dead units we flag (threshold 5%)" in f.text
    assert f.untrained == "untrained (0-0): 2 dead filters, 1 inactive types"
    few = F.dead_units_finding({**ROUTING, "dead_filter_count": 3})
    assert "within the 5%" in few.text


def test_explanation_methods_disagreement_and_ties():
    deletion, insertion, agreement = F.explanation_findings(FIDELITY, untrained=FIDELITY)
    # deletion: Grad-CAM++ 0.50 beats RPV 0.30 (gap 0.2 > 0.05); only Grad-CAM++ beats random
    assert "Grad-CAM++ beats RPV (modified) (0.500 vs 0.300)" in deletion.text
    assert "Grad-CAM++ beats a random order (0.280)" in deletion.text
    assert "ties" in deletion.text and deletion.technique == "explanation_fidelity"
    # insertion: 0.72 vs 0.73 is a tie
    assert "RPV (modified) and Grad-CAM++ tie (0.720 vs 0.730)" in insertion.text
    assert "agree only weakly" in agreement.text and "(threshold 0.5)" in agreement.text
    assert agreement.untrained == "untrained (0-0): 0.21"


def test_robustness_against_chance_and_gu_reference():
    affine = {"clean_accuracy": 0.95, "rotation_mean_accuracy": 0.59,
              "rotation_min_accuracy": 0.17, "shear_x_mean_accuracy": 0.93}
    f = F.affine_finding(affine, 10, untrained={"rotation_mean_accuracy": 0.1})
    assert "under horizontal shear" in f.text and "rotation hurts most: 59.0%" in f.text
    assert "17.0% at its worst" in f.text and f.untrained == "untrained (0-0): 10.0% under rotation"
    ref = ("Aff-CapsNet", "7.5M", 99.23, 93.21)
    close = F.affnist_finding({"affnist_accuracy": 0.91, "clean_accuracy": 0.992}, ref)
    assert "matches Gu 2022's 93.21% for his Aff-CapsNet" in close.text
    assert "loose" not in close.text
    far = F.affnist_finding({"affnist_accuracy": 0.70, "clean_accuracy": 0.95}, ref)
    assert "is below" in far.text and "comparison is loose" in far.text
    assert "Gu" not in F.affnist_finding({"affnist_accuracy": 0.7}, None).text
    adv = F.adversarial_finding({"accuracy_capsules_pgd_0.1": 0.765, "clean_accuracy": 0.95,
                                 "accuracy_votes_pgd_0.1": 0.735}, 10)
    assert "leaves 76.5% accuracy (clean 95.0%, chance 10.0%)" in adv.text
    assert "votes (Gu 2022) is stronger: 73.5%" in adv.text


def test_every_finding_states_a_threshold_and_missing_numbers_say_nothing():
    found = F.findings({"routing_diagnostics": ROUTING, "explanation_fidelity": FIDELITY}, 10,
                       accuracy=0.9, images=100)
    assert [f.topic for f in found] == ["accuracy", "routing", "dead_units", "explanations",
                                        "explanations", "explanations"]
    assert all("threshold" in f.text or "ties below" in f.text for f in found)
    assert F.findings({}, 10) == []


def _analysed(site, model_i=0):
    """The fixture's first model with routing diagnostics at its last analysed step and at
    0-0 (the same PNG as its affine panel)."""
    model = site.models[model_i]
    last = next(s for s in reversed(model.steps) if s.dataset_panels)
    shown = last.dataset_panels[0].figures[0]
    for step, numbers in ((last, ROUTING), (model.steps[0], {**ROUTING, "entropy_mean": 2.3}) ):
        step.dataset_panels.append(Panel(
            technique="routing_diagnostics", variant="argmax", title="Routing diagnostics",
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
    assert "Routing stays within" in section and "(threshold 0.05 nats)" in section
    assert "Untrained (0-0): 0.0026 nats from uniform." in section
    assert 'href="../../models/MNIST_Demo/analyses.html#routing_diagnostics-argmax"' in section
    assert 'href="../../models/MNIST_Demo/index.html#evaluation"' in section
    analyses = (docs / "models" / "MNIST_Demo" / "analyses.md").read_text()
    assert 'id="routing_diagnostics-argmax"' in analyses
    home = (docs / "index.md").read_text()
    block = home[home.index('<h2 id="findings">'):]
    assert "MNIST_Demo" in block and "Routing stays within" in block
    assert len(re.findall(r"<li>", block[:block.index("</ul>")])) <= 3
    assert 'href="models/MNIST_Demo/analyses.html#routing_diagnostics-argmax"' in block
