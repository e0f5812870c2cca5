"""What a network declares, checked on a batch of its own tensors (reportgen.contract says what
it must give; this checks that the values are what its description says they are): the
encoder's class scores are the head's declared `scores`, in their range, and every routing
output is normalised as its RoutingWeights' `sums_over` declares. Run on every build
(reportgen.capsnet.architecture) and by the SDK's family check."""

from __future__ import annotations

import numpy as np

from reportgen.capsnet.description import parents_per_child
from reportgen.capsnet.conv_windows import windows_between
from reportgen.errors import ReportgenError

# How far a declared normalisation or score may be off on float32 tensors.
TOLERANCE = 1e-3


def check_outputs(net, family_name: str, images=None) -> None:
    """Check a built network's own tensors on a batch against what its description declares:
    the encoder's class scores are the head's `scores` (the model output of that name, in its
    range: lengths, activations and probabilities (a softmax, a sigmoid or a length) in
    [0, 1], logits finite) and every routed layer's weights are normalised as its
    RoutingWeights' `sums_over` says. `images` None: a seeded batch of 4 uniform images (the
    declarations hold for any input). One-line ReportgenError naming the family, the tensor and
    what was found."""
    description = net.description
    if images is None:
        images = np.random.default_rng(0).uniform(
            0.0, 1.0, (4, *description.input_shape)).astype(np.float32)
    outputs = {k: np.asarray(v) for k, v in net.model(images, training=False).items()}
    encoded = net.encoder(images, training=False)
    scores = np.asarray(encoded[1] if isinstance(encoded, (list, tuple)) else encoded)
    head = description.head

    def fail(what: str, fix: str):
        raise ReportgenError(
            f"The network of model family '{family_name}' does not give what it declares: "
            f"{what}.", fix=fix)

    declared = outputs.get(head.scores)
    if declared is None or declared.shape != scores.shape or \
            not np.allclose(scores, declared, rtol=1e-4, atol=1e-5):
        fail(f"its encoder's class scores are not its model output '{head.scores}' (the "
             f"head declares scores={head.scores!r})",
             "return the declared scores as the encoder's second output, or declare what it "
             "returns in Head(scores=...): 'lengths', 'activations', 'logits' or "
             "'probabilities'")
    if not np.all(np.isfinite(scores)):
        fail("its class scores are not all finite", "check the network's arithmetic")
    if head.scores in ("lengths", "activations", "probabilities") and \
            (scores.min() < -TOLERANCE or scores.max() > 1 + TOLERANCE):
        fail(f"its class scores, declared {head.scores}, lie in [{scores.min():.4g}, "
             f"{scores.max():.4g}], not in [0, 1]",
             "declare Head(scores='logits') if the encoder returns logits")
    for layer in description.capsule_layers:
        if layer.routing is None or layer.routing.output_of(layer.name) not in outputs:
            continue
        name = layer.routing.output_of(layer.name)
        problem = routing_normalisation_problem(description, layer, outputs[name])
        if problem:
            fail(f"the routing weights '{name}' of {layer.name} are declared summing to 1 over "
                 f"{_SUM_WORDS[layer.routing.sums_over]}, but {problem}",
                 "declare the normalisation they have in RoutingWeights(sums_over=...): "
                 "'parents', 'children' or 'window' (reportgen.sdk.ROUTING_SUMS)")


_SUM_WORDS = {"parents": "each child's parents", "children": "each parent's children",
              "window": "the parent types at each position, per child of each window"}


def routing_normalisation_problem(description, layer, weights) -> str:
    """"" when `weights` (the model output of routed capsule layer `layer`, dense or window
    form) are non-negative and sum to 1 as `layer.routing.sums_over` declares (over every
    child that can route), else what was found, as a clause."""
    w = np.asarray(weights, np.float64)
    if not np.all(np.isfinite(w)):
        return "some are not finite"
    if w.min() < -TOLERANCE:
        return f"some are negative (down to {w.min():.4g})"
    how = layer.routing.sums_over
    if how == "window":
        if w.ndim != 7:
            return (f"they have shape {w.shape}, not the window form (B, Ph, Pw, Kh, Kw, Tin, "
                    f"Tout) this normalisation is defined on")
        sums = w.sum(-1)
    elif w.ndim == 7:
        if how != "parents":
            return "window-form weights are normalised over parents or per window"
        layers = description.capsule_layers
        after = layers[[c.name for c in layers].index(layer.name) + 1]
        w = windows_between(layer, after).densify(w)
    if how == "parents":
        sums = w.sum(-1)
        reach = parents_per_child(description, layer.name) > 0
        sums = sums[:, reach] if sums.shape[-1] == reach.size else sums
    elif how == "children":
        sums = w.sum(-2)
    if sums.size and np.abs(sums - 1).max() > TOLERANCE:
        return f"their sums range over {sums.min():.4g} ... {sums.max():.4g}"
    return ""
