"""How a model scores its classes, in words — read from its description, the one place captions,
findings and pages take these words from.

Every caption that says what a model predicts by, what its class scores are, or what its
gradients are taken of names the model's own mechanism: its head (`Head.kind`, `readout`,
`scores`), its class capsules' activation and its routing weights' own words
(`RoutingWeights.words`) — never another family's. A CapsNet predicts by its longest class
capsule; matrix capsules by their most active one; a capsule head with a learnt readout by the
largest logit that layer reads out of the class capsules; a CNN by its most probable class.

Two kinds of class scores are told apart:
- the scores the pages show (`shown_kind`): what the probe's "lengths" tensor holds, drawn by
  the predictions chart and read by the class-capsule and explanation-fidelity analyses — the
  class capsules' lengths or activations, or, for a learnt readout or a CNN, the class
  probabilities of its logits (reportgen.probe);
- the encoder's scores (`scores_kind`, Head.scores): what the network's encoder returns, which
  the adversarial attack's loss reads ("lengths", "activations", "logits", "probabilities").
Gradients are of the score output (reportgen.contract.score_output): a length, an activation,
or a logit.

Nothing here imports TensorFlow; a description whose Head lacks `readout` or `scores` (an
older plug-in's) reads as the defaults they stand for.

- `readout(d)`: "length" | "activation" | "learnt" for a capsule head, "" for a CNN
- `scores_kind(d)`, `shown_kind(d)`: the encoder's and the pages' class scores
- `score_word(d)`: one shown score, as a bar label says it ("length", "activation",
  "probability")
- `score_words(d)`: the shown scores with whose they are ("the class capsules' lengths")
- `scores_phrase(d)`, `score_label(d)`: the encoder's scores and one shown score as plain nouns
- `class_score_words(d, whose)`: one class's shown score in a sentence
- `prediction_words(d)`: what the prediction is ("the longest class capsule")
- `top2_words(d)`: a two-digit model's top-2 prediction ("the two longest class capsules")
- `strongest_other_words(d)`: the wrong class that scores highest
- `gradient_words(d)`: what the gradients are taken of ("the class capsule's length")
- `routing_words(d)`, `routing_symbol(d)`: the routing weights into the classes
- `activation_word(layer)`: a capsule layer's activation ("length", "logistic activation")
- `words_of(d)`: all of them as one JSON-able record (ModelData.words) for the pages
"""

from __future__ import annotations

READOUTS = ("length", "activation", "learnt")
SCORES = ("lengths", "activations", "logits", "probabilities")
LEARNT = "a learnt layer reads out of the class capsules"

# the record ModelData.words holds (the pages and findings read it; a record of an older build,
# or a test's ModelData, may lack some): a neutral default for each
NEUTRAL = {
    "readout": "", "scores": "", "score": "score", "scores_words": "the class scores",
    "prediction": "the highest class score", "top2": "the two highest class scores",
    "gradient": "the class score", "routing": "", "routing_symbol": "",
    "primary_activation": "activation", "network": "network",
}


def _capsules(description) -> bool:
    return description.head.kind == "capsules"


def class_activation(description) -> str:
    """The class capsules' activation ("length", "logistic", "none"); "" for a CNN."""
    classes = description.class_capsules
    return classes.activation if classes is not None else ""


def _logistic(description) -> bool:
    return class_activation(description) == "logistic"


def readout(description) -> str:
    """How the class scores are read from the class capsules: "length" (|v|, Sabour et al.
    2017), "activation" (a logistic unit of its own, Hinton et al. 2018) or "learnt" (a learnt
    layer maps each class capsule's pose to a logit, Tsai et al. 2020); "" for a head of logits
    (a CNN)."""
    if not _capsules(description):
        return ""
    declared = getattr(description.head, "readout", "") or ""
    if declared:
        return declared
    return {"length": "length", "logistic": "activation"}.get(class_activation(description),
                                                              "learnt")


def scores_kind(description) -> str:
    """What the encoder returns as class scores (Head.scores): "lengths", "activations",
    "logits" or "probabilities" (a CNN's)."""
    declared = getattr(description.head, "scores", "") or ""
    if declared:
        return declared
    if not _capsules(description):
        return "probabilities"
    return {"length": "lengths", "activation": "activations", "learnt": "logits"}[
        readout(description)]


def shown_kind(description) -> str:
    """What the class scores the pages show are (the probe's "lengths"): "lengths",
    "activations", or "probabilities" (of a learnt readout's or a CNN's logits)."""
    kind = readout(description)
    return {"length": "lengths", "activation": "activations"}.get(kind, "probabilities")


def score_word(description) -> str:
    """One shown class score, as a bar's label names it: "length", "activation" or
    "probability"."""
    return {"lengths": "length", "activations": "activation", "probabilities": "probability"}[
        shown_kind(description)]


def score_words(description) -> str:
    """The shown class scores, with whose they are: "the class capsules' lengths", "the class
    capsules' logistic activations", "the class probabilities of the logits a learnt layer
    reads out of the class capsules", "the CNN's class probabilities"."""
    kind = shown_kind(description)
    if not _capsules(description):
        return "the CNN's class probabilities"
    if kind == "lengths":
        return "the class capsules' lengths"
    if kind == "activations":
        return ("the class capsules' logistic activations" if _logistic(description)
                else "the class capsules' activations")
    return f"the class probabilities of the logits {LEARNT}"


def scores_phrase(description) -> str:
    """The encoder's class scores as a plural noun: "class-capsule lengths", "class-capsule
    activations", "logits read out of the class-capsule poses by a learnt layer", "class
    probabilities" (ModelDescription.class_scores)."""
    kind = scores_kind(description)
    if kind in ("lengths", "activations"):
        return f"class-capsule {kind}"
    if not _capsules(description):
        return f"class {kind}"
    what = "logits" if kind == "logits" else "class probabilities"
    return f"{what} read out of the class-capsule poses by a learnt layer"


def score_label(description) -> str:
    """One shown class score as an axis names it: "class-capsule length", "class-capsule
    activation", "class probability"."""
    kind = shown_kind(description)
    return f"class-capsule {kind[:-1]}" if kind != "probabilities" else "class probability"


def encoder_score_label(description) -> str:
    """One of the encoder's class scores as a noun ("class-capsule length", "logit read out of
    the class-capsule poses by a learnt layer", "class probability")."""
    kind = scores_kind(description)
    if kind in ("lengths", "activations"):
        return f"class-capsule {kind[:-1]}"
    if not _capsules(description):
        return "class logit" if kind == "logits" else "class probability"
    what = "logit" if kind == "logits" else "class probability"
    return f"{what} read out of the class-capsule poses by a learnt layer"


def class_score_words(description, whose: str) -> str:
    """The shown score of one class `whose` ("the true class"): "the length of the class
    capsule of the true class", "the probability of the true class from the logits a learnt
    layer reads out of the class capsules", "the CNN's probability of the true class", ..."""
    kind = shown_kind(description)
    if kind == "lengths":
        return f"the length of the class capsule of {whose}"
    if kind == "activations":
        return f"the activation of the class capsule of {whose}"
    if not _capsules(description):
        return f"the CNN's probability of {whose}"
    return f"the probability of {whose} from the logits {LEARNT}"


def prediction_words(description) -> str:
    """What the model's prediction is: "the longest class capsule", "the most active class
    capsule", "the largest logit read out of the class capsules", "the CNN's most probable
    class"."""
    if not _capsules(description):
        return "the CNN's most probable class"
    kind = readout(description)
    if kind == "length":
        return "the longest class capsule"
    if kind == "activation":
        return "the most active class capsule"
    return "the largest logit read out of the class capsules"


def top2_words(description) -> str:
    """A two-digit model's top-2 prediction: "the two longest class capsules", ..."""
    if not _capsules(description):
        return "the CNN's two most probable classes"
    kind = readout(description)
    if kind == "length":
        return "the two longest class capsules"
    if kind == "activation":
        return "the two most active class capsules"
    return "the two largest logits read out of the class capsules"


def strongest_other_words(description) -> str:
    """The wrong class that scores highest: "the longest other class capsule", "the most active
    other class capsule", "the other class with the largest logit", ..."""
    kind = readout(description)
    if kind == "length":
        return "the longest other class capsule"
    if kind == "activation":
        return "the most active other class capsule"
    return "the other class with the largest logit"


def gradient_words(description) -> str:
    """What the gradients of a class's score are taken of (the score output,
    reportgen.contract.score_output): "the class capsule's length", "the class capsule's
    logistic activation", "the class's logit, read out of its class capsule by a learnt
    layer", "the CNN's logit of the class"."""
    if not _capsules(description):
        return "the CNN's logit of the class"
    kind = readout(description)
    if kind == "length":
        return "the class capsule's length"
    if kind == "activation":
        return ("the class capsule's logistic activation" if _logistic(description)
                else "the class capsule's activation")
    return "the class's logit, read out of its class capsule by a learnt layer"


def _into_classes(description):
    routed = [c for c in description.capsule_layers if c.routing is not None]
    return routed[-1].routing if routed else None


def routing_words(description) -> str:
    """What the routing weights into the class capsules are called (the family's
    RoutingWeights.words: "coupling coefficients of dynamic routing", "EM assignments", ...);
    "" when the model has none."""
    weights = _into_classes(description)
    return weights.words if weights is not None else ""


def routing_symbol(description) -> str:
    """The routing weights' letter in formulas ("c" for c_ij); "" without routing."""
    weights = _into_classes(description)
    return weights.symbol if weights is not None else ""


def activation_word(layer) -> str:
    """A capsule layer's activation: "length" (vector capsules), "logistic activation", or ""
    for capsules without one (pose-only)."""
    activation = getattr(layer, "activation", "")
    return {"length": "length", "logistic": "logistic activation"}.get(activation, "")


def primary_activation_word(description) -> str:
    """The primary capsules' activation ("length", "logistic activation"); "activation" when
    the model has none to name."""
    primary = description.primary_capsules
    return (activation_word(primary) if primary is not None else "") or "activation"


def network_word(description) -> str:
    """What the model is, for a count of a site's models: "capsule network" when it has
    capsule layers, else "convolutional network" (a CNN baseline)."""
    return "capsule network" if description.capsule_layers else "convolutional network"


def networks_phrase(records) -> str:
    """"2 capsule networks and 1 convolutional network" for the words records of a site's
    models (`words_of`; a record lacking the word counts as a "network")."""
    counts: dict[str, int] = {}
    for record in records:
        name = word(record, "network")
        counts[name] = counts.get(name, 0) + 1
    return " and ".join(f"{n} {name}{'s' if n != 1 else ''}" for name, n in counts.items())


def words_of(description) -> dict[str, str]:
    """Every word above as one record (ModelData.words), for the pages and findings, which
    read the site's data rather than the description."""
    return {"readout": readout(description), "scores": shown_kind(description),
            "score": score_word(description), "scores_words": score_words(description),
            "prediction": prediction_words(description), "top2": top2_words(description),
            "gradient": gradient_words(description), "routing": routing_words(description),
            "routing_symbol": routing_symbol(description),
            "primary_activation": primary_activation_word(description),
            "network": network_word(description)}


def word(record: dict | None, key: str) -> str:
    """One entry of a words record (`words_of`), the neutral default when it lacks it."""
    value = (record or {}).get(key)
    return value if isinstance(value, str) and value else NEUTRAL[key]
