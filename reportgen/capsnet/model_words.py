"""How a model scores its classes, in words — read from its description, the one place captions,
findings and pages take these words from.

Every caption that says what a model predicts by, what its class scores are, or what its
gradients are taken of names the model's own mechanism: its head (`Head.kind`, `readout`,
`scores`), its class capsules' activation and its routing weights' own words
(`RoutingWeights.words`) — never another family's. A CapsNet predicts by its longest class
capsule; matrix capsules by their most active one; a capsule head with a learnt readout by the
largest logit that layer reads out of the class capsules; a CNN by its most probable class.

Nothing here imports TensorFlow, and a description without the newer Head fields (`readout`,
`scores`) reads as the defaults they stand for.

- `readout(d)`: "length" | "activation" | "learnt" for a capsule head, "" for a CNN
- `scores_kind(d)`: what the class scores shown are: "lengths" | "activations" | "logits" |
  "probabilities"
- `score_word(d)`: one class's score, as a bar label says it ("length", "activation", "logit",
  "probability")
- `score_words(d)`: the class scores with whose they are ("the class capsules' lengths")
- `scores_phrase(d)`, `score_label(d)`: the scores as plain nouns ("class-capsule lengths",
  "class-capsule length")
- `class_score_words(d, whose)`: one class's score in a sentence
- `prediction_words(d)`: what the prediction is ("the longest class capsule")
- `top2_words(d)`: a two-digit model's top-2 prediction ("the two longest class capsules")
- `strongest_other_words(d)`: the wrong class that scores highest ("the longest other class
  capsule")
- `gradient_words(d)`: what the gradients are taken of ("the class capsule's length")
- `routing_words(d)`, `routing_symbol(d)`: the routing weights into the classes
- `activation_word(layer)`: a capsule layer's activation ("length", "logistic activation")
- `words_of(d)`: all of them as one JSON-able record (ModelData.words) for the pages
"""

from __future__ import annotations

READOUTS = ("length", "activation", "learnt")
SCORES = ("lengths", "activations", "logits", "probabilities")

# the record ModelData.words holds (the pages and findings read it; a record of an older build,
# or a test's ModelData, may lack some): a neutral default for each
NEUTRAL = {
    "readout": "", "scores": "", "score": "score", "scores_words": "the class scores",
    "prediction": "the highest class score", "top2": "the two highest class scores",
    "gradient": "the class score", "routing": "", "routing_symbol": "",
    "primary_activation": "activation",
}


def class_activation(description) -> str:
    """The class capsules' activation ("length", "logistic", "none"); "" for a CNN."""
    classes = description.class_capsules
    return classes.activation if classes is not None else ""


def readout(description) -> str:
    """How the class scores are read from the class capsules: "length" (|v|, Sabour et al.
    2017), "activation" (a logistic unit of its own, Hinton et al. 2018) or "learnt" (a learnt
    layer maps each class capsule's pose to a logit); "" for a head of logits (a CNN)."""
    head = description.head
    if head.kind != "capsules":
        return ""
    declared = getattr(head, "readout", "") or ""
    if declared:
        return declared
    activation = class_activation(description)
    return {"length": "length", "logistic": "activation"}.get(activation, "learnt")


def scores_kind(description) -> str:
    """What the class scores the model's pages show are (the encoder's scores, what the
    predictions chart draws): "lengths", "activations", "logits" or "probabilities" (a CNN's
    class probabilities)."""
    declared = getattr(description.head, "scores", "") or ""
    if declared:
        return declared
    if description.head.kind != "capsules":
        return "probabilities"
    return {"length": "lengths", "activation": "activations", "learnt": "logits"}[
        readout(description)]


def score_word(description) -> str:
    """One class's score, as a bar's label names it: "length", "activation", "logit" or
    "probability"."""
    return {"lengths": "length", "activations": "activation", "logits": "logit",
            "probabilities": "probability"}[scores_kind(description)]


def score_words(description) -> str:
    """The class scores, with whose they are: "the class capsules' lengths", "the class
    capsules' logistic activations", "the logits a learnt layer reads out of the class
    capsules", "the CNN's class probabilities"."""
    kind = scores_kind(description)
    if description.head.kind != "capsules":
        return "the CNN's class logits" if kind == "logits" else "the CNN's class probabilities"
    if kind == "lengths":
        return "the class capsules' lengths"
    if kind == "activations":
        logistic = class_activation(description) == "logistic"
        return ("the class capsules' logistic activations" if logistic
                else "the class capsules' activations")
    if kind == "logits":
        return "the logits a learnt layer reads out of the class capsules"
    return "the class probabilities a learnt layer reads out of the class capsules"


def prediction_words(description) -> str:
    """What the model's prediction is: "the longest class capsule", "the most active class
    capsule", "the largest logit read out of the class capsules", "the most probable class"."""
    if description.head.kind != "capsules":
        return "the CNN's largest logit" if scores_kind(description) == "logits" \
            else "the CNN's most probable class"
    kind = readout(description)
    if kind == "length":
        return "the longest class capsule"
    if kind == "activation":
        return "the most active class capsule"
    return ("the most probable class read out of the class capsules"
            if scores_kind(description) == "probabilities"
            else "the largest logit read out of the class capsules")


def top2_words(description) -> str:
    """A two-digit model's top-2 prediction: "the two longest class capsules", ..."""
    if description.head.kind != "capsules":
        return "the CNN's two most probable classes"
    kind = readout(description)
    if kind == "length":
        return "the two longest class capsules"
    if kind == "activation":
        return "the two most active class capsules"
    return "the two largest logits read out of the class capsules"


def scores_phrase(description) -> str:
    """The class scores as a plural noun: "class-capsule lengths", "class-capsule
    activations", "logits read out of the class capsules", "class probabilities"."""
    kind = scores_kind(description)
    if kind in ("lengths", "activations"):
        return f"class-capsule {kind}"
    if description.head.kind != "capsules":
        return f"class {kind}"
    return f"{'logits' if kind == 'logits' else 'class probabilities'} read out of the class " \
        f"capsules"


def score_label(description) -> str:
    """One class score as an axis names it: "class-capsule length", "class-capsule
    activation", "logit read out of the class capsules", "class probability"."""
    kind = scores_kind(description)
    if kind in ("lengths", "activations"):
        return f"class-capsule {kind[:-1]}"
    if description.head.kind != "capsules":
        return "class logit" if kind == "logits" else "class probability"
    return f"{'logit' if kind == 'logits' else 'class probability'} read out of the class " \
        f"capsules"


def class_score_words(description, whose: str) -> str:
    """The score of one class `whose` ("the true class"): "the length of the class capsule of
    the true class", "the logit a learnt layer reads out of the class capsule of the true
    class", "the CNN's probability of the true class", ..."""
    kind = scores_kind(description)
    capsules = description.head.kind == "capsules"
    if kind == "lengths":
        return f"the length of the class capsule of {whose}"
    if kind == "activations":
        return f"the activation of the class capsule of {whose}"
    if not capsules:
        return f"the CNN's {score_word(description)} of {whose}"
    return f"the {score_word(description)} a learnt layer reads out of the class capsule of {whose}"


def strongest_other_words(description) -> str:
    """The wrong class that scores highest: "the longest other class capsule", "the most active
    other class capsule", "the other class with the largest logit", ..."""
    if description.head.kind == "capsules":
        kind = readout(description)
        if kind == "length":
            return "the longest other class capsule"
        if kind == "activation":
            return "the most active other class capsule"
    return f"the other class with the largest {score_word(description)}"


def gradient_words(description) -> str:
    """What the gradients of a class's score are taken of (the probe's score output): "the
    class capsule's length", "the class capsule's logistic activation", "the class's logit,
    read out of its class capsule by a learnt layer", "the CNN's logit of the class"."""
    if description.head.kind != "capsules":
        return "the CNN's logit of the class"
    kind = readout(description)
    if kind == "length":
        return "the class capsule's length"
    if kind == "activation":
        logistic = class_activation(description) == "logistic"
        return ("the class capsule's logistic activation" if logistic
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


def words_of(description) -> dict[str, str]:
    """Every word above as one record (ModelData.words), for the pages and findings, which
    read the site's data rather than the description."""
    return {"readout": readout(description), "scores": scores_kind(description),
            "score": score_word(description), "scores_words": score_words(description),
            "prediction": prediction_words(description), "top2": top2_words(description),
            "gradient": gradient_words(description), "routing": routing_words(description),
            "routing_symbol": routing_symbol(description),
            "primary_activation": primary_activation_word(description)}


def word(record: dict | None, key: str) -> str:
    """One entry of a words record (`words_of`), the neutral default when it lacks it."""
    value = (record or {}).get(key)
    return value if isinstance(value, str) and value else NEUTRAL[key]
