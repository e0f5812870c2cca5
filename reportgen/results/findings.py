"""Findings: a few plain sentences from the stored numbers of a model's dataset analyses.

Pure functions, numbers in and sentences out. Each comparison in a sentence is decided by the
95% interval of its score over the images it was computed on (reportgen.results.intervals:
Wilson for proportions, a seeded bootstrap over images otherwise; a difference of two scores
on the same images is a paired difference): a finding says "above", "beats", "holds" or
"agree" only when the interval excludes the reference (chance, the class-prototype decoder, a
random order, the untrained step, a threshold), and otherwise says the two cannot be told
apart on this many images, with about how many would tell them. Each `Finding` names the
analysis whose figure shows it (the page links the sentence there) and, when the untrained step
(0-0) was analysed too, the same measure at that step.

The summaries are the dataset panels' numbers (`Panel.numbers`: each technique's `summarize`,
its intervals under summary["intervals"]), keyed by technique name. The thresholds below are
judgement calls of effect size, stated so that a reader can disagree with them; the intervals
decide whether a score is on one side of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from reportgen.results.intervals import (Interval, ci_text, difference_of, images_to_tell,
                                         interval_of, proportion_interval)
from reportgen.results.intervals import fixed_digits as _fixed
from reportgen.results.technique_numbers import (CLRP_LABELS, CLRP_METHODS,
                                                 LOCALISATION_BASELINES, LOCALISATION_METRICS,
                                                 METHOD_LABELS, QUALITY_BASELINES, QUALITY_LABELS,
                                                 QUALITY_METRICS, clrp_disc_key,
                                                 clrp_drop_key, clrp_pointing_key,
                                                 localisation_verdict, quality_verdict,
                                                 top2_chance)

UNTRAINED = "0-0"                  # the step `reportgen train` saves before any update
ROUTING_NATS = 0.05                # mean routing-weight entropy this close to log K: uniform
DEAD_SHARE = 0.05                  # a share of dead filters / inactive types above this is flagged
DEAD_TYPE_LENGTH = 1e-3            # dead_units' default: a type never more active is inactive
AGREEMENT = 0.5                    # mean Spearman correlation from which two maps "agree"
AFFINE_POINTS = 0.05               # a factor "holds" when its mean accuracy is this close to clean
ATTACK_EPSILON = 0.1               # the L∞ budget the adversarial sentence reads
ONE_CLASS_SHARE = 0.95             # a step predicting one class for this share predicts nothing
CONFIDENCE_WORDS = "95% interval"  # what decides every comparison


@dataclass(frozen=True)
class Finding:
    topic: str             # "accuracy", "routing", "dead_units", "explanations", "affine", ...
    text: str              # the sentence, with its threshold
    threshold: str         # the threshold alone ("0.05 nats")
    technique: str         # the analysis whose figure shows it ("" = the overview's evaluation)
    untrained: str = ""    # "untrained (0-0): …" when the untrained step has the numbers


def _num(summary: dict | None, key: str) -> float | None:
    value = (summary or {}).get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _pct(value: float, digits: int = 1) -> str:
    return f"{_fixed(100 * value, digits)}%"


def _points(value: float) -> str:
    return f"{100 * value:.0f} points"


def _untrained(text: str | None) -> str:
    return f"untrained ({UNTRAINED}): {text}" if text else ""


def _would_tell(interval: Interval, reference: float, what: str = "a difference this size") -> str:
    """"about 410 images would tell a difference this size" ("" when none would)."""
    needed = images_to_tell(interval, reference)
    return f"about {needed:,} images would tell {what}" if needed else \
        "no number of images would tell them apart"


def _pct_ci(interval: Interval, digits: int = 1) -> str:
    """"96.7% (95% CI 95.4–97.7%)"."""
    return f"{_pct(interval.value, digits)} ({ci_text(interval, 100, digits, '%')})"


def _num_ci(interval: Interval, digits: int = 3) -> str:
    """"0.412 (95% CI 0.388–0.437)"."""
    return f"{_fixed(interval.value, digits)} ({ci_text(interval, 1, digits)})"


def _side(interval: Interval | None, reference: float) -> str | None:
    """"above" / "below" when the interval excludes the reference; "tie" when it holds it;
    None without an interval."""
    if interval is None:
        return None
    return "above" if interval.above(reference) else "below" if interval.below(reference) \
        else "tie"


# --------------------------------------------------------------------------------------------
# Accuracy against chance


def accuracy_interval(accuracy: float, images: int) -> Interval:
    """The interval of an accuracy over `images` images (the count of right answers is the
    accuracy times the images, rounded: the stored accuracies are exact ratios)."""
    right = min(images, max(0, round(accuracy * images)))
    return proportion_interval(right, images)


def chance_of(classes: int, labels_per_image: int = 1) -> tuple[float, str]:
    """(chance, "1/K") of the accuracy a model is read by: 1/K for one class per image, top-2
    accuracy's 1/C(K, 2) (1/45 for ten digits) for images of two (Sabour et al. 2017, section
    6)."""
    if labels_per_image == 2:
        chance = top2_chance(classes)
        return chance, f"1/{round(1 / chance)}"
    return 1.0 / classes, f"1/{classes}"


def accuracy_name(labels_per_image: int = 1) -> str:
    """What a model's accuracy counts: "top-2 accuracy" for images of two digits (both classes
    among its two highest scores), else "accuracy"."""
    return "top-2 accuracy" if labels_per_image == 2 else "accuracy"


def _against_chance(interval: Interval, chance: float) -> str:
    side = _side(interval, chance)
    return {"above": "above chance", "below": "below chance"}.get(
        side, f"not distinguishable from chance on {interval.n:,} images")


def accuracy_finding(accuracy: float | None, classes: int, images: int | None,
                     untrained: float | None = None,
                     labels_per_image: int = 1, counted: str = "evaluation images") -> Finding | None:
    """Accuracy over `images` `counted` (the evaluation set's, or the held-out images training
    validated on) with its interval, beside chance (1/K; top-2 accuracy beside 1/C(K, 2) for
    images of two digits): above or below chance only when the interval excludes it."""
    if accuracy is None or classes < (3 if labels_per_image == 2 else 2) or not images:
        return None
    chance, fraction = chance_of(classes, labels_per_image)
    interval = accuracy_interval(accuracy, images)
    name = accuracy_name(labels_per_image)
    text = (f"{name[0].upper()}{name[1:]} is {_pct_ci(interval)} on {images:,} {counted}, "
            f"{_against_chance(interval, chance)} ({_pct(chance)} = {fraction}; "
            f"{interval.method} interval).")
    return Finding("accuracy", text, f"chance outside the {CONFIDENCE_WORDS}", "",
                   _untrained(None if untrained is None else _pct(untrained)))


# --------------------------------------------------------------------------------------------
# A step that predicts nothing: its analyses describe an untrained network


@dataclass(frozen=True)
class UntrainedVerdict:
    """Why a step's predictions say its network is untrained: `kind` "one_class", "one_pair"
    or "chance" — or, "unclear", that too few images were scored to tell its accuracy from
    chance (a caution, not a verdict: its findings stand); `headline` the banner ("this step
    predicts one class: …"), `details` the numbers and the threshold."""

    kind: str
    headline: str
    details: str

    @property
    def untrained(self) -> bool:
        return self.kind != UNCLEAR

    def of_step(self, step: str) -> str:
        """The headline naming its step ("step 0-0 predicts one class: …"), for a page that
        shows every step at once, where "this step" would mean whichever step is chosen."""
        subject = "this step"
        assert self.headline.startswith(subject), self.headline
        return f"step {step}{self.headline[len(subject):]}"


UNCLEAR = "unclear"
TELLING_IMAGES = 1000              # held-out images from which an accuracy near chance is chance


@dataclass(frozen=True)
class Scored:
    """An accuracy and what it was counted over: `images` of `over` ("held-out images",
    "evaluation images", …)."""

    accuracy: float
    images: int
    over: str


def scored_accuracy(*candidates: Scored | None) -> Scored | None:
    """The accuracy counted over the most images among those given."""
    given = [c for c in candidates if c is not None and c.images > 0]
    return max(given, key=lambda c: c.images) if given else None


def _chance_verdict(scored: Scored | None, chance: float, fraction: str, name: str,
                    available: int | None) -> UntrainedVerdict | None:
    """None when the accuracy's interval lies above chance; otherwise at chance over at least
    TELLING_IMAGES images (or every held-out image, `available`, when there are fewer), and
    UNCLEAR over fewer: the interval holds chance, but so few images cannot tell an untrained
    network from a weak one."""
    if scored is None:
        return None
    interval = accuracy_interval(scored.accuracy, scored.images)
    if interval.above(chance):
        return None
    numbers = (f"{name} {_pct_ci(interval)} on {scored.images:,} {scored.over} "
               f"({interval.method}), chance {_pct(chance)} = {fraction}; the "
               f"{CONFIDENCE_WORDS} does not lie above chance")
    if scored.images >= min(TELLING_IMAGES, available or TELLING_IMAGES):
        return UntrainedVerdict(
            "chance", "this step predicts at chance level: its analyses describe an untrained "
            "network", numbers)
    needed = images_to_tell(interval, chance)
    return UntrainedVerdict(
        UNCLEAR, f"this step's {name} cannot be told from chance on {scored.images:,} images",
        f"{numbers}; " + (f"about {needed:,} images would tell it from chance, if it is above "
                          f"it" if needed else "no number of images tells it from chance")
        + " (build with more --eval-images)")


def untrained_verdict(confusion_matrix: list[list[int]] | None,
                      class_names: list[str] | tuple[str, ...],
                      held_out: Scored | None = None,
                      available: int | None = None) -> UntrainedVerdict | None:
    """From a step's confusion matrix over the evaluation set (rows true, columns predicted):
    one class predicted for at least ONE_CLASS_SHARE of the images (unless that class is as
    common among the labels: then predicting it is right). Otherwise its accuracy against
    chance (1/K), read over the most images scored — the step's held-out accuracy from
    training (`held_out`) or the evaluation set's — by `_chance_verdict` (`available`: the
    held-out images there are). None otherwise, or without an evaluation."""
    if not confusion_matrix:
        return None
    classes = len(confusion_matrix)
    images = sum(sum(row) for row in confusion_matrix)
    if classes < 2 or images < 1:
        return None
    predicted = [sum(row[j] for row in confusion_matrix) for j in range(classes)]
    top = max(range(classes), key=lambda j: predicted[j])
    share = predicted[top] / images
    if share >= ONE_CLASS_SHARE and sum(confusion_matrix[top]) / images < ONE_CLASS_SHARE:
        name = class_names[top] if top < len(class_names) else str(top)
        return UntrainedVerdict(
            "one_class", "this step predicts one class: its analyses describe an untrained "
            "network",
            f"class {name} for {_pct(share)} of the {images} evaluation images; threshold "
            f"{_pct(ONE_CLASS_SHARE, 0)}")
    accuracy = sum(confusion_matrix[i][i] for i in range(classes)) / images
    scored = scored_accuracy(held_out, Scored(accuracy, images, "evaluation images"))
    return _chance_verdict(scored, 1.0 / classes, f"1/{classes}", "accuracy", available)


def untrained_pair_verdict(top2_accuracy: float | None, predicted_pair: dict | None,
                           class_names: list[str] | tuple[str, ...],
                           scored: dict | None = None, held_out: Scored | None = None,
                           available: int | None = None) -> UntrainedVerdict | None:
    """`untrained_verdict` for images of two digits (MultiMNIST), which have no confusion
    matrix: from the step's top-2 accuracy and its most often predicted unordered pair
    (`predicted_pair`, reportgen.pages.assemble.predicted_pairs). One pair predicted for at
    least ONE_CLASS_SHARE of the images (unless that pair is as common among the true pairs);
    otherwise its top-2 accuracy against chance, 1/C(K, 2) (1/45 for ten digits), over the most
    images scored: the held-out accuracy from training, the step's multimnist_segmentation
    summary (`scored`: the finding reads it, so banner and finding agree when it counts more)
    or the evaluation set. None otherwise, or without an evaluation."""
    classes = len(class_names)
    images = int((predicted_pair or {}).get("images") or 0)
    if top2_accuracy is None or images < 1 or classes < 3:
        return None
    pairs, more = _num(scored, "top2_accuracy"), int(_num(scored, "images") or 0)
    share = predicted_pair["predicted"] / images
    if share >= ONE_CLASS_SHARE and predicted_pair["labelled"] / images < ONE_CLASS_SHARE:
        names = " and ".join(class_names[k] for k in predicted_pair["pair"])
        return UntrainedVerdict(
            "one_pair", "this step predicts one pair of classes: its analyses describe an "
            "untrained network",
            f"classes {names} for {_pct(share)} of the {images} evaluation images; threshold "
            f"{_pct(ONE_CLASS_SHARE, 0)}")
    chance, fraction = chance_of(classes, 2)
    best = scored_accuracy(held_out, Scored(top2_accuracy, images, "evaluation images"),
                           None if pairs is None else Scored(pairs, more, "MultiMNIST test pairs"))
    return _chance_verdict(best, chance, fraction, "top-2 accuracy", available)


def untrained_finding(verdict: UntrainedVerdict) -> Finding:
    """The one finding of a step whose predictions say its network is untrained, or whose
    accuracy cannot be told from chance (UNCLEAR): either way its other numbers are no
    property of a model that has learnt something."""
    ending = ("Its routing, explanation, robustness and compactness numbers are not read as "
              "properties of the model." if verdict.untrained else
              "Until it can, its routing, explanation, robustness and compactness numbers are "
              "not read as properties of the model.")
    text = f"{verdict.headline[0].upper()}{verdict.headline[1:]} ({verdict.details}). {ending}"
    threshold = (_pct(ONE_CLASS_SHARE, 0) + " of images" if verdict.kind in ("one_class",
                                                                             "one_pair")
                 else f"chance outside the {CONFIDENCE_WORDS}")
    return Finding("untrained", text, threshold, "")


# --------------------------------------------------------------------------------------------
# Routing (routing_entropy) and dead units (dead_units)


@dataclass(frozen=True)
class _Gap:
    """uniform - mean entropy (nats) of one routed layer, and that gap's interval (None
    without one): [uniform - high, uniform - low] of the mean entropy's."""

    value: float
    low: float | None
    high: float | None
    n: int = 0


def _routing_gaps(summary: dict) -> list[_Gap] | None:
    """The gap per routed layer (the last is the one into the classes)."""
    means = summary.get("entropy_mean_per_layer")
    uniforms = summary.get("entropy_uniform_per_layer")
    found = []
    if isinstance(means, list) and isinstance(uniforms, list) and means:
        for i, (m, u) in enumerate(zip(means, uniforms)):
            if m is not None and u is not None:
                found.append(_gap(u, m, interval_of(summary, "entropy_mean_per_layer", i)))
        return found or None
    mean, top = _num(summary, "entropy_mean"), _num(summary, "entropy_max")
    if mean is None or top is None:
        return None
    return [_gap(top, mean, interval_of(summary, "entropy_mean"))]


def _gap(uniform: float, mean: float, interval: Interval | None) -> _Gap:
    if interval is None:
        return _Gap(uniform - mean, None, None)
    return _Gap(uniform - mean, uniform - interval.high, uniform - interval.low, interval.n)


def _gap_side(gap: _Gap) -> str:
    """"departs" (the gap's interval above ROUTING_NATS), "uniform" (below it), or "unclear"
    (it holds the threshold, or there is no interval)."""
    if gap.low is None:
        return "unclear"
    return "departs" if gap.low > ROUTING_NATS else "uniform" if gap.high < ROUTING_NATS \
        else "unclear"


def _gap_text(gap: _Gap) -> str:
    if gap.low is None:
        return f"{gap.value:.2g} nats"
    return f"{gap.value:.2g} nats (95% CI {gap.low:.2g}–{gap.high:.2g})"


def routing_finding(summary: dict | None, classes: int,
                    untrained: dict | None = None, words: dict | None = None) -> Finding | None:
    """Whether routing departs from uniform weights: the uniform entropy minus the mean entropy
    of the routing weights, per routed layer, with its interval against ROUTING_NATS, the
    routing weights called what the model's family calls them (`words`,
    reportgen.capsnet.model_words.words_of: "coupling coefficients of dynamic routing", "EM
    assignments", ...; "routing weights" when unknown)."""
    gaps = _routing_gaps(summary or {})
    if not gaps:
        return None
    several = len(gaps) > 1
    threshold = f"{ROUTING_NATS:g} nats"
    sides = [_gap_side(g) for g in gaps]
    named = (lambda i: f"layer {i + 1}: ") if several else (lambda i: "")
    parts = "; ".join(f"{named(i)}{_gap_text(g)}" for i, g in enumerate(gaps))
    n = max(g.n for g in gaps)
    if all(side == "uniform" for side in sides):
        text = (f"Routing stays within {threshold} of uniform{' at every layer' if several else ''}"
                f" ({parts} below the uniform entropy, threshold {threshold}): the "
                f"{_routing_weights(words)} barely depart from "
                f"1/{'(number of parents)' if several else classes}.")
    elif "departs" in sides:
        where = ", ".join(f"layer {i + 1}" for i, side in enumerate(sides) if side == "departs")
        text = (f"Routing departs from uniform{f' at {where}' if several else ''} ({parts} below "
                f"the uniform entropy; threshold {threshold}): input capsules send more of their "
                f"output to some parents than to others.")
    else:
        text = (f"Whether routing departs from uniform by more than {threshold} cannot be told "
                f"on {n:,} images ({parts} below the uniform entropy)."
                if n else f"Routing is {parts} below the uniform entropy (threshold {threshold}"
                          f"; no interval to decide by).")
    before = _routing_gaps(untrained) if untrained else None
    return Finding("routing", text, threshold, "routing_entropy",
                   _untrained(None if not before else
                              f"{max(g.value for g in before):.2g} nats from uniform"))


def _routing_weights(words: dict | None) -> str:
    """The model's routing weights into the classes in its family's words."""
    from reportgen.capsnet.model_words import word

    found = word(words, "routing")
    return found or "routing weights"


def _dead_filters(summary: dict) -> list[tuple[str, int, int]]:
    """(conv layer, dead filters, filters) per layer, in the model's order; from the summed
    counts (as "conv layers") when the summary has no per-layer ones."""
    layers = summary.get("filter_layers")
    counts = summary.get("filter_count_per_layer")
    dead = summary.get("dead_filter_count_per_layer")
    if isinstance(layers, list) and isinstance(counts, list) and isinstance(dead, list) \
            and len(layers) == len(counts) == len(dead):
        return [(str(name), int(d or 0), int(c)) for name, d, c in zip(layers, dead, counts) if c]
    total = _num(summary, "filter_count")
    return [("conv layers", int(_num(summary, "dead_filter_count") or 0), int(total))] \
        if total else []


def _dead_parts(summary: dict, share: bool = True) -> list[tuple[str, str, float]]:
    """(what, "n of N …", share) per conv layer and for the capsule types."""
    parts = [(name, f"{name}: {d} of {n} filters dead", d / n)
             for name, d, n in _dead_filters(summary)]
    types, type_total = _num(summary, "dead_type_count"), _num(summary, "type_count")
    if type_total:
        parts.append(("capsule types", f"{int(types or 0)} of {int(type_total)} capsule types "
                      f"inactive", (types or 0) / type_total))
    return [(what, f"{text} ({_pct(value)})" if share else text, value)
            for what, text, value in parts]


def dead_units_finding(summary: dict | None, untrained: dict | None = None,
                       words: dict | None = None) -> Finding | None:
    """Conv filters that never fire, counted per conv layer (each layer has its own filters),
    and primary capsule types that never activate (below their activation's threshold: a
    vector capsule's length, a logistic unit; `words` says which); each layer's share against
    DEAD_SHARE."""
    from reportgen.capsnet.model_words import word

    s = summary or {}
    parts = _dead_parts(s)
    if not parts:
        return None
    flagged = [what for what, _, value in parts if value > DEAD_SHARE]
    threshold = f"threshold {_pct(DEAD_SHARE, 0)} per layer"
    verdict = (f"{' and '.join(flagged)} {'is' if len(flagged) == 1 else 'are'} above the "
               f"{_pct(DEAD_SHARE, 0)} of dead units we flag ({threshold})" if flagged else
               f"every layer is within the {_pct(DEAD_SHARE, 0)} of dead units we flag "
               f"({threshold})")
    what = ["a dead filter outputs 0 on every evaluation image"] if _dead_filters(s) else []
    if _num(s, "type_count"):
        what.append(f"an inactive type stays below {word(words, 'primary_activation')} "
                    f"{_num(s, 'dead_type_threshold') or DEAD_TYPE_LENGTH:g} on every image")
    meaning = "; ".join(what)
    text = (f"{'; '.join(text for _, text, _ in parts)}. {meaning[:1].upper()}{meaning[1:]}: "
            f"{verdict}.")
    before = "; ".join(text for _, text, _ in _dead_parts(untrained, share=False)) \
        if untrained else ""
    return Finding("dead_units", text, f"{_pct(DEAD_SHARE, 0)} of units", "dead_units",
                   _untrained(before or None))


# --------------------------------------------------------------------------------------------
# Explanation fidelity


def _versus(s: dict, a: str, b: str, name_a: str, name_b: str) -> str:
    """"X beats Y (0.30 vs 0.22; difference 0.08, 95% CI 0.05–0.11)" when the paired
    difference's interval excludes 0 (higher is better), else that they cannot be told apart."""
    va, vb = _num(s, a), _num(s, b)
    diff = difference_of(s, a, b)
    numbers = f"{_fixed(va)} vs {_fixed(vb)}"
    if diff is None:
        return f"{name_a} and {name_b} score {numbers} (no interval to tell them apart)"
    spread = f"difference {_fixed(diff.value)}, {ci_text(diff, 1, 3)}"
    side = _side(diff, 0.0)
    if side == "tie":
        return (f"{name_a} and {name_b} cannot be told apart on {diff.n:,} images ({numbers}; "
                f"{spread}; {_would_tell(diff, 0.0)})")
    first, second = (name_a, name_b) if side == "above" else (name_b, name_a)
    return f"{first} beats {second} ({numbers}; {spread})"


def _beats_random(s: dict, key: str, methods: list[tuple[str, str]]) -> str:
    """Which of `methods` ((method, label)) beat a random order by their paired differences."""
    random = _num(s, f"{key}_random")
    if random is None:
        return ""
    beat, unclear = [], []
    for method, label in methods:
        diff = difference_of(s, f"{key}_{method}", f"{key}_random")
        if diff is not None and diff.above(0.0):
            beat.append(label)
        elif diff is None or not diff.below(0.0):
            unclear.append(label)
    text = (f"; {' and '.join(beat) if beat else 'neither'} "
            f"{'beat' if len(beat) != 1 else 'beats'} a random order ({_fixed(random)})")
    if unclear:
        text += (f", {' and '.join(unclear)} cannot be told from it"
                 if beat or len(unclear) < len(methods) else ": neither can be told from it")
    return text


def explanation_findings(summary: dict | None, untrained: dict | None = None) -> list[Finding]:
    """Where the model's own explanation (RPV, or GraCapsNet's attention) and Grad-CAM++
    differ: deletion AOPC (higher = the map found what matters), insertion AUC (higher is
    better), each by the paired difference on the same images and against a random order, and
    the Spearman agreement of the two maps with its interval."""
    s = summary or {}
    own = s.get("builtin_method") or "rpv_modified"
    own_label, cam = METHOD_LABELS.get(own, own), METHOD_LABELS["gradcam_pp"]
    out = []
    threshold = f"the {CONFIDENCE_WORDS} of the paired difference"
    for key, measure in (("deletion_aopc", "deletion AOPC"), ("insertion_auc", "insertion AUC")):
        a, b = _num(s, f"{key}_{own}"), _num(s, f"{key}_gradcam_pp")
        if a is None or b is None:
            continue
        text = (f"By {measure}, {_versus(s, f'{key}_{own}', f'{key}_gradcam_pp', own_label, cam)}"
                f"{_beats_random(s, key, [(own, own_label), ('gradcam_pp', cam)])} "
                f"(higher is better; decided by {threshold} over the same images).")
        u_a, u_b = _num(untrained, f"{key}_{own}"), _num(untrained, f"{key}_gradcam_pp")
        before = None if u_a is None or u_b is None else \
            f"{own_label} {_fixed(u_a)}, {cam} {_fixed(u_b)}"
        out.append(Finding("explanations", text, threshold, "explanation_fidelity",
                           _untrained(before)))
    agreement = _num(s, "agreement_mean")
    if agreement is not None:
        interval = interval_of(s, "agreement_mean")
        valid = _num(s, "agreement_valid")
        over = f" over {int(valid)} images" if valid else ""
        if interval is None:
            verdict, value = "score", f"{agreement:.2f} (no interval to decide by)"
        else:
            value = f"{agreement:.2f} ({ci_text(interval, 1, 2)})"
            verdict = ("agree" if interval.low >= AGREEMENT else
                       "agree only weakly" if interval.low > 0 and interval.high < AGREEMENT else
                       "do not agree" if interval.high <= 0 else
                       "cannot be told to agree or not")
        text = (f"{own_label} and {cam} maps {verdict} on the primary grid: mean Spearman "
                f"correlation {value}{over} (agree: the interval at or above {AGREEMENT:g}; "
                f"weakly: between 0 and it).")
        before = _num(untrained, "agreement_mean")
        out.append(Finding("explanations", text, f"Spearman {AGREEMENT:g}", "explanation_fidelity",
                           _untrained(None if before is None else f"{before:.2f}")))
    return out


def explanation_quality_findings(summary: dict | None,
                                 untrained: dict | None = None) -> list[Finding]:
    """How far to trust each explanation the model's site shows: its faithfulness correlation
    (against the random map), infidelity (against the uniform and the random map),
    max-sensitivity (against the random map) and ROAD's MoRF and LeRF scores and their gap
    (Rong et al. 2022; against both), each "above" or "below" only where the 95%
    interval of the paired difference over the same images excludes 0; one finding per
    explanation, the untrained step's verdicts beside it."""
    s = summary or {}
    threshold = f"the {CONFIDENCE_WORDS} of the paired difference"

    def verdicts(numbers: dict, method: str) -> list[str]:
        return [v for metric, (_, _, baselines) in QUALITY_METRICS.items() for b in baselines
                if (v := quality_verdict(numbers, metric, method, b))]

    out = []
    for method in s.get("methods") or []:
        if method in QUALITY_BASELINES or not verdicts(s, method):
            continue
        label = QUALITY_LABELS[method]
        text = (f"{label}: {'; '.join(verdicts(s, method))} (over {s.get('images', 0):,} "
                f"images; lower infidelity, max-sensitivity and ROAD MoRF score are better; "
                f"decided by "
                f"{threshold}).")
        before = verdicts(untrained or {}, method)
        out.append(Finding("explanations", text, threshold, "explanation_quality",
                           _untrained("; ".join(before) if before else None)))
    return out


def randomisation_findings(summary: dict | None,
                           untrained: dict | None = None) -> list[Finding]:
    """Each explanation that does not pass the randomisation sanity check (Adebayo et al.
    2018): with every weighted layer re-initialised, the 95% interval of a similarity of its
    map to the trained network's reaches the threshold; the untrained step's verdict beside
    it."""
    s = summary or {}
    out = []
    for method in s.get("methods") or []:
        if s.get(f"verdict_{method}") != "does not pass":
            continue
        threshold = f"similarity {s.get('threshold', 0.5):g}"
        text = (f"{s.get(f'verdict_text_{method}')} (over {s.get('images', 0):,} images; "
                f"decided by the {CONFIDENCE_WORDS} with every layer randomised).")
        before = (untrained or {}).get(f"verdict_{method}")
        out.append(Finding("explanations", text, threshold, "explanation_randomisation",
                           _untrained(before)))
    return out


def localisation_findings(summary: dict | None,
                          untrained: dict | None = None) -> list[Finding]:
    """On MultiMNIST, whether each explanation points at the digit of the class it explains
    (reportgen.techniques.explanation_localisation): its pointing game and relevance mass
    accuracy against the uniform map and against its own score on the other digit, "above" or
    "below" only where the 95% interval of the paired difference over the same pairs excludes
    0; one finding per explanation, the untrained step's verdicts beside it."""
    s = summary or {}
    threshold = f"the {CONFIDENCE_WORDS} of the paired difference"

    def verdicts(numbers: dict, method: str) -> list[str]:
        return [v for metric in LOCALISATION_METRICS for b in ("uniform_map", "other")
                if (v := localisation_verdict(numbers, metric, method, b))]

    out = []
    for method in s.get("methods") or []:
        if method in LOCALISATION_BASELINES or not verdicts(s, method):
            continue
        text = (f"Does it point at the right digit? {'; '.join(verdicts(s, method))} (over "
                f"{s.get('images', 0):,} MultiMNIST test pairs, each of their two classes; "
                f"decided by {threshold}).")
        before = verdicts(untrained or {}, method)
        out.append(Finding("explanations", text, threshold, "explanation_localisation",
                           _untrained("; ".join(before) if before else None)))
    return out


def clrp_findings(summary: dict | None, untrained: dict | None = None) -> list[Finding]:
    """LRP vs contrastive LRP (Gu, Yang & Tresp 2018) as the intervals decide: whether CLRP's
    maps of the two top classes differ more than LRP's (the paired difference CLRP1 - LRP of
    1 - cosine), the pointing-game hit rates, and the patch-ablation ordering found beside
    their Table 1 ordering random < gradient < LRP < CLRP."""
    s = summary or {}
    out = []
    threshold = f"the {CONFIDENCE_WORDS} of the paired difference"
    lrp, clrp = _num(s, clrp_disc_key("lrp")), _num(s, clrp_disc_key("clrp1"))
    diff = difference_of(s, clrp_disc_key("clrp1"), clrp_disc_key("lrp"))
    if lrp is not None and clrp is not None and diff is not None:
        side = _side(diff, 0.0)
        verdict = {"above": "CLRP's top-2 maps differ more than LRP's",
                   "below": "LRP's top-2 maps differ more than CLRP's",
                   "tie": "CLRP's and LRP's top-2 maps cannot be told apart by how much they "
                          "differ"}[side]
        text = (f"{verdict}: 1 - cosine between the maps of each image's two highest-scoring "
                f"classes is {_fixed(clrp)} for CLRP1 and {_fixed(lrp)} for LRP (difference "
                f"{_fixed(diff.value)}, {ci_text(diff, 1, 3)}, over {diff.n:,} images; decided "
                f"by {threshold}).")
        before_l, before_c = (_num(untrained, clrp_disc_key(k)) for k in ("lrp", "clrp1"))
        before = None if before_l is None or before_c is None else \
            f"CLRP1 {_fixed(before_c)}, LRP {_fixed(before_l)}"
        out.append(Finding("explanations", text, threshold, "clrp_evaluation",
                           _untrained(before)))
    hits = [(k, interval_of(s, clrp_pointing_key(k))) for k in CLRP_METHODS]
    if all(interval is not None for _, interval in hits):
        rates = ", ".join(f"{CLRP_LABELS[k]} {_pct_ci(interval)}" for k, interval in hits)
        text = (f"Pointing game (the true class's map maximum on the digit, its pixels above "
                f"{s.get('threshold', 0.5):g}): {rates}.")
        out.append(Finding("explanations", text, f"pixels above {s.get('threshold', 0.5):g}",
                           "clrp_evaluation"))
    order = s.get("ablation_order")
    if order:
        if s.get("table1_order") and s.get("table1_order_separated"):
            agree = "follows Gu et al.'s Table 1 ordering, every step separated by its interval"
        elif s.get("table1_order"):
            agree = ("follows Gu et al.'s Table 1 ordering in its means, but not every step is "
                     "separated by its interval")
        else:
            agree = "does not follow Gu et al.'s Table 1 ordering random < gradient < LRP < CLRP"
        steps = "; ".join(_versus(s, clrp_drop_key(a), clrp_drop_key(b), CLRP_LABELS[a],
                                  CLRP_LABELS[b])
                          for a, b in (("gradient", "random"), ("lrp", "gradient"),
                                       ("clrp1", "lrp")))
        text = (f"Patch ablation (the {s.get('patch', 9)}x{s.get('patch', 9)} patch at the "
                f"map's maximum replaced by the mean image; the drop of the true class's logit) "
                f"orders the maps {order}, which {agree}: {steps} (decided by {threshold}).")
        out.append(Finding("explanations", text, threshold, "clrp_evaluation"))
    return out


# --------------------------------------------------------------------------------------------
# Robustness


FACTOR_NAMES = {"rotation": "rotation", "translation_x": "horizontal shift",
                "translation_y": "vertical shift", "scale": "scaling",
                "shear_x": "horizontal shear", "shear_y": "vertical shear"}


def _holds(summary: dict, factor: str) -> str:
    """"holds" when the paired drop mean - clean lies within AFFINE_POINTS of 0 (its
    interval above -AFFINE_POINTS), "falls" when it lies beyond (below -AFFINE_POINTS),
    "unclear" otherwise or without an interval."""
    drop = difference_of(summary, f"{factor}_mean_accuracy", "clean_accuracy")
    if drop is None:
        return "unclear"
    return "holds" if drop.low > -AFFINE_POINTS else "falls" if drop.high < -AFFINE_POINTS \
        else "unclear"


def affine_finding(summary: dict | None, classes: int,
                   untrained: dict | None = None) -> Finding | None:
    """Which affine factors the accuracy survives (the interval of the paired drop of the
    mean accuracy over the factor's sweep below clean lies within AFFINE_POINTS), which it
    does not (beyond them), which cannot be told, and which hurts most."""
    s = summary or {}
    clean = _num(s, "clean_accuracy")
    means = {f: _num(s, f"{f}_mean_accuracy") for f in FACTOR_NAMES}
    means = {f: v for f, v in means.items() if v is not None}
    if clean is None or not means:
        return None
    sides = {f: _holds(s, f) for f in means}
    held = [FACTOR_NAMES[f] for f in means if sides[f] == "holds"]
    fell = [FACTOR_NAMES[f] for f in means if sides[f] == "falls"]
    unclear = [FACTOR_NAMES[f] for f in means if sides[f] == "unclear"]
    clean_interval = interval_of(s, "clean_accuracy")
    clean_text = (f"{_pct(clean)}, {ci_text(clean_interval, 100, 1, '%')}" if clean_interval
                  else _pct(clean))
    every = len(means) > 1
    parts = []
    if held:
        parts.append(f"holds within {_points(AFFINE_POINTS)} of clean under {', '.join(held)}")
    if fell:
        under = "every transform" if len(fell) == len(means) and every else ", ".join(fell)
        parts.append(f"falls more than {_points(AFFINE_POINTS)} below clean under {under}")
    if unclear:
        n = max((d.n for d in (difference_of(s, f"{f}_mean_accuracy", "clean_accuracy")
                                for f in means) if d is not None), default=0)
        parts.append(f"cannot be told to hold within {_points(AFFINE_POINTS)} under "
                     f"{', '.join(unclear)}" + (f" on {n:,} images" if n else
                                                 " (no interval to decide by)"))
    worst = min(means, key=means.get)
    worst_interval = interval_of(s, f"{worst}_mean_accuracy")
    low = _num(s, f"{worst}_min_accuracy")
    text = (f"Accuracy (clean {clean_text}) {'; '.join(parts)}. {FACTOR_NAMES[worst][:1].upper()}"
            f"{FACTOR_NAMES[worst][1:]} hurts most: "
            f"{_pct_ci(worst_interval) if worst_interval else _pct(means[worst])} on average over "
            f"its sweep" + (f", {_pct(low)} at its worst" if low is not None else "")
            + f" (chance {_pct(1 / classes)}; threshold {_points(AFFINE_POINTS)}, decided by the "
              f"{CONFIDENCE_WORDS} of the paired drop).")
    before = _num(untrained, f"{worst}_mean_accuracy")
    return Finding("affine", text, _points(AFFINE_POINTS), "affine_robustness",
                   _untrained(None if before is None else
                              f"{_pct(before)} under {FACTOR_NAMES[worst]}"))


def affnist_finding(summary: dict | None, reference: tuple | None,
                    untrained: dict | None = None) -> Finding | None:
    """The affNIST-like accuracy with its interval beside Gu 2022's Table 1 figure for the
    same kind of model (`reference`: (kind, parameters as printed, MNIST %, affNIST %)), when
    there is one: above or below it only when the interval excludes it."""
    s = summary or {}
    ours, clean = _num(s, "affnist_accuracy"), _num(s, "clean_accuracy")
    if ours is None:
        return None
    interval = interval_of(s, "affnist_accuracy")
    text = (f"affNIST-like accuracy is {_pct_ci(interval) if interval else _pct(ours)}"
            + (f" (clean {_pct(clean)})" if clean else ""))
    threshold = f"the published figure outside the {CONFIDENCE_WORDS}"
    if reference and reference[3] is not None:
        kind, _, mnist, affnist = reference
        side = _side(interval, affnist / 100)
        verdict = {"above": "is above", "below": "is below", None: "is to be set beside"}.get(
            side, "cannot be told from")
        text += (f"; it {verdict} Gu 2022's {affnist:g}% for his {kind} (Ch.5 Table 1, clean "
                 f"{mnist:g}%)")
        if side == "tie":
            text += f" on {interval.n:,} images"
        if clean is not None and abs(clean - mnist / 100) > 0.005:
            text += ", but the clean accuracies differ, so the comparison is loose"
    text += "."
    before = _num(untrained, "affnist_accuracy")
    return Finding("affnist", text, threshold, "affnist_benchmark",
                   _untrained(None if before is None else _pct(before)))


def multimnist_finding(summary: dict | None,
                       untrained: dict | None = None) -> Finding | None:
    """Top-2 accuracy over MultiMNIST test pairs with its interval beside chance
    (1/C(K, 2)), and the segmentation IoU beside its reference, a decoder drawing each class's
    typical digit at the centre
    (reportgen.techniques.multimnist_segmentation.numbers.class_prototypes), by their paired
    difference on the same pairs, and the untrained step's (Sabour et al. 2017 section 6: 95%
    top-2)."""
    s = summary or {}
    accuracy, chance = _num(s, "top2_accuracy"), _num(s, "top2_chance")
    images = int(_num(s, "images") or 0)
    if accuracy is None or chance is None or not images:
        return None
    interval = interval_of(s, "top2_accuracy") or accuracy_interval(accuracy, images)
    text = (f"Top-2 accuracy is {_pct_ci(interval)} on {images:,} MultiMNIST test pairs, "
            f"{_against_chance(interval, chance)} ({_pct(chance)} = 1/{round(1 / chance)}; "
            f"a CapsNet in Sabour et al. 2017: 95%)")
    iou = _num(s, "segmentation_iou")
    before_iou = _num(untrained, "segmentation_iou")
    reference = _num(s, "segmentation_reference")
    if iou is not None:
        iou_interval = interval_of(s, "segmentation_iou")
        text += (f"; the decoder run per true class segments the two digits with a mean IoU "
                 f"of {_pct_ci(iou_interval) if iou_interval else _pct(iou)}")
        if reference is not None:
            diff = difference_of(s, "segmentation_iou", "segmentation_reference")
            side = _side(diff, 0.0)
            typical = ("a decoder that knows only the classes and draws each class's typical "
                       "digit at the centre")
            if side in ("above", "below"):
                text += (f", {side} the {_pct(reference)} of {typical} (paired difference "
                         f"{ci_text(diff, 100, 1, ' points')})")
            elif side == "tie":
                text += (f", which cannot be told apart from the {_pct(reference)} of {typical} "
                         f"on {diff.n:,} pairs (paired difference {ci_text(diff, 100, 1, ' points')}"
                         f"; {_would_tell(diff, 0.0)})")
            else:
                text += f" (a decoder that knows only the classes: {_pct(reference)})"
        before_interval = interval_of(untrained or {}, "segmentation_iou")
        if before_iou is not None and iou_interval is not None and before_interval is not None:
            apart = iou_interval.low > before_interval.high
            text += f" ({'above' if apart else 'not clearly above'} the untrained step's)"
    text += "."
    before = _num(untrained, "top2_accuracy")
    parts = ([f"top-2 {_pct(before)}"] if before is not None else []) + \
        ([f"IoU {_pct(before_iou)}"] if before_iou is not None else [])
    return Finding("multimnist", text, f"chance outside the {CONFIDENCE_WORDS}",
                   "multimnist_segmentation", _untrained(", ".join(parts) or None))


def adversarial_finding(summary: dict | None, classes: int,
                        untrained: dict | None = None) -> Finding | None:
    """Accuracy under PGD at ε = ATTACK_EPSILON on the output with its interval, beside the
    same attack on the votes (Gu 2022) by their paired difference, and chance."""
    s = summary or {}
    eps = f"{ATTACK_EPSILON:g}"
    key = f"accuracy_capsules_pgd_{eps}"
    output = _num(s, key)
    if output is None:
        return None
    clean = _num(s, "clean_accuracy")
    interval = interval_of(s, key)
    text = (f"PGD at ε = {eps} (L∞) leaves {_pct_ci(interval) if interval else _pct(output)} "
            f"accuracy" + (f" (clean {_pct(clean)}" if clean is not None else " (")
            + f"{', ' if clean is not None else ''}chance {_pct(1 / classes)})")
    votes_key = f"accuracy_votes_pgd_{eps}"
    votes = _num(s, votes_key)
    if votes is not None:
        diff = difference_of(s, votes_key, key)
        side = _side(diff, 0.0)
        if side == "below":
            text += f"; attacking the votes (Gu 2022) is stronger: {_pct(votes)}"
        elif side == "above":
            text += f"; attacking the votes is weaker: {_pct(votes)}"
        elif side == "tie" and diff.low == diff.high == 0:
            text += (f"; attacking the votes instead leaves the same images right, every one "
                     f"of the {diff.n:,} ({_pct(votes)})")
            diff = None
        elif side == "tie":
            text += (f"; attacking the votes instead ({_pct(votes)}) cannot be told apart from "
                     f"it on {diff.n:,} images")
        else:
            text += f"; attacking the votes: {_pct(votes)} (no interval to compare by)"
        if diff is not None:
            text += f" (paired difference {ci_text(diff, 100, 1, ' points')})"
    text += "."
    before = _num(untrained, key)
    return Finding("adversarial", text, f"the {CONFIDENCE_WORDS} of the paired difference",
                   "adversarial_robustness",
                   _untrained(None if before is None else _pct(before)))


# --------------------------------------------------------------------------------------------
# Compactness (capsule_semantics)


def _chance(summary: dict, key: str) -> tuple[float, float] | None:
    value = summary.get(key)
    if isinstance(value, list) and len(value) == 2 and None not in value:
        return float(value[0]), float(value[1])
    return None


def compactness_finding(summary: dict | None, untrained: dict | None = None,
                        factor: str = "rotation") -> Finding | None:
    """Compactness under one factor in both aggregations, each against what an isotropic
    random change gives (its 95th percentile is the threshold): nothing is claimed of a score
    a random change reaches as well."""
    from reportgen.results.technique_numbers import (CHANCE_PER_IMAGE, CHANCE_POOLED, PER_IMAGE,
                                                     POOLED)

    s = summary or {}
    pooled, per_image = _num(s, f"{POOLED}{factor}"), _num(s, f"{PER_IMAGE}{factor}")
    chance, chance_one = _chance(s, CHANCE_POOLED), _chance(s, CHANCE_PER_IMAGE)
    if pooled is None or chance is None:
        return None
    name = FACTOR_NAMES.get(factor, factor)
    interval = interval_of(s, f"{POOLED}{factor}")
    side = _side(interval, chance[1])
    verdict = {"above": "more concentrated in few dimensions than a random change",
               "below": "no more concentrated than a random change",
               "tie": f"not distinguishable from a random change on {interval.n:,} images"
               if interval else ""}.get(side, "more concentrated in few dimensions than a "
                                        "random change" if pooled > chance[1] else
                                        "no more concentrated than a random change")
    value = f"{pooled:.2g}" + (f" (95% CI {interval.low:.2g}–{interval.high:.2g})"
                               if interval else "")
    text = (f"Compactness under {name} is {value} (KL of the image-averaged shares of "
            f"variance, the aggregation of the order of Gu 2022's Table 5, where CapsNet scores "
            f"0.0031): {verdict} (threshold: {chance[1]:.2g}, the 95th percentile of an "
            f"isotropic random change{'' if interval else '; no interval'}).")
    if per_image is not None and chance_one is not None:
        one = interval_of(s, f"{PER_IMAGE}{factor}")
        above = one.above(chance_one[1]) if one else per_image > chance_one[1]
        text += f" Averaged per image it is {per_image:.2g}" + (
            f", above a random change's {chance_one[1]:.2g}." if above else
            f", not above what a random change gives (up to {chance_one[1]:.2g}): that "
            f"aggregation does not separate them.")
    before, before_one = _num(untrained, f"{POOLED}{factor}"), \
        _num(untrained, f"{PER_IMAGE}{factor}")
    return Finding("compactness", text, f"{chance[1]:.2g}", "capsule_semantics",
                   _untrained(None if before is None else f"{before:.2g}" + (
                       f", per image {before_one:.2g}" if before_one is not None else "")))


# --------------------------------------------------------------------------------------------
# Everything


def findings(summaries: dict[str, dict], classes: int, *, accuracy: float | None = None,
             images: int | None = None, untrained: dict[str, dict] | None = None,
             untrained_accuracy: float | None = None,
             reference: tuple | None = None,
             predicts_nothing: UntrainedVerdict | None = None,
             labels_per_image: int = 1,
             accuracy_counted: str = "evaluation images",
             words: dict | None = None) -> list[Finding]:
    """Every finding the numbers support, in reading order. `summaries` and `untrained`:
    {technique name: its summary} at the analysed step and at 0-0; `reference`: Gu's Table 1
    row for the model's kind (see `affnist_finding`). `predicts_nothing` (`untrained_verdict` of
    the analysed step, an UNCLEAR one included): the accuracy and that verdict only, since the
    other numbers then may describe an untrained network. `labels_per_image`
    2: `accuracy` is top-2 accuracy; `accuracy_counted` what its `images` are. `words`: the
    model's mechanism in words (ModelData.words, reportgen.capsnet.model_words.words_of), so
    that no finding names another family's."""
    before = untrained or {}
    # two digits per image: the accuracy is top-2, whose chance is 1/C(K, 2), not 1/K
    pairs = multimnist_finding(summaries.get("multimnist_segmentation"),
                               before.get("multimnist_segmentation"))
    out = [pairs or accuracy_finding(accuracy, classes, images, untrained_accuracy,
                                     labels_per_image, accuracy_counted)]
    if predicts_nothing is not None:
        # untrained, or not told from chance: no property finding of a model that may have
        # learnt nothing (the accuracy's own finding already says which)
        return [f for f in out if f is not None] + [untrained_finding(predicts_nothing)]
    out.append(routing_finding(summaries.get("routing_entropy"), classes,
                               before.get("routing_entropy"), words))
    out.append(dead_units_finding(summaries.get("dead_units"), before.get("dead_units"), words))
    out.extend(explanation_findings(summaries.get("explanation_fidelity"),
                                    before.get("explanation_fidelity"))
               if "explanation_fidelity" in summaries else [])
    out.extend(explanation_quality_findings(summaries.get("explanation_quality"),
                                            before.get("explanation_quality")))
    out.extend(randomisation_findings(summaries.get("explanation_randomisation"),
                                      before.get("explanation_randomisation")))
    out.extend(clrp_findings(summaries.get("clrp_evaluation"), before.get("clrp_evaluation"))
               if "clrp_evaluation" in summaries else [])
    out.extend(localisation_findings(summaries.get("explanation_localisation"),
                                     before.get("explanation_localisation")))
    out.append(affine_finding(summaries.get("affine_robustness"), classes,
                              before.get("affine_robustness")))
    out.append(affnist_finding(summaries.get("affnist_benchmark"), reference,
                               before.get("affnist_benchmark")))
    out.append(adversarial_finding(summaries.get("adversarial_robustness"), classes,
                                   before.get("adversarial_robustness")))
    out.append(compactness_finding(summaries.get("capsule_semantics"),
                                   before.get("capsule_semantics")))
    return [f for f in out if f is not None]
