"""What a model is, told in terms every analysis can read — without TensorFlow.

A ModelDescription lists a network's conv layers, its capsule layers (pose kind, grid, types,
what the activation is, what routing weights lead into the next layer), its classifier head and
its decoder, and the receptive field of every grid cell through all the layers before it.
Techniques declare which features they need (`FEATURES`) and read the geometry from here;
renderers place grid maps on the input with it. Nothing in an analysis matches layer names.

`describe(params)` builds the description from the parameter file alone (a planner can use it
without importing TensorFlow), by the model's family (reportgen.settings.families; each family
describes its own networks); `reportgen.capsnet.architecture.build_capsnet` builds the Keras
model from the same description, so the two cannot drift (tests/test_description.py checks
every shape against the built model).

Capsule families and their words (one word per concept):
- vector capsules (Sabour, Frosst & Hinton 2017): pose = a vector, activation = its length;
- matrix capsules (Hinton, Sabour & Frosst 2018): pose = a 4x4 matrix, activation = a logistic
  unit;
- capsules without a pose (Hahn, Pyeon & Kim 2019's Self-Routing class capsules): an activation
  only; it is then the class score, and no vector per class is left to study;
- pose-only capsules (Tsai, Srivastava, Goh & Salakhutdinov 2020's inverted dot-product
  attention routing): a pose (a p x q matrix, LayerNorm-ed) and no activation; the class scores
  are read out of the class poses by a learnt layer (Head.readout "learnt").
The class scores come from the class capsules' lengths, their activations, or a learnt readout
of their poses into logits (a capsule head all the same: every class-capsule analysis reads
its poses); the encoder's second output is declared (Head.scores) and checked on a batch.
What a routed layer's routing weights are (coupling coefficients of dynamic routing, EM
assignments, attention weights, …) is not a closed list: each family describes its own in a
RoutingWeights (what they are called, over which axis they sum to 1, whether routing paths
can be followed through them) and names the kinds it has in its Family (`routing`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from reportgen.contract import CAPABILITIES
from reportgen.contract import LACKS as CAPABILITY_LACKS
from reportgen.errors import ReportgenError

# "matrix": a p x q pose (CapsuleLayer.pose_shape), held flattened row-major; "matrix4x4" is
# the 4 x 4 matrix of Hinton et al. 2018; "none": an activation only (pose_size 0)
POSE_KINDS = ("vector", "matrix", "matrix4x4", "none")
MATRIX_POSES = ("matrix", "matrix4x4")
# "none": pose-only capsules, which have no activation of their own
ACTIVATION_KINDS = ("length", "logistic", "none")
# Over which axis routing weights sum to 1 (RoutingWeights.sums_over):
#   "parents":  each child's weights over every parent it can route to (dense (B, children,
#               parents), or the window form of a convolutional capsule layer whose children
#               compete over all the windows that see them, Hinton et al. 2018's EM);
#   "children": each parent's weights over its children (or the grid nodes it pools);
#   "window":   window form only (B, Ph, Pw, Kh, Kw, Tin, Tout): at each parent position, each
#               child in that position's kernel window has weights over the Tout parent types
#               there that sum to 1, so a child seen by several windows has one distribution per
#               window (Tsai et al. 2020's convolutional capsule layer).
ROUTING_SUMS = ("parents", "children", "window")
HEAD_KINDS = ("capsules", "logits")
# How a capsule head's class scores are read from its class capsules (Head.readout).
READOUTS = ("length", "activation", "learnt")
# What a network's encoder returns as its class scores (Head.scores).
SCORE_KINDS = ("lengths", "activations", "logits", "probabilities")
PADDINGS = ("valid", "same")
# Part of every model's cache key (reportgen.engine.model.model_digest): bump it when the layers
# compute other numbers for the same params and weights, so that stored results are computed
# again. 2: exact capsule lengths (reportgen.capsnet.ops.safe_norm, no epsilon floor).
NUMERICS_VERSION = 2

# What a technique may require (Technique.applies_to); a description has a subset of these.
FEATURES = {
    "conv": "at least one plain convolutional layer (not the one that forms capsules)",
    "capsules": "at least one capsule layer",
    "capsule_activations": "every capsule layer has an activation (a length or a unit of its "
                           "own), not poses only",
    "grid_activations": "a capsule layer on a spatial grid has activations (a length or a unit "
                        "of its own) to map",
    "vector_capsules": "capsules are vectors whose length is their activation",
    "matrix_capsules": "capsules are 4x4 pose matrices with a logistic activation",
    "primary_capsules": "a capsule layer on a spatial grid",
    "capsule_maps": "primary capsules on a grid of more than one cell, so that their "
                    "activations form a map over the input",
    "class_capsules": "the classifier head is a layer of class capsules (scored by their "
                      "length, their activation or a learnt readout of their poses)",
    "logits": "the classifier head gives logits (a plain CNN)",
    "routing_weights": "a capsule layer has routing weights into the next layer",
    "routing_paths": "every routed layer's weights lead from its children to its parents, so "
                     "routing paths lead from the primary capsules to the classes",
    "own_explanation": "an explanation of its own to test: routing paths from its primary "
                       "capsules to the classes (Routing Path Visualization), or an explanation "
                       "map its family builds in",
    "decoder": "a reconstruction decoder",
    "class_features": "a CNN head whose features are classes x dims units (ConvNet-R, -CR, -CR-SF)",
    "class_vectors": "a vector per class to study (a class capsule's pose, or a CNN's feature "
                     "units)",
    # the optional capabilities a family declares (reportgen.contract)
    **CAPABILITIES,
}


# Besides these, every kind of routing weights a registered family declares is a feature
# (RoutingWeights.kind; `feature_words`, `lacks_words`).


# What a model without the feature lacks, for "not applicable" notes ("This model has no …"),
# most fundamental first: a CNN lacks capsules, so its routing weights need not be named too;
# a decoder's analyses name the missing decoder before the kind of capsules they decode.
LACKS = {
    "capsules": "capsule layers",
    "decoder": "reconstruction decoder",
    "class_vectors": "vector per class (no class-capsule poses and no class-by-dimension "
                     "features)",
    "class_capsules": "class capsules",
    "vector_capsules": "vector capsules (whose lengths are activations)",
    "matrix_capsules": "matrix capsules",
    "primary_capsules": "capsules on a spatial grid",
    "capsule_maps": "capsule grid of more than one cell",
    "capsule_activations": "capsule activations (its capsules are poses only)",
    "grid_activations": "activations on its capsule grids (its grid capsules are poses only)",
    "routing_weights": "routing weights",
    "routing_paths": "routing weights that lead from the primary capsules to the classes",
    "own_explanation": "explanation of its own (capsule activations along routing paths from "
                       "its primary capsules to the classes, or an explanation map built in)",
    "conv": "plain convolutional layer before its capsules",
    "class_features": "class-by-dimension feature units (a ConvNet-R, -CR or -CR-SF head)",
    "logits": "logits head (it is not a plain CNN)",
    **CAPABILITY_LACKS,
}


@dataclass(frozen=True)
class ReceptiveField:
    """The input pixels a grid cell sees: cell (r, c) sees rows start[0] + r*stride[0] …
    start[0] + r*stride[0] + size[0] - 1, and columns likewise on axis 1. A negative start
    means the first cells also see zero padding."""

    start: tuple[int, int]
    size: tuple[int, int]
    stride: tuple[int, int]

    @property
    def rows(self) -> tuple[int, int, int]:
        """(start, size, stride) along the rows, as reportgen.figures.placement takes it."""
        return (self.start[0], self.size[0], self.stride[0])

    @property
    def cols(self) -> tuple[int, int, int]:
        return (self.start[1], self.size[1], self.stride[1])

    def centre(self, row: int, col: int) -> tuple[float, float]:
        """Input (y, x) of the centre of cell (row, col)'s field."""
        return tuple(s + i * t + (z - 1) / 2.0 for s, z, t, i in
                     zip(self.start, self.size, self.stride, (row, col)))

    def through(self, kernel: tuple[int, int], stride: tuple[int, int],
                pad: tuple[int, int]) -> ReceptiveField:
        """The field of a layer's output cells when this is the field of its input cells.

        Output cell q reads input cells q*s - pad … q*s - pad + k - 1, so its field starts
        pad cells of this field's stride earlier and grows by (k - 1) input strides.
        """
        return ReceptiveField(
            start=tuple(a - p * t for a, p, t in zip(self.start, pad, self.stride)),
            size=tuple(z + (k - 1) * t for z, k, t in zip(self.size, kernel, self.stride)),
            stride=tuple(t * s for t, s in zip(self.stride, stride)))


INPUT_FIELD = ReceptiveField(start=(0, 0), size=(1, 1), stride=(1, 1))


def conv_output(size: int, kernel: int, stride: int, padding: str) -> tuple[int, int]:
    """(output size, padding before the first input) of one axis of a Keras convolution."""
    if padding == "valid":
        return (size - kernel) // stride + 1, 0
    if padding == "same":        # TensorFlow's rule: the extra padding goes after
        out = math.ceil(size / stride)
        return out, max((out - 1) * stride + kernel - size, 0) // 2
    raise ValueError(f"padding must be one of {PADDINGS}. Received: {padding}")


@dataclass(frozen=True)
class ConvLayer:
    """A convolution: output (grid, filters) after `activation`. `capsules` names the capsule
    layer whose poses its channels are ("" for a plain conv layer)."""

    name: str
    filters: int
    kernel_size: tuple[int, int]
    strides: tuple[int, int]
    padding: str
    activation: str
    grid: tuple[int, int]
    receptive_field: ReceptiveField
    capsules: str = ""


@dataclass(frozen=True)
class RoutingWeights:
    """What the routing weights from a capsule layer into the next one are, in terms any
    analysis can read. A family describes its own kind (reportgen.families); nothing else needs
    to know it.

    kind:       the model feature this kind of routing gives (Technique.applies_to), e.g.
                "dynamic_routing"; one name per kind, whatever its settings
    words:      what the weights are called: "coupling coefficients of dynamic routing"
    lacks:      what a model without this kind has not, after "it has no": "dynamic routing"
    sums_over:  "parents": each child's weights over the parents it routes to sum to 1;
                "children": each parent's weights over its children (or grid nodes) do;
                "window": window-form weights (B, Ph, Pw, Kh, Kw, Tin, Tout), each child of
                each parent position's kernel window summing to 1 over the Tout parent types
                at that position (ROUTING_SUMS says more). The build checks the declared
                normalisation on the network's own tensors (reportgen.contract).
    paths:      the weights lead from each child to each parent, so routing paths can be
                followed through them; the probe then gives them as "routing:<layer>"
                (B, children, parents) and their entropy as "routing_entropy:<layer>"
    iterations: routing iterations (0: the weights are not found by iterating)
    symbol:     the weights' letter in formulas and captions ("c" for c_ij)
    output:     the built model's output that holds them ("" = "<layer>_routing"); a probe
                tensor of that name (e.g. "coupling") is then the same tensor
    """

    kind: str
    words: str
    lacks: str
    sums_over: str
    paths: bool
    iterations: int = 0
    symbol: str = "w"
    output: str = ""

    def __post_init__(self):
        _check(self.sums_over, ROUTING_SUMS, f"routing weights {self.kind!r}: sums_over")
        if not self.kind or self.kind in FEATURES:
            raise ValueError(f"Routing weights need a kind of their own (not one of "
                             f"{sorted(FEATURES)}). Received: {self.kind!r}")

    def output_of(self, layer: str) -> str:
        """The name of the model output holding the weights from capsule layer `layer`."""
        return self.output or f"{layer}_routing"


@dataclass(frozen=True)
class CapsuleLayer:
    """A layer of capsules. `grid` is None for a class-capsule layer (one capsule per class).

    pose:        "vector" (pose_size values), "matrix" (a pose_shape = (p, q) matrix held as
                 pose_size = p * q values, row-major), "matrix4x4" (= "matrix" of (4, 4)) or
                 "none" (an activation only, pose_size = 0)
    activation:  "length" (|pose|, Sabour et al. 2017), "logistic" (a separate unit, Hinton
                 et al. 2018; Hahn et al. 2019) or "none" (pose-only capsules, such as the
                 LayerNorm-ed poses of Tsai et al. 2020)
    routing:     what the routing weights from this layer into the next one are
                 (RoutingWeights), or None (the last layer, or no routing)
    kernel_size, strides: a convolutional capsule layer's kernel and stride over the grid of
                 the capsule layer before it (Hinton et al. 2018's ConvCaps); None otherwise
    coordinate_addition: class capsules of EM routing whose votes get the scaled centre of
                 their child's receptive field added to the pose entries COORDINATE_ENTRIES
                 (Hinton et al. 2018, coordinate addition)
    """

    name: str
    pose: str
    grid: tuple[int, int] | None
    types: int
    pose_size: int
    activation: str
    routing: RoutingWeights | None = None
    receptive_field: ReceptiveField | None = None
    kernel_size: tuple[int, int] | None = None
    strides: tuple[int, int] | None = None
    coordinate_addition: bool = False
    pose_shape: tuple[int, int] | None = None

    def __post_init__(self):
        if self.pose == "matrix4x4" and self.pose_shape is None:
            object.__setattr__(self, "pose_shape", (4, 4))
        if self.pose_shape is not None:
            object.__setattr__(self, "pose_shape", tuple(int(v) for v in self.pose_shape))

    @property
    def has_activation(self) -> bool:
        """Whether the capsules have an activation (a length or a unit of their own)."""
        return self.activation != "none"

    @property
    def capsules(self) -> int:
        """How many capsules: grid cells x types (row-major, types fastest), or types."""
        return self.types * (self.grid[0] * self.grid[1] if self.grid else 1)


@dataclass(frozen=True)
class Head:
    """The classifier's output, from `layer`.

    kind:     "capsules" (a layer of class capsules) or "logits" (a CNN's output layer)
    readout:  how a capsule head's class scores are read from its class capsules: "length"
              (|v_j|, Sabour et al. 2017), "activation" (their own unit: Hinton et al. 2018's
              a_j) or "learnt" (a learnt layer maps each class pose to a logit, Tsai et al.
              2020). "" = from the class capsules' activation ("length" or "activation");
              a logits head's is "learnt".
    scores:   what the network's encoder returns as its class scores: "lengths",
              "activations", "logits" or "probabilities". "" = "lengths", "activations" or
              "logits" by the readout; a logits head's encoder returns "probabilities". The
              build checks it on a batch (lengths, activations and probabilities in [0, 1],
              logits finite; the encoder's scores equal the model output of that name).
    """

    kind: str
    classes: int
    layer: str
    readout: str = ""
    scores: str = ""


@dataclass(frozen=True)
class DecoderDescription:
    """Reconstruction from the masked class capsules, flattened to `input_size` values."""

    input_size: int
    units: tuple[int, ...]
    output_shape: tuple[int, int, int]


@dataclass(frozen=True)
class ModelDescription:
    input_shape: tuple[int, int, int]
    conv_layers: tuple[ConvLayer, ...]
    capsule_layers: tuple[CapsuleLayer, ...]
    head: Head
    decoder: DecoderDescription | None = None
    # A CNN's feature layer before its logits (Gu 2022's ConvNet-R, -CR, -CR-SF: the
    # counterpart of the class capsules), as (vectors, dims): (classes, dims) when each class
    # has its own units (CR, CR-SF), (1, classes * dims) when they are not split by class (R).
    class_features: tuple[int, int] | None = None
    # What the family declares beyond its layers (reportgen.contract; `describe` fills them
    # from the family): optional capabilities ("votes", "explanation") and its own model
    # outputs, by name.
    capabilities: frozenset[str] = frozenset()
    outputs: tuple[str, ...] = ()
    # What this description cannot express and the pages therefore leave out, one sentence
    # each ("BatchNorm after every convolution: its statistics are not shown"; "a routing bias
    # added after the softmax: the routing weights shown are those before it").
    leaves_out: tuple[str, ...] = ()

    def __post_init__(self):
        for layer in self.capsule_layers:
            _check(layer.pose, POSE_KINDS, f"capsule layer {layer.name}: pose")
            _check(layer.activation, ACTIVATION_KINDS, f"capsule layer {layer.name}: activation")
            if (layer.pose == "none") != (layer.pose_size == 0) or \
                    (layer.pose == "none" and layer.activation != "logistic"):
                raise ValueError(f"capsule layer {layer.name}: a capsule without a pose has "
                                 f"pose_size 0 and an activation of its own, and only it. "
                                 f"Received: pose {layer.pose!r}, pose_size {layer.pose_size}, "
                                 f"activation {layer.activation!r}")
            if layer.pose in MATRIX_POSES:
                shape = layer.pose_shape
                if shape is None or len(shape) != 2 or min(shape) < 1 or \
                        shape[0] * shape[1] != layer.pose_size:
                    raise ValueError(f"capsule layer {layer.name}: a matrix pose gives its "
                                     f"pose_shape (p, q) with p * q = pose_size. Received: "
                                     f"pose_shape {shape!r}, pose_size {layer.pose_size}")
            elif layer.pose_shape is not None:
                raise ValueError(f"capsule layer {layer.name}: pose_shape is for matrix poses. "
                                 f"Received: pose {layer.pose!r}, pose_shape {layer.pose_shape}")
            if layer.routing is not None and not isinstance(layer.routing, RoutingWeights):
                raise ValueError(f"capsule layer {layer.name}: routing must be RoutingWeights. "
                                 f"Received: {layer.routing!r}")
        _check(self.head.kind, HEAD_KINDS, "head")
        object.__setattr__(self, "head", _filled_head(self.head, self.capsule_layers))
        unknown = sorted(set(self.capabilities) - set(CAPABILITIES))
        if unknown:
            raise ValueError(f"capabilities must be among {sorted(CAPABILITIES)}. "
                             f"Received: {unknown}")
        object.__setattr__(self, "capabilities", frozenset(self.capabilities))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        if isinstance(self.leaves_out, str) or \
                not all(isinstance(s, str) and s.strip() for s in self.leaves_out):
            raise ValueError("leaves_out must be a sequence of sentences (non-empty strings). "
                             f"Received: {self.leaves_out!r}")
        object.__setattr__(self, "leaves_out", tuple(self.leaves_out))
        names = [layer.name for layer in (*self.conv_layers, *self.capsule_layers)]
        if len(set(names)) != len(names):
            raise ValueError(f"Layer names must be unique. Received: {names}")

    # --- what the model has -------------------------------------------------------------------
    @property
    def routing_iterations(self) -> int | None:
        """The routing iterations of its routed layers (the most, if they differ); None when
        no layer's weights are found by iterating."""
        counts = [c.routing.iterations for c in self.capsule_layers
                  if c.routing is not None and c.routing.iterations]
        return max(counts) if counts else None

    @property
    def features(self) -> frozenset[str]:
        """The FEATURES this model has (what Technique.applies_to is checked against)."""
        found = set()
        if self.plain_conv_layers:
            found.add("conv")
        if self.capsule_layers:
            found.add("capsules")
        poses = {(c.pose, c.activation) for c in self.capsule_layers}
        if poses == {("vector", "length")}:
            found.add("vector_capsules")
        if poses and all(p in MATRIX_POSES and a == "logistic" for p, a in poses):
            found.add("matrix_capsules")
        if self.capsule_layers and all(c.has_activation for c in self.capsule_layers):
            found.add("capsule_activations")
        if any(c.grid is not None and c.has_activation for c in self.capsule_layers):
            found.add("grid_activations")
        primary = self.primary_capsules
        if primary is not None:
            found.add("primary_capsules")
            if primary.grid[0] * primary.grid[1] > 1:
                found.add("capsule_maps")
        found.add("class_capsules" if self.head.kind == "capsules" else "logits")
        routing = [c.routing for c in self.capsule_layers if c.routing is not None]
        if routing:
            found.add("routing_weights")
            found.update(r.kind for r in routing)
            if all(r.paths for r in routing):
                found.add("routing_paths")
        if self.decoder is not None:
            found.add("decoder")
        if self.class_features is not None:
            found.add("class_features")
        if self.class_vectors is not None:
            found.add("class_vectors")
        found.update(self.capabilities)
        if "explanation" in found or ("routing_paths" in found and primary is not None
                                      and "capsule_activations" in found):
            found.add("own_explanation")
        return frozenset(found)

    @property
    def class_vectors(self) -> str | None:
        """The probe tensor holding a vector per class: "class_capsules" (the class capsules'
        poses; matrices read as 16 values), "features" (a CNN's class-by-dimension units,
        `class_features`), or None (class capsules without a pose, a CNN's bare logits)."""
        if self.class_features is not None:
            return "features"
        classes = self.class_capsules
        return "class_capsules" if classes is not None and classes.pose != "none" else None

    @property
    def class_scores(self) -> str:
        """What scores the classes, in words (the prediction is the largest score): the class
        capsules' lengths or activations, a learnt readout's logits, or a CNN's class
        probabilities (reportgen.capsnet.model_words.scores_phrase)."""
        from reportgen.capsnet.model_words import scores_phrase

        return scores_phrase(self)

    @property
    def routed_layers(self) -> tuple[CapsuleLayer, ...]:
        """The capsule layers whose routing weights lead from child to parent (`paths`), in
        model order: those the probe gives "routing:<layer>" for."""
        return tuple(c for c in self.capsule_layers if c.routing is not None and c.routing.paths)

    @property
    def conv_layer_names(self) -> tuple[str, ...]:
        """Every conv layer (the one forming capsules too), input side first."""
        return tuple(c.name for c in self.conv_layers)

    @property
    def plain_conv_layers(self) -> tuple[ConvLayer, ...]:
        """The conv layers that do not form capsules (shown as feature maps and kernels)."""
        return tuple(c for c in self.conv_layers if not c.capsules)

    @property
    def primary_capsules(self) -> CapsuleLayer | None:
        """The first capsule layer on a grid (the primary capsules), if any."""
        return next((c for c in self.capsule_layers if c.grid is not None), None)

    @property
    def class_capsules(self) -> CapsuleLayer | None:
        """The capsule layer of the head, if the head is capsules."""
        if self.head.kind != "capsules":
            return None
        return next((c for c in self.capsule_layers if c.name == self.head.layer), None)

    @property
    def classes(self) -> int:
        return self.head.classes

    def layer(self, name: str) -> ConvLayer | CapsuleLayer:
        for layer in (*self.conv_layers, *self.capsule_layers):
            if layer.name == name:
                return layer
        known = ", ".join((*self.conv_layer_names, *(c.name for c in self.capsule_layers)))
        raise ReportgenError(f"This model has no layer '{name}'.", expected=f"one of: {known}",
                             received=repr(name))

    def receptive_field(self, name: str) -> ReceptiveField | None:
        """The receptive field of the grid cells of layer `name` (None for a class layer)."""
        return self.layer(name).receptive_field


def _filled_head(head: Head, capsule_layers) -> Head:
    """`head` with its readout and scores filled in from its kind and class capsules, and
    checked against them."""
    _check(head.readout, ("", *READOUTS), "head readout")
    _check(head.scores, ("", *SCORE_KINDS), "head scores")
    if head.kind == "logits":
        if head.readout not in ("", "learnt"):
            raise ValueError(f"a logits head reads its scores by a learnt layer. Received: "
                             f"readout {head.readout!r}")
        return replace(head, readout="learnt", scores=head.scores or "probabilities")
    classes = next((c for c in capsule_layers if c.name == head.layer), None)
    if classes is None:
        raise ValueError(f"the head's layer {head.layer!r} is not one of the capsule layers "
                         f"{[c.name for c in capsule_layers]}")
    own = {"length": "length", "logistic": "activation", "none": ""}[classes.activation]
    readout = head.readout or own
    if not readout:
        raise ValueError(f"class capsules {classes.name!r} have no activation (pose-only): "
                         f"say how their scores are read, Head(readout='learnt')")
    if readout != "learnt" and readout != own:
        raise ValueError(f"class capsules {classes.name!r} with activation "
                         f"{classes.activation!r} cannot be read out by {readout!r}: use "
                         f"{own!r} or 'learnt'")
    if readout == "learnt" and classes.pose == "none":
        raise ValueError(f"class capsules {classes.name!r} have no pose for a learnt readout")
    default = {"length": "lengths", "activation": "activations", "learnt": "logits"}[readout]
    return replace(head, readout=readout, scores=head.scores or default)


def one_hop_of_lengths(description) -> bool:
    """Routing from the primary capsules straight into class capsules whose activations are
    their lengths (Sabour et al. 2017): Routing Path Visualization's formula in l_i, c_ij, l_j
    (reportgen.techniques.rpv)."""
    routed, classes = description.routed_layers, description.class_capsules
    return len(routed) == 1 and routed[0] is description.primary_capsules \
        and classes is not None and classes.activation == "length"


def parents_per_child(description, name: str):
    """(children,) how many parents each capsule of routed layer `name` can route to: every
    class for the class capsules; for a convolutional capsule layer, the output types of every
    position whose kernel covers the child (0 for an edge no window reaches). Children are
    numbered (row * W + column) * types + type. A kernel over a zero-padded grid (Self-Routing)
    is told by the receptive fields: the layer's starts `pad` cells of the grid before it
    earlier. NumPy only."""
    import numpy as np

    layers = description.capsule_layers
    index = [c.name for c in layers].index(name)
    layer, after = layers[index], layers[index + 1]
    if after.kernel_size is None:
        return np.full(layer.capsules, after.types, np.int64)
    counts = []
    for axis, (size, kernel, stride) in enumerate(zip(layer.grid, after.kernel_size,
                                                      after.strides)):
        pad = (layer.receptive_field.start[axis] - after.receptive_field.start[axis]) \
            // layer.receptive_field.stride[axis]
        parents = after.grid[axis]
        counts.append(np.array([sum(1 for p in range(parents)
                                    if 0 <= y + pad - p * stride < kernel)
                                for y in range(size)]))
    per_position = counts[0][:, None] * counts[1][None, :] * after.types
    return np.repeat(per_position.reshape(-1), layer.types).astype(np.int64)


def routing_spread(description, name: str):
    """(children,) over how many parents one routing distribution of each child of routed
    layer `name` spreads, as its RoutingWeights declare: every parent it can reach
    (`parents_per_child`) for weights normalised over parents; the parent types of one window
    for weights normalised per window (0 for a child no window sees). Its log is the entropy
    of uniform routing, the most a child's routing entropy can be. NumPy only."""
    import numpy as np

    reach = parents_per_child(description, name)
    layer = description.layer(name)
    if layer.routing is not None and layer.routing.sums_over == "window":
        layers = description.capsule_layers
        after = layers[[c.name for c in layers].index(name) + 1]
        return np.where(reach > 0, after.types, 0).astype(np.int64)
    return reach


def routing_kinds() -> dict:
    """{kind: RoutingWeights} of every kind of routing the registered families declare."""
    from reportgen.settings.families import family, registered

    return {w.kind: w for name in registered() for w in family(name).routing}


def feature_words() -> dict[str, str]:
    """Every feature a technique may require: FEATURES, then the routing kinds."""
    return {**FEATURES, **{k: f"the routing weights are {w.words}"
                           for k, w in routing_kinds().items()}}


def lacks_words() -> dict[str, str]:
    """What a model without each feature lacks, most fundamental first: LACKS, with what a
    model without each kind of routing lacks before its geometry (a plug-in's own technique on
    another family names the routing it needs, not the grid)."""
    kinds = {k: w.lacks for k, w in routing_kinds().items()}
    words = {}
    for name, text in LACKS.items():
        if name == "capsule_maps":
            words.update(kinds)
        words[name] = text
    return {**words, **kinds}


def _check(value, allowed, what: str) -> None:
    if value not in allowed:
        raise ValueError(f"{what} must be one of {allowed}. Received: {value!r}")


def conv_stack(input_shape, layers, field: ReceptiveField = INPUT_FIELD) -> tuple[ConvLayer, ...]:
    """ConvLayers for (name, filters, kernel, stride, padding, activation, capsules) tuples
    applied in order to an input of `input_shape`, each with its grid and receptive field."""
    height, width = input_shape[:2]
    out = []
    for name, filters, kernel, stride, padding, activation, capsules in layers:
        h, top = conv_output(height, kernel, stride, padding)
        w, left = conv_output(width, kernel, stride, padding)
        if h < 1 or w < 1:
            raise ReportgenError(f"Layer {name} has no output: its {kernel}x{kernel} kernel is "
                                 f"larger than its {height}x{width} input.",
                                 fix="Use smaller kernels or strides, or a larger input.")
        field = field.through((kernel, kernel), (stride, stride), (top, left))
        out.append(ConvLayer(name=name, filters=filters, kernel_size=(kernel, kernel),
                             strides=(stride, stride), padding=padding, activation=activation,
                             grid=(h, w), receptive_field=field, capsules=capsules))
        height, width = h, w
    return tuple(out)


def describe(params) -> ModelDescription:
    """The description of the model `params` (reportgen.settings.model_params.ModelParams)
    defines, by its family (reportgen.settings.families). Layer names are those of the built
    Keras model."""
    from reportgen.settings.families import family_of

    family = family_of(params)
    description = family.describe(params)
    # what the family declares of its networks (reportgen.contract), whatever describe set
    return replace(description, capabilities=description.capabilities | family.capabilities,
                   outputs=tuple(dict.fromkeys((*description.outputs, *family.outputs))))


def capsule_convs(params, channels_per_type: int, activation: str) -> tuple[ConvLayer, ...]:
    """The `[[conv]]` layers (each with its `padding`), then "primary_conv" forming the primary
    capsules ("primary_caps": `primary.types` x `channels_per_type` channels after
    `activation`, no padding)."""
    p = params.primary
    return conv_stack(params.input_shape, [
        *((f"conv{i + 1}", conv.filters, conv.kernel_size, conv.strides, conv.padding,
           conv.activation, "") for i, conv in enumerate(params.conv)),
        ("primary_conv", p.types * channels_per_type, p.kernel_size, p.strides, "valid",
         activation, "primary_caps")])


def decoder_of(params, input_size: int) -> DecoderDescription | None:
    """The `[decoder]` of `params` reconstructing from `input_size` values, or None."""
    if not params.decoder.enabled:
        return None
    return DecoderDescription(input_size=input_size, units=tuple(params.decoder.units),
                              output_shape=tuple(params.input_shape))


# --------------------------------------------------------------------------------------------
# Matrix capsules (Hinton, Sabour & Frosst 2018); the kernel windows of their convolutional
# capsule layers in reportgen.capsnet.conv_windows

POSE = 16                     # a 4x4 pose matrix, flattened row-major
PRIMARY_CHANNELS = POSE + 1   # per primary capsule type: 16 pose values and one activation
# Coordinate addition adds a child's scaled (row, column) to its vote's entries (0, 3) and
# (1, 3): their indices in the flattened (row-major) pose
COORDINATE_ENTRIES = (3, 7)
