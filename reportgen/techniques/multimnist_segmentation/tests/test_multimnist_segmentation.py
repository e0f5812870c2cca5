"""MultiMNIST over the test pairs (reportgen.techniques.multimnist_segmentation): top-2 accuracy
and the segmentation IoU against NumPy references (tests/reference/two_label.py) on the tiny
two-label CapsNet, the summary, and its finding and Compare scores beside chance (1/45) and the
untrained step."""

from __future__ import annotations

import numpy as np
import pytest

import reference.two_label as ref
from family_nets import TINY_PAIR, build
from reportgen.probe.evaluation import EvalBatch
from reportgen.results.baselines import scores
from reportgen.results.findings import findings
from reportgen.techniques.multimnist_segmentation import (TECHNIQUE, Params, compute, pair_sample,
                                                          summarize)


@pytest.mark.slow
def test_scores_match_numpy_references():
    net = build(TINY_PAIR)
    params = Params(images=30)
    x, labels, sources, data = pair_sample("multimnist", 30, 0)
    evaluation = EvalBatch(net, x[:2], labels[:2, 0], tuple("0123456789"))
    out = compute(evaluation, params)
    capsules, lengths = (np.asarray(a) for a in net.encoder(x))
    correct = ref.top2_correct(labels, lengths)
    assert float(out["top2_accuracy"]) == pytest.approx(correct.mean())
    np.testing.assert_array_equal(out["correct"], correct)
    iou = np.zeros((30, 2))
    for i in range(30):
        for j in range(2):
            masked = np.zeros_like(capsules[i:i + 1])
            masked[0, labels[i, j]] = capsules[i, labels[i, j]]
            recon = np.asarray(net.decoder(masked.reshape(1, -1))).reshape(36, 36, 1)
            iou[i, j] = ref.iou(recon > 0.5, sources[i, j] > 0.5)
    np.testing.assert_allclose(out["iou"], iou, atol=1e-6)
    assert float(out["segmentation_iou"]) == pytest.approx(iou.mean())
    assert float(out["top2_chance"]) == pytest.approx(1 / 45)
    # the reference: each class's mean training digit, its most inked pixels as many as its
    # digits have above 0.5 on average, at the centre of the canvas; IoU with each digit
    digits, classes = data.components.train.digits[..., 0], data.components.train.labels
    expected = np.zeros((30, 2))
    for i in range(30):
        for j in range(2):
            own = digits[classes == labels[i, j]]
            mean = own.mean(axis=0)
            area = int(round((own > 0.5).sum(axis=(1, 2)).mean()))
            cut = np.sort(mean.ravel())[::-1][area - 1]
            mask = np.zeros((36, 36), bool)
            mask[4:32, 4:32] = mean >= cut
            expected[i, j] = ref.iou(mask, sources[i, j, ..., 0] > 0.5)
    np.testing.assert_allclose(out["iou_reference"], expected, atol=1e-6)
    assert float(out["segmentation_reference"]) == pytest.approx(expected.mean())
    assert 0.1 < expected.mean() < 0.5           # far above what an untrained decoder scores
    # the examples: the first pairs, their true and predicted reconstructions
    np.testing.assert_array_equal(out["example_labels"], labels[:4])
    assert out["example_reconstructions"].shape == (4, 2, 36, 36, 1)
    summary = summarize(out)
    assert summary["images"] == 30 and summary["top2_chance"] == pytest.approx(1 / 45, abs=1e-6)


def test_only_for_two_label_models(tiny_net):
    assert TECHNIQUE.variants(build(TINY_PAIR)) == [Params()]
    assert TECHNIQUE.variants(tiny_net) == []


def test_finding_and_compare_scores_beside_chance_and_untrained():
    from reportgen.results.intervals import (BOOTSTRAP, Interval, attach, attach_difference,
                                             proportion_interval)

    trained = {"images": 500, "top2_accuracy": 0.62, "top2_chance": 1 / 45,
               "segmentation_iou": 0.41, "segmentation_reference": 0.23}
    attach(trained, "top2_accuracy", proportion_interval(310, 500))
    attach(trained, "segmentation_iou", Interval(0.41, 0.39, 0.43, 500, BOOTSTRAP))
    attach_difference(trained, "segmentation_iou", "segmentation_reference",
                      Interval(0.18, 0.16, 0.20, 500, BOOTSTRAP))
    before = {"images": 500, "top2_accuracy": 0.02, "top2_chance": 1 / 45,
              "segmentation_iou": 0.03}
    attach(before, "segmentation_iou", Interval(0.03, 0.02, 0.04, 500, BOOTSTRAP))
    found = findings({"multimnist_segmentation": trained}, 10, accuracy=0.62,
                     untrained={"multimnist_segmentation": before})
    first = found[0]          # in place of the accuracy against 1/K, which top-2 is not
    assert first.topic == "multimnist" and first.technique == "multimnist_segmentation"
    assert "Top-2 accuracy is 62.0% (95% CI 57.7–66.1%) on 500 MultiMNIST test pairs, above " \
           "chance (2.2% = 1/45" in first.text
    assert ("mean IoU of 41.0% (95% CI 39.0–43.0%), above the 23.0% of a decoder that knows "
            "only the classes and draws each class's typical digit at the centre (paired "
            "difference 95% CI 16.0–20.0 points) (above the untrained step's)") in first.text
    assert first.untrained == "untrained (0-0): top-2 2.0%, IoU 3.0%"
    assert not any(f.topic == "accuracy" for f in found)
    at_chance = {**trained, "top2_accuracy": 0.03}
    attach(at_chance, "top2_accuracy", proportion_interval(15, 500))
    assert "not distinguishable from chance on 500 images" in findings(
        {"multimnist_segmentation": at_chance}, 10)[0].text
    rows = {r["key"]: r for r in scores("multimnist_segmentation", trained, before, 10)}
    assert rows["top2_accuracy"]["baseline"] == pytest.approx(1 / 45)
    assert rows["top2_accuracy"]["baseline_label"] == "chance (1/C(K, 2))"
    assert rows["top2_accuracy"]["untrained"] == 0.02
    assert rows["segmentation_iou"]["baseline"] == 0.23
    assert rows["segmentation_iou"]["untrained"] == 0.03
