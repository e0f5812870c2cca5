"""Adversarial robustness and reconstruction-based detection over an evaluation set.

Attacks (L-infinity, untargeted, on the true label y, inputs kept in [0, 1]):
    FGSM (Goodfellow et al. 2015):  x' = clip(x + eps sign(grad_x L), 0, 1)
    PGD (Madry et al. 2018):        x_0 = x (or x + U(-eps, eps) with random_start);
                                    x_{t+1} = clip(proj_eps(x_t + alpha sign(grad_x L)), 0, 1),
                                    `pgd_steps` steps of alpha = 2.5 eps / steps (default);
                                    the LAST iterate is evaluated.
The loss L is the cross-entropy of softmax(logits) with y, for two attack targets:
    "capsules": the real model, routing included, scored as its head declares (Head.scores):
                logits = the encoder's logits themselves (a learnt readout of the class
                capsules, trained with this cross-entropy), or the log of its class scores:
                class-capsule lengths, the activations of class capsules whose activation is a
                unit of its own (matrix capsules; Self-Routing, whose activations sum to 1 over
                the classes, so L is its training loss -log a_y), or a CNN's class
                probabilities;
    "votes":    logits = log |squash(mean_i u_hat[j|i])| — the votes of all primary capsules
                averaged per class and squashed by the family's own squash (Family.squash),
                bypassing routing (Gu 2022, "vote attack").
Every adversarial example is then classified by the REAL model (argmax of the scores): the
vote attack only chooses the perturbation. Gu 2022 reports attacking the votes is much stronger
(CIFAR-10, PGD: 17.3% robust accuracy through the output capsules vs 4.83% through the votes).

Detection (models with a decoder; Frosst, Sabour & Hinton 2018 use the same idea): the distance
of an input is the L2 norm of input minus its reconstruction from the PREDICTED class capsule
(the model's own reconstruction). The threshold is the 95th percentile of the clean distances
over the whole evaluated set, so ~5% of clean inputs are flagged. Per attack and eps:
    success rate    = misclassified adversarials / originally-correct images
    undetected rate = (successful AND distance <= threshold) / originally-correct images
    detected share  = (successful AND distance > threshold) / successful
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from reportgen.errors import ReportgenError
from reportgen.results import intervals as iv
from reportgen.results import per_image
from reportgen.techniques.adversarial_robustness.numbers import ATTACKS, TARGETS, metric_key
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import check_option, check_positive, rounded_number

PERCENTILE = 95.0
CHUNK = 250                      # images per attack batch (fewer for big vote tensors)
VOTE_BYTES = 2 ** 27             # budget for one chunk's vote tensor (128 MiB)
EVAL_CHUNK = 500                 # rows per evaluation forward call


def _invalid(option: str, expected: str, value) -> ReportgenError:
    return ReportgenError(f"Invalid option '{option}' for technique 'adversarial_robustness'.",
                          expected=expected, received=repr(value),
                          fix=f"Set '{option}' to {expected}.")


@dataclass(frozen=True)
class Params:
    epsilons: tuple[float, ...] = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3)   # L-inf budgets (pixels 0…1)
    attacks: tuple[str, ...] = ATTACKS
    targets: tuple[str, ...] = TARGETS
    pgd_steps: int = 10
    pgd_step_size: float = 0.0     # 0 = 2.5 * eps / pgd_steps (Madry et al.); else absolute
    random_start: bool = False     # PGD starts from a uniform point of the eps-ball
    images: int = 0                # 0 = the whole evaluation set, else a stratified subset
    histogram_epsilon: float = 0.1  # eps of the distance histogram and the examples
    examples: int = 4              # example images (clean, adversarial, reconstruction)
    seed: int = 0                  # subset and PGD random start

    def __post_init__(self):
        # Lists (from settings files) become tuples, so Params stays hashable.
        for name in ("epsilons", "attacks", "targets"):
            value = getattr(self, name)
            if isinstance(value, (list, tuple)):
                object.__setattr__(self, name, tuple(value))
        try:
            epsilons = tuple(float(e) for e in self.epsilons)
        except (TypeError, ValueError):
            raise _invalid("epsilons", "a list of numbers >= 0", self.epsilons) from None
        if not epsilons or any(not math.isfinite(e) or e < 0 for e in epsilons) or \
                list(epsilons) != sorted(set(epsilons)):
            raise _invalid("epsilons", "a non-empty, increasing list of distinct numbers >= 0",
                           self.epsilons)
        object.__setattr__(self, "epsilons", epsilons)
        for name, allowed in (("attacks", ATTACKS), ("targets", TARGETS)):
            chosen = getattr(self, name)
            if not isinstance(chosen, tuple) or not chosen or len(set(chosen)) != len(chosen):
                raise _invalid(name, f"a non-empty list of distinct names from {list(allowed)}",
                               chosen)
            for item in chosen:
                check_option("adversarial_robustness", name, item, allowed)
        check_positive("adversarial_robustness", "pgd_steps", self.pgd_steps)
        if not isinstance(self.pgd_step_size, (int, float)) or self.pgd_step_size < 0:
            raise _invalid("pgd_step_size", "0 (= 2.5 eps / steps) or a positive number",
                           self.pgd_step_size)
        for name in ("images", "examples"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise _invalid(name, "an integer >= 0", value)
        if float(self.histogram_epsilon) not in epsilons:
            raise _invalid("histogram_epsilon", f"one of the epsilons {list(epsilons)}",
                           self.histogram_epsilon)

    def step_size(self, epsilon: float) -> float:
        return float(self.pgd_step_size) if self.pgd_step_size > 0 else \
            2.5 * float(epsilon) / self.pgd_steps


def has_votes(description) -> bool:
    """Whether the vote attack applies: the network declares its votes into the class capsules
    (the "votes" capability, reportgen.contract) and those capsules are vectors whose lengths
    are their activations, so the votes averaged and squashed score the classes as the model
    does (Sabour et al. 2017's routing, any iterations); a CNN has no votes."""
    return {"votes", "vector_capsules", "class_capsules"} <= description.features


def variants(description) -> list[Params]:
    """Both targets for a model with votes (`has_votes`); only its output for the others."""
    if has_votes(description):
        return [Params()]
    return [Params(targets=("capsules",))]


# --- the attack targets (keras.ops) and the attacks ---------------------------------------------

def capsule_logits(net):
    """x -> the logits of the class scores the encoder gives (the real model, routing
    included), by what its head declares they are: logits as they are; class-capsule lengths,
    activations or a CNN's class probabilities by their log (for a softmax: the logits up to a
    constant)."""
    from reportgen.capsnet.ops import log_length

    declared_logits = net.description.head.scores == "logits"

    def logits(x):
        _, scores = net.encoder(x, training=False)
        return scores if declared_logits else log_length(scores)
    return logits


def vote_logits(net):
    """x -> log |squash(mean over primary capsules i of u_hat[j|i])| per class j (Gu 2022).

    The votes are the network's own (`net.votes`, its "votes" capability); the routing is
    skipped: with one routing iteration (uniform couplings 1/classes) the model's s_j is the
    same average scaled by (children / classes), so both rank classes alike.
    """
    from keras import ops

    from reportgen.capsnet.ops import capsule_length, log_length, squash as sabour_squash
    from reportgen.settings.families import family_of

    squash = family_of(net.params).squash or sabour_squash

    def logits(x):
        votes = net.votes(x)                                              # (B, N, K, D)
        return log_length(capsule_length(squash(ops.mean(votes, axis=1))))
    return logits


def logits_function(net, target: str):
    check_option("adversarial_robustness", "target", target, TARGETS)
    return capsule_logits(net) if target == "capsules" else vote_logits(net)


def loss_gradient(logits):
    """(x, y) -> d/dx of the summed cross-entropy of softmax(logits(x)) with labels y."""
    import tensorflow as tf
    from keras import ops

    @tf.function(reduce_retracing=True)
    def gradient(x, y):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = ops.sum(ops.sparse_categorical_crossentropy(y, logits(x), from_logits=True))
        return tape.gradient(loss, x)

    def call(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return gradient(tf.constant(x, tf.float32), tf.constant(y, tf.int64)).numpy()
    return call


def fgsm(gradient, x: np.ndarray, y: np.ndarray, epsilon) -> np.ndarray:
    """One signed-gradient step of size epsilon (a number, or one per row of x)."""
    return fgsm_many(gradient, x, y, [epsilon])[0]


def fgsm_many(gradient, x: np.ndarray, y: np.ndarray, epsilons) -> list[np.ndarray]:
    """FGSM at each epsilon from ONE gradient: x + eps sign(grad_x L) all start from x."""
    x = np.asarray(x, np.float32)
    if all(np.all(np.asarray(e) == 0) for e in epsilons):
        return [x.copy() for _ in epsilons]
    sign = np.sign(gradient(x, y))
    return [np.clip(x + _per_row(e, x) * sign, 0.0, 1.0) for e in epsilons]


def _per_row(value, x: np.ndarray) -> np.ndarray:
    """A number, or one number per row of x, shaped to broadcast over x's rows."""
    value = np.asarray(value, np.float32)
    return value.reshape((-1,) + (1,) * (x.ndim - 1)) if value.ndim else value


def pgd(gradient, x: np.ndarray, y: np.ndarray, epsilon, steps: int, step_size,
        random_start: bool = False, rng: np.random.Generator | None = None) -> np.ndarray:
    """PGD; epsilon and step_size are numbers or one per row of x, so one batch can hold the
    same images at several budgets (each row's iterates depend on that row alone)."""
    x = np.asarray(x, np.float32)
    epsilon, step_size = _per_row(epsilon, x), _per_row(step_size, x)
    if np.all(epsilon == 0):
        return x.copy()
    low = np.clip(x - epsilon, 0.0, 1.0)
    high = np.clip(x + epsilon, 0.0, 1.0)
    adversarial = x.copy()
    if random_start:
        rng = rng if rng is not None else np.random.default_rng(0)
        noise = rng.uniform(-1.0, 1.0, x.shape).astype(np.float32) * epsilon
        adversarial = np.clip(x + noise, low, high)
    for _ in range(int(steps)):
        adversarial = adversarial + step_size * np.sign(gradient(adversarial, y))
        adversarial = np.clip(adversarial, low, high)
    return adversarial


def attack_all(gradient, attack: str, images: np.ndarray, labels: np.ndarray, epsilons,
               params: Params, chunk: int, rng: np.random.Generator, bar=None) -> list:
    """Adversarial images for every epsilon (> 0), in as few gradient calls as the batch allows:
    FGSM takes one gradient per chunk for all budgets; PGD stacks the chunk once per budget into
    one batch of at most `chunk` rows."""
    parts: list[list[np.ndarray]] = [[] for _ in epsilons]
    per_chunk = chunk if attack == "fgsm" else max(1, chunk // len(epsilons))
    for start in range(0, len(images), per_chunk):
        x, y = images[start:start + per_chunk], labels[start:start + per_chunk]
        if attack == "fgsm":
            found = fgsm_many(gradient, x, y, epsilons)
        else:
            rows = np.repeat(np.asarray(epsilons, np.float32), len(x))
            steps = np.asarray([params.step_size(e) for e in epsilons], np.float32)
            stacked = pgd(gradient, np.concatenate([x] * len(epsilons)),
                          np.concatenate([y] * len(epsilons)), rows, params.pgd_steps,
                          np.repeat(steps, len(x)), params.random_start, rng)
            found = np.split(stacked, len(epsilons))
        for e, adversarial in enumerate(found):
            parts[e].append(adversarial)
        if bar is not None:
            bar.update(len(x) * len(epsilons))
    return [np.concatenate(p) for p in parts]


def classify(net, images: np.ndarray):
    """(predicted (n,), distances (n,) or None, reconstructions or None) on the real model;
    the distance is |x - reconstruction from the predicted class capsule|_2."""
    from reportgen.capsnet.compiled import encoder_outputs
    from reportgen.techniques.compute import decode, masked_inputs

    predicted, distances, reconstructions = [], [], []
    for start in range(0, len(images), EVAL_CHUNK):
        x = np.asarray(images[start:start + EVAL_CHUNK], np.float32)
        capsules, lengths = encoder_outputs(net, x)
        pred = lengths.argmax(axis=1)
        predicted.append(pred)
        if net.decoder is not None:
            chosen = capsules[np.arange(len(pred)), pred]
            recon = decode(net, masked_inputs(chosen, pred, capsules.shape[1]))
            reconstructions.append(recon)
            distances.append(reconstruction_distance(x, recon))
    predicted = np.concatenate(predicted) if predicted else np.zeros(0, np.int64)
    if net.decoder is None:
        return predicted.astype(np.int64), None, None
    return (predicted.astype(np.int64), np.concatenate(distances),
            np.concatenate(reconstructions))


def reconstruction_distance(images: np.ndarray, reconstructions: np.ndarray) -> np.ndarray:
    diff = np.asarray(images, np.float64) - np.asarray(reconstructions, np.float64)
    return np.sqrt(np.sum(diff.reshape(len(diff), -1) ** 2, axis=1))


def detection_threshold(clean_distances: np.ndarray, percentile: float = PERCENTILE) -> float:
    """The distance above which an input is flagged: a percentile of the clean distances."""
    return float(np.percentile(np.asarray(clean_distances, np.float64), percentile))


def attack_chunk(net) -> int:
    """Images per attack batch: CHUNK, fewer when one image's votes are big (LPcaps: 6.6 MB)."""
    description = net.description
    if description.primary_capsules is None or description.class_capsules is None:
        return CHUNK                        # a CNN: no votes
    per_image = (description.primary_capsules.capsules * description.classes
                 * description.class_capsules.pose_size * 4)
    return int(max(16, min(CHUNK, VOTE_BYTES // max(1, per_image))))


# --- the analysis -------------------------------------------------------------------------------

def _rate(numerator, denominator) -> float:
    return float(numerator) / float(denominator) if denominator else float("nan")


def _example_rows(labels, correct, count) -> np.ndarray:
    """Up to `count` originally-correct images, one per class first."""
    candidates = np.flatnonzero(correct)
    rows = []
    for c in np.unique(labels[candidates]):
        if len(rows) < count:
            rows.append(int(candidates[labels[candidates] == c][0]))
    rows += [int(i) for i in candidates if int(i) not in rows][:max(0, count - len(rows))]
    return np.asarray(sorted(rows), np.int64)


def compute(eval_batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """Accuracy, success and undetected rates per (target, attack, eps); see module docstring.

    Arrays: "epsilons" (E,); "accuracy", "success", "undetected", "detected", "mean_distance"
    (T, A, E) in the order of params.targets / params.attacks; "predicted" (T, A, E, N);
    "flagged" (T, A, E, N) bool, the adversarial's distance above the threshold (all False
    without a decoder: the intervals of the detection rates are over these images);
    "labels", "clean_predicted", "clean_distances" (N,); "threshold", "clean_accuracy",
    "has_decoder" (); "histogram_distances", "histogram_success" (T, A, N) at
    histogram_epsilon; "example_*" for the example figure.
    """
    from reportgen import console
    from reportgen.probe.evaluation import stratified_sample

    params = params or Params()
    net = eval_batch.net
    if "votes" in params.targets and not has_votes(net.description):
        raise ReportgenError("The vote attack needs the primary capsules' votes for class "
                             "capsules whose lengths are their activations, which this model "
                             "does not have.", expected="targets = ['capsules']",
                             received=repr(list(params.targets)))
    has_decoder = net.decoder is not None
    names = ("lengths", "predicted") + (("reconstruction",) if has_decoder else ())
    tensors = eval_batch.tensors(*names)
    index = np.arange(len(eval_batch)) if params.images == 0 else \
        stratified_sample(eval_batch.labels, params.images, seed=params.seed)
    images = np.asarray(eval_batch.images[index], np.float32)
    labels = np.asarray(eval_batch.labels[index], np.int64)
    clean_predicted = np.asarray(tensors["predicted"][index], np.int64)
    correct = clean_predicted == labels
    n = len(index)
    epsilons = params.epsilons
    shape = (len(params.targets), len(params.attacks), len(epsilons))
    metrics = {k: np.full(shape, np.nan) for k in
               ("accuracy", "success", "undetected", "detected", "mean_distance")}
    predicted_all = np.zeros(shape + (n,), np.int64)
    flagged_all = np.zeros(shape + (n,), bool)
    hist_distances = np.full(shape[:2] + (n,), np.nan)
    hist_success = np.zeros(shape[:2] + (n,), np.int8)
    if has_decoder:
        clean_recon = np.asarray(tensors["reconstruction"][index], np.float32)
        clean_distances = reconstruction_distance(images, clean_recon)
        threshold = detection_threshold(clean_distances) if n else float("nan")
    else:
        clean_recon, clean_distances, threshold = None, np.full(n, np.nan), float("nan")
    shown = _example_rows(labels, correct, params.examples)
    example_adv = np.zeros(shape[:2] + (len(shown),) + images.shape[1:], np.float32)
    example_recon = np.zeros_like(example_adv)
    example_pred = np.zeros(shape[:2] + (len(shown),), np.int64)
    example_distance = np.full(shape[:2] + (len(shown),), np.nan)

    chunk = attack_chunk(net)
    rng = np.random.default_rng(params.seed)
    attacked = [e for e in epsilons if e > 0]
    total = len(params.targets) * len(params.attacks) * len(attacked) * n
    with console.progress(total, f"adversarial robustness ({n} images × "
                          f"{total // max(n, 1)} attacks)", unit="passes") as bar:
        for t, target in enumerate(params.targets):
            gradient = loss_gradient(logits_function(net, target)) if attacked and n else None
            for a, attack in enumerate(params.attacks):
                found = dict(zip(attacked, attack_all(gradient, attack, images, labels,
                                                      attacked, params, chunk, rng, bar))) \
                    if gradient is not None else {}
                # every budget's adversarials classified in one pass
                together = classify(net, np.concatenate(list(found.values()))) if found else None
                for e, epsilon in enumerate(epsilons):
                    if epsilon == 0:                   # nothing to attack: the clean results
                        predicted, distances = clean_predicted, clean_distances
                        adversarial, recon = images, clean_recon
                    else:
                        adversarial = found[epsilon]
                        k = attacked.index(epsilon)
                        rows = slice(k * n, (k + 1) * n)
                        predicted, distances, recon = (None if part is None else part[rows]
                                                       for part in together)
                        if distances is None:
                            distances = np.full(n, np.nan)
                    success = (predicted != labels) & correct
                    metrics["accuracy"][t, a, e] = _rate(np.sum(predicted == labels), n)
                    metrics["success"][t, a, e] = _rate(success.sum(), correct.sum())
                    predicted_all[t, a, e] = predicted
                    if has_decoder:
                        flagged = distances > threshold
                        flagged_all[t, a, e] = flagged
                        metrics["undetected"][t, a, e] = _rate((success & ~flagged).sum(),
                                                               correct.sum())
                        metrics["detected"][t, a, e] = _rate((success & flagged).sum(),
                                                             success.sum())
                        metrics["mean_distance"][t, a, e] = float(distances.mean()) if n \
                            else float("nan")
                    if epsilon == params.histogram_epsilon:
                        hist_distances[t, a] = distances
                        hist_success[t, a] = success
                        example_adv[t, a] = adversarial[shown]
                        example_pred[t, a] = predicted[shown]
                        example_distance[t, a] = distances[shown]
                        if recon is not None:
                            example_recon[t, a] = recon[shown]

    out = {
        "epsilons": np.asarray(epsilons, np.float32),
        **{k: v.astype(np.float32) for k, v in metrics.items()},
        "predicted": predicted_all,
        "flagged": flagged_all,
        "labels": labels,
        "clean_predicted": clean_predicted,
        "clean_distances": clean_distances.astype(np.float32),
        "threshold": np.float32(threshold),
        "clean_accuracy": np.float32(_rate(correct.sum(), n)),
        "has_decoder": np.int64(has_decoder),
        "histogram_distances": hist_distances.astype(np.float32),
        "histogram_success": hist_success,
        "example_labels": labels[shown],
        "example_clean": images[shown],
        "example_adversarial": example_adv,
        "example_predicted": example_pred,
        "example_distance": example_distance.astype(np.float32),
    }
    if has_decoder:
        out["example_clean_reconstruction"] = clean_recon[shown]
        out["example_clean_distance"] = clean_distances[shown].astype(np.float32)
        out["example_reconstruction"] = example_recon
    return out


def summarize(arrays: dict, params: Params | None = None) -> dict:
    """Flat JSON-ready headline numbers: images, clean_accuracy, threshold,
    clean_false_positive_rate, and per target, attack and eps (e.g. accuracy_votes_pgd_0.1)
    accuracy_*, success_*, and with a decoder undetected_*, detected_*."""
    params = params or Params()
    has_decoder = bool(np.asarray(arrays["has_decoder"]))
    clean = np.asarray(arrays["clean_distances"], np.float64)
    threshold = float(np.asarray(arrays["threshold"]))
    out = {
        "images": int(len(np.asarray(arrays["labels"]))),
        "clean_accuracy": rounded_number(np.asarray(arrays["clean_accuracy"])),
        "has_decoder": has_decoder,
        "threshold": rounded_number(threshold) if has_decoder else None,
        "clean_false_positive_rate": (rounded_number(np.mean(clean > threshold))
                                      if has_decoder and len(clean) else None),
        "histogram_epsilon": float(params.histogram_epsilon),
        "pgd_steps": int(params.pgd_steps),
        "pgd_step_size": ("2.5*eps/steps" if params.pgd_step_size == 0
                          else float(params.pgd_step_size)),
        "random_start": bool(params.random_start),
    }
    epsilons = np.asarray(arrays["epsilons"], np.float64)
    metrics = ("accuracy", "success") + (("undetected", "detected") if has_decoder else ())
    for t, target in enumerate(params.targets):
        for a, attack in enumerate(params.attacks):
            for e, epsilon in enumerate(epsilons):
                for metric in metrics:
                    out[metric_key(metric, target, attack, round(float(epsilon), 6))] = \
                        rounded_number(np.asarray(arrays[metric])[t, a, e])
    if "flagged" in arrays and out["images"]:
        _attach_intervals(out, arrays, params, epsilons, metrics)
    return out


def _attach_intervals(out: dict, arrays, params: Params, epsilons, metrics) -> None:
    """The Wilson interval of every rate over the images it counts (accuracy: all of them;
    success and undetected: the originally correct ones; detected: the successful ones), and
    per eps the paired differences of the accuracies (BCa bootstrap over the images): votes
    against capsules as the attack's target, and the capsules' against the clean accuracy."""
    labels = np.asarray(arrays["labels"], np.int64)
    correct = np.asarray(arrays["clean_predicted"], np.int64) == labels
    iv.attach(out, "clean_accuracy", iv.proportion(correct))
    # what another model's accuracies on the same images are compared with, image by image
    per_image.attach_outcomes(out, "clean_accuracy", correct, labels)
    predicted = np.asarray(arrays["predicted"])
    flagged = np.asarray(arrays["flagged"], bool)
    hits = {}
    for t, target in enumerate(params.targets):
        for a, attack in enumerate(params.attacks):
            for e, epsilon in enumerate(epsilons):
                eps = round(float(epsilon), 6)
                right = predicted[t, a, e] == labels
                success = ~right & correct
                counted = {"accuracy": right, "success": success[correct],
                           "undetected": (success & ~flagged[t, a, e])[correct],
                           "detected": flagged[t, a, e][success]}
                hits[target, attack, eps] = right
                if target == "capsules":
                    per_image.attach_outcomes(out, metric_key("accuracy", target, attack, eps),
                                              right, labels)
                for metric in metrics:
                    key = metric_key(metric, target, attack, eps)
                    if out.get(key) is not None and counted[metric].size:
                        iv.attach(out, key, iv.proportion(counted[metric]))
    pairs, columns = [], []             # every paired difference: one resampling
    for (target, attack, eps), right in hits.items():
        if target != "capsules" or attack != "pgd":
            continue
        key = metric_key("accuracy", "capsules", attack, eps)
        pairs.append((key, "clean_accuracy"))
        columns.append(right.astype(np.float64) - correct)
        votes = hits.get(("votes", attack, eps))
        if votes is not None:
            pairs.append((metric_key("accuracy", "votes", attack, eps), key))
            columns.append(votes.astype(np.float64) - right)
    if columns:
        for (a, b), interval in zip(pairs, iv.bootstrap_means(np.stack(columns, 1))):
            iv.attach_difference(out, a, b, interval)


TECHNIQUE = Technique(
    name="adversarial_robustness",
    citations=cite('goodfellow2015explaining', 'madry2018towards', 'gu2021capsule', 'gu2022explainability'),
    title="Adversarial robustness (FGSM, PGD)",
    title_for=lambda params: "Adversarial robustness (FGSM, PGD" + (
        "; vote attack" if "votes" in params.targets else "") + ")",
    layer="model",
    scope="dataset",
    needs=frozenset({"lengths", "predicted", "reconstruction"}),
    applies_to=frozenset(),
    params_type=Params,
    version=2,
    compute=compute,
    render=lazy("reportgen.techniques.adversarial_robustness.figures", "render", Params),
    variants=variants,
    summarize=summarize,
    render_trend=lazy("reportgen.techniques.adversarial_robustness.figures",
                      "render_trend", Params),
    render_compare=lazy("reportgen.techniques.adversarial_robustness.figures",
                        "render_compare", Params),
    description="Accuracy under L-infinity FGSM and PGD attacks of growing strength, crafted "
                "through the output capsules (routing included) or through the averaged votes "
                "of the primary capsules, bypassing routing (Gu 2022: attacking the votes is "
                "much stronger), always evaluated on the real model; and whether the "
                "class-conditional reconstruction error flags the adversarial inputs (threshold "
                "at the 95th percentile of clean errors).",
)
