"""The single forward (and, when needed, backward) pass per (model, step, batch of images).

The tensors are the network contract's (reportgen.contract): family-neutral names read from the
standard outputs every family's network gives, plus the outputs a family declares as its own
(`Family.outputs`, served under their own names to the techniques that name them). No tensor
here belongs to one family.

Every technique reads from the ProbeBatch this returns; none runs the network forward for itself.
The pass keeps only the tensors asked for (the union of what the techniques being computed
declared in `needs`); gradients are taken by a second compiled pass, and only when some "grad"
tensor is asked for: of each image's target class-capsule length with respect to the named conv
layers' outputs. The target is the predicted class ("grad:<layer>"), the true class
("grad[true]:<layer>", when labels are given) or every class in turn ("grad[all]:<layer>").

A technique receives `batch.restricted(needs)`: the same batch, where reading a tensor it did
not declare raises UndeclaredTensorError (tests/test_technique_contract.py runs every technique
that way).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from reportgen.capsnet.compiled import compiled, run_in_buckets
from reportgen.contract import score_output

# Tensors a technique can ask for (Technique.needs): shape for batch B, and the model features
# (reportgen.capsnet.description.FEATURES) a model needs to have the tensor.
TENSORS = {
    "images": ("(B, H, W, C) the inputs, float32 in [0, 1]", ()),
    "conv:<layer>": ("(B, h, w, filters) post-activation output of a conv layer", ()),
    # Primary capsules whose activation is their length, or pose-only ones (`available`).
    "primary_capsules": ("(B, N, D) primary-capsule poses (vectors, or matrices flattened "
                         "row-major), N = gh*gw*types", ("primary_capsules",)),
    "primary_lengths": ("(B, gh, gw, types) primary-capsule lengths on the grid (capsules whose "
                        "activation is their length)", ("primary_capsules",)),
    "class_capsules": ("(B, classes, pose_size) class-capsule poses: vectors, or 4x4 matrices "
                       "flattened row-major (matrix capsules)", ("class_capsules",)),
    # What every model predicts by: class-capsule lengths; the logistic activations of matrix
    # capsules (Hinton et al. 2018); for a CNN its class probabilities.
    "lengths": ("(B, classes) what the model predicts by: class-capsule lengths or "
                "activations; the class probabilities of a learnt readout or a CNN", ()),
    # Family-neutral names (for vector capsules they are the tensors above: see `resolve`).
    "activations": ("(B, classes) the class scores 'lengths' under their family-neutral name",
                    ()),
    "scores": ("(B, classes) the class scores the probe's gradients are taken of: class-capsule "
               "lengths or activations, the logits of a learnt readout or a CNN", ()),
    "activations:<capsules>": ("(B, gh, gw, types) activations of a capsule layer on a grid "
                               "that has them: capsule lengths, or logistic activations",
                               ("primary_capsules",)),
    "routing:<routed>": ("(B, children, parents) the routing weights from a capsule layer into "
                         "the next, whatever its RoutingWeights say they are (coupling "
                         "coefficients c_ij, EM assignments R_ij, ...; 0 where a child cannot "
                         "route); children in the layer's capsule order, parents in the next "
                         "layer's", ("routing_weights",)),
    "routing_entropy:<routed>": ("(B, children) entropy (nats) of each child's routing weights "
                                 "over the parents it can route to (weights normalised per "
                                 "window: the mean over the windows that see the child of "
                                 "the entropy over the window's parent types)",
                                 ("routing_weights",)),
    "predicted": ("(B,) int64 the predicted class: argmax of the lengths (of a CNN's logits)",
                  ()),
    "reconstruction": ("(B, H, W, C) decoder output from the predicted class's capsule",
                       ("decoder",)),
    "explanation": ("(B, classes, gh, gw) the network's own explanation map per class on its "
                    "primary grid (the 'explanation' capability, reportgen.contract)",
                    ("explanation",)),
    "logits": ("(B, classes) class scores before the output nonlinearity: a learnt readout of "
               "the class capsules, or a CNN's logits", ()),
    "probabilities": ("(B, classes) the class probabilities of the logits (softmax, sigmoid or "
                      "length)", ()),
    "features": ("(B, G, dims) a CNN's feature units before its logits: G = classes vectors "
                 "(ConvNet-CR, -CR-SF) or G = 1 (ConvNet-R)", ("class_features",)),
    # Gradients of the class score: the class capsule's length, or a CNN's logit.
    "grad:<layer>": ("(B, h, w, filters) d score[predicted] / d conv output", ()),
    "grad[true]:<layer>": ("(B, h, w, filters) d score[true class] / d conv output (labels "
                           "needed)", ()),
    "grad[all]:<layer>": ("(B, classes, h, w, filters) d score[k] / d conv output, every k",
                          ()),
}
GRADIENT = re.compile(r"^grad(?:\[(true|all)\])?:(.+)$")
LAYER_PLACEHOLDER = "<layer>"
CAPSULES_PLACEHOLDER = "<capsules>"       # every capsule layer on a grid
ROUTED_PLACEHOLDER = "<routed>"           # every capsule layer whose routing weights have paths
_PER_CAPSULE_LAYER = {"activations:": CAPSULES_PLACEHOLDER, "routing:": ROUTED_PLACEHOLDER,
                      "routing_entropy:": ROUTED_PLACEHOLDER}


class UndeclaredTensorError(LookupError):
    """A technique read a probe tensor it did not declare in `needs`."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def grid_capsule_layers(description) -> tuple[str, ...]:
    """The capsule layers on a grid that have an activation ("activations:<capsules>"):
    pose-only layers (Tsai et al. 2020) have none to map."""
    return tuple(c.name for c in description.capsule_layers
                 if c.grid is not None and c.has_activation)


def routed_layers(description) -> tuple[str, ...]:
    """The capsule layers whose routing weights the probe gives: those whose weights lead from
    child to parent (RoutingWeights.paths), whatever kind of routing they are."""
    return tuple(c.name for c in description.routed_layers)


def resolve(name: str, description) -> str:
    """The tensor holding `name` for this model. The family-neutral names are served by the
    tensors of the same meaning where they exist: "activations" is "lengths"; for vector
    capsules (Sabour et al. 2017) "activations:<primary>" is "primary_lengths". Any other name
    is itself."""
    if name == "activations":
        return "lengths"
    primary = description.primary_capsules
    if primary is not None and primary.activation == "length" \
            and name == f"activations:{primary.name}":
        return "primary_lengths"
    return name


def expand_needs(names, description) -> frozenset[str]:
    """Tensor names with "<layer>" replaced by every conv layer of the model, "<capsules>"
    by every capsule layer on a grid, "<routed>" by every routed capsule layer; each resolved
    to the tensor that holds it (`resolve`)."""
    out = set()
    for name in names:
        if name.endswith(":" + LAYER_PLACEHOLDER):
            prefix = name[:-len(LAYER_PLACEHOLDER)]
            out.update(prefix + layer for layer in description.conv_layer_names)
        elif name.endswith(":" + CAPSULES_PLACEHOLDER):
            prefix = name[:-len(CAPSULES_PLACEHOLDER)]
            out.update(prefix + layer for layer in grid_capsule_layers(description))
        elif name.endswith(":" + ROUTED_PLACEHOLDER):
            prefix = name[:-len(ROUTED_PLACEHOLDER)]
            out.update(prefix + layer for layer in routed_layers(description))
        else:
            out.add(name)
    return frozenset(resolve(n, description) for n in out)


def gradient_target(name: str) -> tuple[str, str] | None:
    """("predicted" | "true" | "all", layer) for a gradient tensor name, else None."""
    match = GRADIENT.match(name)
    if match is None:
        return None
    return match.group(1) or "predicted", match.group(2)


def tensor_kind(name: str) -> str:
    """The TENSORS entry `name` is an instance of ("conv:conv1" -> "conv:<layer>")."""
    target = gradient_target(name)
    if target is not None:
        return "grad:<layer>" if target[0] == "predicted" else f"grad[{target[0]}]:<layer>"
    if name.startswith("conv:"):
        return "conv:<layer>"
    for prefix, placeholder in _PER_CAPSULE_LAYER.items():
        if name.startswith(prefix):
            return prefix + placeholder
    return name


def available(name: str, description) -> bool:
    """Whether a model of `description` has the probe tensor `name`."""
    name = resolve(name, description)
    kind = tensor_kind(name)
    if kind not in TENSORS:
        return name in description.outputs      # an output its family declares
    layer = name.split(":", 1)[-1]
    if kind.endswith(":<layer>") and layer not in description.conv_layer_names:
        return False
    if kind.endswith(":" + CAPSULES_PLACEHOLDER) and layer not in grid_capsule_layers(description):
        return False
    if kind.endswith(":" + ROUTED_PLACEHOLDER) and layer not in routed_layers(description):
        return False
    primary = description.primary_capsules
    if name == "primary_lengths" and (primary is None or primary.activation != "length"):
        return False
    if name == "primary_capsules" and (primary is None or primary.activation == "logistic"):
        return False
    if name in ("logits", "probabilities") and description.head.readout != "learnt":
        return False
    return set(TENSORS[kind][1]) <= description.features


def all_tensors(description, gradients: bool = True) -> frozenset[str]:
    """Every tensor the probe can give for the model (predicted-class gradients only)."""
    names = {"images", "primary_capsules", "primary_lengths", "class_capsules", "lengths",
             "scores", "predicted", "reconstruction", "explanation", "logits", "probabilities",
             "features", *description.outputs}
    names.update(f"conv:{n}" for n in description.conv_layer_names)
    names.update(f"activations:{n}" for n in grid_capsule_layers(description))
    names.update(f"{kind}:{n}" for n in routed_layers(description)
                 for kind in ("routing", "routing_entropy"))
    names = {resolve(n, description) for n in names}
    if gradients:
        names.update(f"grad:{n}" for n in description.conv_layer_names)
    return frozenset(n for n in names if available(n, description))


def check_declared(name: str, declared: frozenset[str], reader: str) -> None:
    """UndeclaredTensorError unless `name` is one of the `declared` tensors."""
    if name not in declared:
        raise UndeclaredTensorError(
            f"{reader} read the probe tensor '{name}' without declaring it. Declared "
            f"(Technique.needs): {', '.join(sorted(declared)) or 'none'}. Add it to the "
            "technique's needs.")


def _identity(name: str) -> str:
    return name


class DeclaredTensors(Mapping):
    """A read-only view of a batch's tensors that refuses names outside `declared`. A
    family-neutral name is read from the tensor that holds it (`resolver`, e.g. `resolve` for
    the batch's model); declaring either name allows the read."""

    def __init__(self, tensors: Mapping, declared, reader: str = "this technique",
                 resolver=_identity):
        self._tensors = tensors
        self._declared = frozenset(declared)
        self._reader = reader
        self._resolve = resolver

    def _target(self, name: str) -> str:
        return name if name in self._tensors else self._resolve(name)

    def __getitem__(self, name: str) -> np.ndarray:
        target = self._target(name)
        if target not in self._declared:
            check_declared(name, self._declared, self._reader)
        return self._tensors[target]

    def __contains__(self, name) -> bool:
        target = self._target(name)
        return (name in self._declared or target in self._declared) and target in self._tensors

    def __iter__(self):
        return (n for n in self._tensors if n in self._declared)

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass
class ProbeBatch:
    net: object                      # reportgen.capsnet.network.Network (decoder calls)
    images: np.ndarray
    tensors: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self.tensors:
            return self.tensors[name]
        return self.tensors[self.resolve(name)]

    def __len__(self) -> int:
        return len(self.images)

    def resolve(self, name: str) -> str:
        """The tensor that holds `name` for this batch's model (`resolve`)."""
        description = getattr(self.net, "description", None)
        return name if description is None else resolve(name, description)

    def restricted(self, declared, reader: str = "this technique") -> ProbeBatch:
        """The same batch, where reading a tensor not in `declared` raises
        UndeclaredTensorError (`images` and `net` stay readable)."""
        return ProbeBatch(net=self.net, images=self.images,
                          tensors=DeclaredTensors(self.tensors, declared, reader, self.resolve))


def run_probe(net, images: np.ndarray, needs=None, *, labels=None,
              gradients: bool = True) -> ProbeBatch:
    """One pass over `images` (B, H, W, C) float32 keeping the tensors `needs` names.

    `needs` None keeps every tensor the model has, with predicted-class gradients of every conv
    layer unless `gradients` is False. Names the model cannot have (a reconstruction without a
    decoder) are skipped. `labels` (B,) are the true classes, for "grad[true]:<layer>".
    The forward and the gradients are compiled functions of the network, made once and reused
    for every batch and checkpoint (reportgen.capsnet.compiled).
    """
    description = net.description
    wanted = all_tensors(description, gradients) if needs is None else \
        frozenset(resolve(n, description) for n in needs if available(n, description))
    grads: dict[str, list[str]] = {}
    for name in sorted(wanted):
        target = gradient_target(name)
        if target is not None:
            grads.setdefault(target[0], []).append(target[1])
    if "true" in grads and labels is None:
        raise ValueError("The probe needs the true labels for 'grad[true]:...' tensors.")
    images = np.asarray(images, np.float32)
    tensors = {"images": images}
    if len(images) == 0:
        return ProbeBatch(net=net, images=images, tensors=tensors)
    outputs = run_in_buckets(_forward_pass(net), images,
                             keep=_outputs_read(description, wanted))
    scores = outputs[score_output(description)]
    for target, layers in grads.items():
        layers = _in_model_order(layers, description)
        if target == "all":
            found = run_in_buckets(_gradient_pass(net, every_class=True), images)
        else:
            classes = np.argmax(scores, axis=1) if target == "predicted" else labels
            found = run_in_buckets(_gradient_pass(net, every_class=False), images,
                                   np.asarray(classes, np.int64))
        prefix = {"predicted": "grad:", "true": "grad[true]:", "all": "grad[all]:"}[target]
        for name in layers:
            tensors[prefix + name] = found[name]
    for name in description.conv_layer_names:
        if f"conv:{name}" in wanted:
            tensors[f"conv:{name}"] = outputs[name]
    if wanted & {"primary_capsules", "primary_lengths"}:
        primary = np.asarray(outputs["primary_capsules"])
        if "primary_capsules" in wanted:
            tensors["primary_capsules"] = primary
        if "primary_lengths" in wanted:
            layer = description.primary_capsules
            gh, gw = layer.grid
            tensors["primary_lengths"] = np.sqrt(np.sum(primary ** 2, axis=-1)).reshape(
                -1, gh, gw, layer.types)
    for name in _DIRECT_OUTPUTS + tuple(description.outputs):
        if name in wanted:
            tensors[name] = outputs[name]
    if "lengths" in wanted:                      # what the model predicts by
        tensors["lengths"] = outputs[_prediction_output(description)]
    if "scores" in wanted:
        tensors["scores"] = scores
    tensors.update(_capsule_layer_tensors(description, outputs, wanted))
    if "predicted" in wanted:
        tensors["predicted"] = np.argmax(scores, axis=1).astype(np.int64)
    return ProbeBatch(net=net, images=images, tensors=tensors)


# Tensors that are the model output of the same name (reportgen.contract).
_DIRECT_OUTPUTS = ("class_capsules", "reconstruction", "explanation", "logits", "probabilities",
                   "features")


def _prediction_output(description) -> str:
    """The output "lengths" is read from: the class capsules' lengths or activations, or the
    probabilities of logits (a learnt readout, a CNN)."""
    return "probabilities" if description.head.readout == "learnt" else \
        score_output(description)


def _outputs_read(description, wanted) -> set[str]:
    """The model outputs run_probe reads for the tensors `wanted`, and the class scores (the
    prediction, which predicted-class gradients target); those the model lacks are left out."""
    read = {score_output(description)}
    read.update(n for n in description.conv_layer_names if f"conv:{n}" in wanted)
    if wanted & {"primary_capsules", "primary_lengths"}:
        read.add("primary_capsules")
    read.update(n for n in _DIRECT_OUTPUTS + tuple(description.outputs) if n in wanted)
    if "lengths" in wanted:
        read.add(_prediction_output(description))
    layers = description.capsule_layers
    for layer, _ in zip(layers, layers[1:]):
        if f"activations:{layer.name}" in wanted:
            read.add(f"{layer.name}_activations")
        if {f"routing:{layer.name}", f"routing_entropy:{layer.name}"} & wanted:
            read.add(layer.routing.output_of(layer.name))
    return read


# The compiled passes of the probe (reportgen.capsnet.compiled). Every tensor comes from the
# same function whatever else was asked for: values never depend on which analyses were
# computed together (XLA fuses a pass differently when it keeps other outputs). Gradients are
# taken for every conv layer, in a pass of their own (one more forward: the XLA forward is
# kept where the family's backward is faster without XLA).

def _forward_pass(net):
    """images -> every model output."""
    return compiled(net, "probe_forward",
                    lambda: (lambda x: net.model(x, training=False)), gradients=False)


def _gradient_pass(net, every_class: bool):
    """(images, classes) -> {conv layer: d score[class] / d its output}, or with
    `every_class`, images -> {conv layer: (B, classes, ...) the gradients of every class's
    score, stacked on axis 1}. Scores as `score_output` names them."""
    description = net.description

    def make():
        import tensorflow as tf

        layers = description.conv_layer_names

        def gradients(x, classes=None):
            # persistent when one backward pass per class reads the tape
            with tf.GradientTape(watch_accessed_variables=False,
                                 persistent=every_class) as tape:
                tape.watch(x)  # records the path from the input through every conv output
                outputs = net.model(x, training=False)
                scores = outputs[score_output(description)]
                if every_class:
                    targets = [scores[:, k] for k in range(int(scores.shape[1]))]
                else:
                    target = tf.gather(scores, classes, axis=1, batch_dims=1)
            sources = [outputs[n] for n in layers]
            if not every_class:
                return dict(zip(layers, tape.gradient(target, sources)))
            per_class = [tape.gradient(t, sources) for t in targets]
            del tape
            return {n: tf.stack([g[i] for g in per_class], axis=1) for i, n in enumerate(layers)}

        return (lambda x: gradients(x)) if every_class else gradients

    return compiled(net, ("probe_gradients", every_class), make, gradients=True)


def _capsule_layer_tensors(description, outputs, wanted) -> dict[str, np.ndarray]:
    """The per-capsule-layer tensors asked for that the tensors above do not already hold
    (matrix capsules: outputs "L_activations" and "L_routing", reportgen.families.em.network;
    the routing entropy of any routed layer)."""
    out = {}
    layers = description.capsule_layers
    for layer, after in zip(layers, layers[1:]):
        if f"activations:{layer.name}" in wanted:
            out[f"activations:{layer.name}"] = outputs[f"{layer.name}_activations"]
        asked = {f"routing:{layer.name}", f"routing_entropy:{layer.name}"} & wanted
        if not asked:
            continue
        weights = np.asarray(outputs[layer.routing.output_of(layer.name)])
        windows = None
        if weights.ndim == 7:         # window form into a convolutional capsule layer
            from reportgen.capsnet.conv_windows import windows_between

            windows = windows_between(layer, after)
        if f"routing:{layer.name}" in asked:
            out[f"routing:{layer.name}"] = weights if windows is None else \
                windows.densify(weights)
        if f"routing_entropy:{layer.name}" in asked:
            out[f"routing_entropy:{layer.name}"] = routing_entropy(
                weights, windows, per_window=layer.routing.sums_over == "window")
    return out


def routing_entropy(weights: np.ndarray, windows=None, per_window: bool = False) -> np.ndarray:
    """(B, children) -sum_j w_ij ln w_ij over each child's parents (0 ln 0 = 0), from dense
    weights (B, children, parents) or, with `windows` (reportgen.capsnet.conv_windows
    .ConvWindows), window-form weights (B, Ph, Pw, K, K, Tin, Tout): summed over every window
    that sees the child when the child's weights over all of them form one distribution
    (EM), averaged over those windows when each window's are a distribution of their own
    (`per_window`, Tsai et al. 2020), so that it never exceeds the log of the parents one
    distribution spreads over."""
    w = np.asarray(weights, np.float64)
    terms = -w * np.log(np.where(w > 0, w, 1.0))
    if windows is None:
        return terms.sum(-1).astype(np.float32)
    per_entry = terms.sum(-1)                                   # (B, Ph, Pw, K, K, Tin)
    b, ph, pw, k, _, tin = per_entry.shape
    height, width = windows.child_grid
    children = np.zeros((b, height, width, tin))
    for p in range(ph):
        for q in range(pw):
            y, x = p * windows.stride, q * windows.stride
            children[:, y:y + k, x:x + k] += per_entry[:, p, q]
    if per_window:
        seen = np.maximum(windows.parents_per_position(), 1)[None, :, :, None]
        children = children / seen
    return children.reshape(b, -1).astype(np.float32)


def _in_model_order(layers, description) -> list[str]:
    return [n for n in description.conv_layer_names if n in set(layers)]


def subset(batch: ProbeBatch, index) -> ProbeBatch:
    """The same tensors for a subset of the batch's images (no model work)."""
    index = np.asarray(index)
    return ProbeBatch(net=batch.net, images=batch.images[index],
                      tensors={k: v[index] for k, v in batch.tensors.items()})


def empty_batch(net) -> ProbeBatch:
    """A batch of no images: what checkpoint-scope techniques (e.g. conv kernels) receive."""
    shape = (0, *net.description.input_shape)
    return ProbeBatch(net=net, images=np.zeros(shape, np.float32),
                      tensors={"images": np.zeros(shape, np.float32)})
