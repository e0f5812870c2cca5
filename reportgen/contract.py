"""The network contract: what every model family's network provides, and what a family may
declare beyond it. Keras states a layer's contract (`build`, `call`, `get_config`) and Captum an
attribution's (`attribute(inputs, target)`); this is reportgen's for a network, so that a
technique asks for what a family declared instead of trying a method or testing whether a
tensor name is present.

Every network (reportgen.capsnet.network.Network, returned by a family's `build`) provides:
- `model`: image -> dict of named outputs (the standard outputs below that its description
  calls for, and the outputs its family declares in `Family.outputs`);
- `encoder`: image -> [class vectors, class scores], the scores being what the head declares
  (`Head.scores`: "lengths", "activations", "logits" or "probabilities"), the same values as
  the model output of that name; `training_losses`; `description`;
- `decoder` exactly when its description has one (`ModelDescription.decoder`).

The standard outputs, by what the description says (`required_outputs`):
- every conv layer's post-activation maps, under the layer's name;
- the class scores the prediction and its gradients are read from, by the head's readout:
  "lengths" (class capsules scored by their length), "activations" (capsules with an
  activation of their own) or "logits" with "probabilities" (a learnt readout of the class
  capsules' poses, or a CNN's logits head);
- "class_capsules" (B, classes, pose values) when the class capsules have a pose;
  "features" (B, G, dims) for a CNN head with class-by-dimension units;
- per capsule layer on a grid: "<layer>_activations" (B, gh, gw, types) when it has an
  activation, except primary capsules whose activation is their length or that have none
  (pose-only), which give their poses as "primary_capsules" (B, gh * gw * types, pose_size);
- per capsule layer with routing weights into the next: "<layer>_routing", or the output its
  RoutingWeights name, in one of two forms:
    dense   (B, children, parents), children in the layer's capsule order (row-major, types
            fastest), parents in the next layer's, 0 where a child cannot route;
    window  (B, Ph, Pw, Kh, Kw, Tin, Tout), into a convolutional capsule layer: the weight from
            the child at row p * stride + ky, column q * stride + kx, type i to the parent of
            type o at position (p, q);
  normalised as its RoutingWeights' `sums_over` declares ("parents", "children" or "window"),
  which the build checks on a batch (reportgen.capsnet.declarations);
- "reconstruction" with a decoder.

Optional capabilities (`Family.capabilities`, `CAPABILITIES`), each a model feature
techniques may require (Technique.applies_to), checked on every built network
(`check_network`): "votes" (the network's `votes(images)`) and "explanation" (a model output
"explanation"). A family's own outputs (`Family.outputs`) take names outside the contract's.
"""

from __future__ import annotations

import re

from reportgen.errors import ReportgenError

CAPABILITIES = {
    "votes": "the network's `votes(images)` gives (B, children, classes, dims): the votes "
             "u_hat[j|i] of the capsules routed into the class capsules (Sabour et al. 2017, "
             "eq. 2), read by the vote attack (Gu 2021) and the vote agreement",
    "explanation": "the model output 'explanation' (B, classes, gh, gw): the network's own map "
                   "of where each class comes from, on its primary capsules' grid (GraCapsNet's "
                   "E), scored by explanation fidelity",
}

# What a network without the capability lacks, after "it has no" (reportgen.engine.model).
LACKS = {"votes": "votes of its capsules that a technique can read",
         "explanation": "built-in explanation map"}

# Model outputs the contract defines: a family's own outputs take other names.
STANDARD_OUTPUTS = ("lengths", "activations", "logits", "probabilities", "class_capsules",
                    "features", "primary_capsules", "reconstruction", "explanation", "images",
                    "predicted", "scores")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def check_declaration(name: str, capabilities, outputs) -> None:
    """ValueError naming what is wrong with a family's declared capabilities and outputs."""
    unknown = sorted(set(capabilities) - set(CAPABILITIES))
    if unknown:
        raise ValueError(f"family '{name}' declares unknown capabilities {unknown}; "
                         f"known: {sorted(CAPABILITIES)}")
    if not isinstance(outputs, dict):
        raise ValueError(f"family '{name}': outputs must be a dict of output name -> what it "
                         f"holds, not {type(outputs).__name__}")
    for output, meaning in outputs.items():
        if not isinstance(output, str) or not _NAME.match(output):
            raise ValueError(f"family '{name}': output names are identifiers; got {output!r}")
        if output in STANDARD_OUTPUTS or output.endswith(("_activations", "_routing")):
            raise ValueError(f"family '{name}': output '{output}' is a name of the network "
                             f"contract (reportgen.contract); give its own output another name")
        if not isinstance(meaning, str) or not meaning.strip():
            raise ValueError(f"family '{name}': say what output '{output}' holds (shape and "
                             f"meaning) as a non-empty string")


def score_output(description) -> str:
    """The model output a prediction and its gradients are read from, by the head's readout:
    the class-capsule lengths, their activations, or logits (a learnt readout of the class
    poses, a CNN's logits head)."""
    return {"length": "lengths", "activation": "activations",
            "learnt": "logits"}[description.head.readout]


def required_outputs(description) -> dict[str, str]:
    """{model output: why the contract requires it} for a network of `description`."""
    need = {name: "conv layer" for name in description.conv_layer_names}
    need[score_output(description)] = "class scores"
    if description.head.readout == "learnt":
        need["probabilities"] = "class probabilities of the logits"
    need[description.head.scores] = "the class scores its encoder returns"
    if description.class_vectors == "class_capsules":
        need["class_capsules"] = "class-capsule poses"
    elif description.class_vectors == "features":
        need["features"] = "class-by-dimension feature units"
    layers = description.capsule_layers
    primary = description.primary_capsules
    for layer in layers:
        if layer.grid is None:
            continue
        if layer is primary and layer.activation in ("length", "none"):
            need["primary_capsules"] = "primary-capsule poses" + (
                " (their lengths are activations)" if layer.activation == "length" else "")
        elif layer.has_activation:
            need[f"{layer.name}_activations"] = f"activations of capsule layer {layer.name}"
    for layer in description.routed_layers:
        need[layer.routing.output_of(layer.name)] = f"routing weights of {layer.name}"
    if description.decoder is not None:
        need["reconstruction"] = "decoder output"
    if "explanation" in description.capabilities:
        need["explanation"] = "built-in explanation (declared capability)"
    for output in description.outputs:
        need[output] = "declared by its family"
    return need


def check_network(net, family_name: str, described=None) -> None:
    """One-line ReportgenError naming the family and the first thing its built network lacks
    of the contract (its description is `described`, the one `describe(params)` gives; the
    required outputs; the decoder; the votes it declares)."""
    description = net.description
    outputs = getattr(net.model, "output", None)
    names = set(outputs) if isinstance(outputs, dict) else set()

    def fail(what: str):
        raise ReportgenError(
            f"The network of model family '{family_name}' does not keep the network contract: "
            f"{what}.", fix="see reportgen/contract.py and CONTRIBUTING.md's 'Add a model "
                            "family'")

    if described is not None and description != described:
        fail("its Network's description differs from the family's describe(params): build the "
             "layers from the description")
    if not names:
        fail("its `model` must map an image to a dict of named outputs")
    missing = {n: why for n, why in required_outputs(description).items() if n not in names}
    if missing:
        name, why = next(iter(sorted(missing.items())))
        fail(f"its model has no output '{name}' ({why})"
             + (f" and {len(missing) - 1} more" if len(missing) > 1 else ""))
    if (net.decoder is None) != (description.decoder is None):
        fail("its `decoder` must be given exactly when its description has a decoder")
    if "votes" in description.capabilities and not callable(getattr(net, "votes", None)):
        fail("it declares the capability 'votes' but its Network has no `votes` function")

