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
- vector capsules (Sabour, Frosst & Hinton 2017): pose = a vector, activation = its length,
  routing weights = coupling coefficients c_ij of dynamic routing (one iteration = uniform
  couplings, the "No-R" of Gu 2022);
- matrix capsules (Hinton, Sabour & Frosst 2018): pose = a 4x4 matrix, activation = a logistic
  unit, routing weights = EM assignments R_ij;
- attention pooling (GraCapsNet, Gu & Tresp 2021): routing weights = attention over grid nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from reportgen.errors import ReportgenError

POSE_KINDS = ("vector", "matrix4x4")
ACTIVATION_KINDS = ("length", "logistic")
ROUTING_KINDS = ("coupling", "em_assignments", "attention")
HEAD_KINDS = ("capsules", "logits")
PADDINGS = ("valid", "same")
# Part of every model's cache key (reportgen.engine.model.model_digest): bump it when the layers
# compute other numbers for the same params and weights, so that stored results are computed
# again. 2: exact capsule lengths (reportgen.capsnet.ops.safe_norm, no epsilon floor).
NUMERICS_VERSION = 2

# What a technique may require (Technique.applies_to); a description has a subset of these.
FEATURES = {
    "conv": "at least one plain convolutional layer (not the one that forms capsules)",
    "capsules": "at least one capsule layer",
    "vector_capsules": "capsules are vectors whose length is their activation",
    "matrix_capsules": "capsules are 4x4 pose matrices with a logistic activation",
    "primary_capsules": "a capsule layer on a spatial grid",
    "class_capsules": "the classifier head is a layer of class capsules",
    "logits": "the classifier head gives logits (a plain CNN)",
    "routing_weights": "a capsule layer has routing weights into the next layer",
    "dynamic_routing": "the routing weights are coupling coefficients of dynamic routing",
    "em_routing": "the routing weights are EM assignments",
    "routing_paths": "every routing weight is a coupling coefficient or an EM assignment, so "
                     "routing paths lead from the primary capsules to the classes",
    "attention": "the routing weights are attention weights",
    "decoder": "a reconstruction decoder",
    "class_features": "a CNN head whose features are classes x dims units (ConvNet-R, -CR, -CR-SF)",
    "class_vectors": "a vector per class to study (a class capsule, or a CNN's feature units)",
}


# What a model without the feature lacks, for "not applicable" notes ("This model has no …"),
# most fundamental first: a CNN lacks capsules, so its routing weights need not be named too;
# a decoder's analyses name the missing decoder before the kind of capsules they decode.
LACKS = {
    "capsules": "capsule layers",
    "decoder": "reconstruction decoder",
    "class_vectors": "vector per class (no class capsules and no class-by-dimension features)",
    "class_capsules": "class capsules",
    "vector_capsules": "vector capsules (whose lengths are activations)",
    "matrix_capsules": "matrix capsules",
    "primary_capsules": "capsules on a spatial grid",
    "routing_weights": "routing weights",
    "routing_paths": "routing weights that lead from the primary capsules to the classes",
    "dynamic_routing": "dynamic routing",
    "em_routing": "EM routing",
    "attention": "attention weights",
    "conv": "plain convolutional layer before its capsules",
    "class_features": "class-by-dimension feature units (a ConvNet-R, -CR or -CR-SF head)",
    "logits": "logits head (it is not a plain CNN)",
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
class CapsuleLayer:
    """A layer of capsules. `grid` is None for a class-capsule layer (one capsule per class).

    pose:        "vector" (pose_size values) or "matrix4x4" (pose_size = 16)
    activation:  "length" (|pose|, Sabour et al. 2017) or "logistic" (a separate unit, Hinton
                 et al. 2018)
    routing:     the routing weights from this layer into the next one: "coupling" (dynamic
                 routing, routing_iterations of them; 1 = uniform, no routing), "em_assignments",
                 "attention", or None (the last layer)
    routing_softmax: for "coupling", what the couplings are normalised over: "classes"
                 (Sabour et al. 2017: each input capsule's couplings sum to 1) or "inputs"
                 (each class's couplings over the input capsules sum to 1, as in some
                 PyTorch implementations a model can be imported from)
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
    routing: str | None = None
    routing_iterations: int = 0
    receptive_field: ReceptiveField | None = None
    routing_softmax: str = "classes"
    kernel_size: tuple[int, int] | None = None
    strides: tuple[int, int] | None = None
    coordinate_addition: bool = False

    @property
    def capsules(self) -> int:
        """How many capsules: grid cells x types (row-major, types fastest), or types."""
        return self.types * (self.grid[0] * self.grid[1] if self.grid else 1)


@dataclass(frozen=True)
class Head:
    """The classifier's output: class "capsules" (activations) or "logits", from `layer`."""

    kind: str
    classes: int
    layer: str


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

    def __post_init__(self):
        for layer in self.capsule_layers:
            _check(layer.pose, POSE_KINDS, f"capsule layer {layer.name}: pose")
            _check(layer.activation, ACTIVATION_KINDS, f"capsule layer {layer.name}: activation")
            if layer.routing is not None:
                _check(layer.routing, ROUTING_KINDS, f"capsule layer {layer.name}: routing")
        _check(self.head.kind, HEAD_KINDS, "head")
        names = [layer.name for layer in (*self.conv_layers, *self.capsule_layers)]
        if len(set(names)) != len(names):
            raise ValueError(f"Layer names must be unique. Received: {names}")

    # --- what the model has -------------------------------------------------------------------
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
        if poses == {("matrix4x4", "logistic")}:
            found.add("matrix_capsules")
        if self.primary_capsules is not None:
            found.add("primary_capsules")
        found.add("class_capsules" if self.head.kind == "capsules" else "logits")
        routing = {c.routing for c in self.capsule_layers} - {None}
        if routing:
            found.add("routing_weights")
        found.update({"coupling": "dynamic_routing", "em_assignments": "em_routing",
                      "attention": "attention"}[r] for r in routing)
        if routing and routing <= {"coupling", "em_assignments"}:
            found.add("routing_paths")
        if self.decoder is not None:
            found.add("decoder")
        if self.class_features is not None:
            found.add("class_features")
        if self.class_features is not None or {"class_capsules", "vector_capsules"} <= found \
                or {"class_capsules", "matrix_capsules"} <= found:   # poses as 16 values
            found.add("class_vectors")
        return frozenset(found)

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

    return family_of(params).describe(params)


def capsule_convs(params, channels_per_type: int, activation: str) -> tuple[ConvLayer, ...]:
    """The `[[conv]]` layers, then "primary_conv" forming the primary capsules ("primary_caps":
    `primary.types` x `channels_per_type` channels after `activation`)."""
    p = params.primary
    return conv_stack(params.input_shape, [
        *((f"conv{i + 1}", conv.filters, conv.kernel_size, conv.strides, "valid",
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
# Matrix capsules (Hinton, Sabour & Frosst 2018); geometry helpers in
# reportgen.capsnet.em_description

POSE = 16                     # a 4x4 pose matrix, flattened row-major
PRIMARY_CHANNELS = POSE + 1   # per primary capsule type: 16 pose values and one activation
# Coordinate addition adds a child's scaled (row, column) to its vote's entries (0, 3) and
# (1, 3): their indices in the flattened (row-major) pose
COORDINATE_ENTRIES = (3, 7)
