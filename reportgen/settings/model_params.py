"""Typed, validated-once model parameters read from `models/NAME/params.toml`.

A model is data: one human-edited TOML file describes the architecture (Sabour et al. 2017 and its variants); the Keras
model is built from it by `reportgen.capsnet.architecture.build_capsnet`. Every field is checked
here, at load time, so that a bad file fails with the field's name and the allowed values.

The tables every family reads (`[[conv]]`, `[primary]`, `[class_caps]`, `[decoder]`, `[loss]`,
`[training]`) are parsed here; a family's own table (`[em]`, `[graph]`, `[cnn]`) by the family
(reportgen.settings.families), into `ModelParams.family_settings`.
"""

from __future__ import annotations

import re
import tomllib
import unicodedata
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterable

from reportgen.errors import ReportgenError
from reportgen.settings.families import DEFAULT_FAMILY, family_of, registered
from reportgen.settings.families import family as find_family

PARAMS_FILE = "params.toml"
# Model names become directory and URL parts: letters, digits, '_' and '-' only.
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$")
_ACTIVATIONS = ("relu", "none")
_ROUTING_SOFTMAX = ("classes", "inputs")
# Dynamic routing, or "none": uniform coupling coefficients (No-R, Gu 2022).
ROUTINGS = ("dynamic", "none")
WEIGHT_SHARING = ("none", "type", "all")
# A convolution's padding, as Keras's Conv2D takes it: "valid" (none) or "same" (zeros around
# the input so that the output has ceil(input / stride) cells; TensorFlow's rule puts the odd
# one after, reportgen.capsnet.description.conv_output).
PADDINGS = ("valid", "same")
# `[training] optimizer` (reportgen.training.optimizers)
OPTIMIZERS = ("adam", "sgd")


def choices(default, allowed: tuple) -> Any:
    """A settings field whose string value must be one of `allowed` (parse_section checks)."""
    return field(default=default, metadata={"choices": tuple(allowed)})


@dataclass(frozen=True)
class ConvParams:
    filters: int = 256                  # output channels
    kernel_size: int = 9                # square kernel
    strides: int = 1                    # the kernel's step, in pixels of its input
    activation: str = choices("relu", _ACTIVATIONS)     # applied to the conv's output
    # "valid": no padding, the output shrinks by kernel - 1; "same": zero padding, the output
    # has ceil(input / strides) cells (Keras's Conv2D padding; the same parameters either way)
    padding: str = choices("valid", PADDINGS)


@dataclass(frozen=True)
class PrimaryCapsParams:
    types: int = 32                     # capsule types (channels / dims) at every grid cell
    dims: int = 8                       # pose values of each primary capsule
    kernel_size: int = 9                # the convolution forming the capsules
    strides: int = 2                    # ... and its stride
    # The thesis applies ReLU before the squash; Sabour et al. 2017 and CapsNet-Keras use none.
    activation: str = choices("relu", _ACTIVATIONS)
    # Batch normalisation of the primary conv's channels before the squash, as Gu's public
    # capsule code does (JindongGu/VoteAttack, models/capsnet.py); without its scale and shift,
    # so the trainable parameters stay those of the paper's architecture.
    batch_norm: bool = False


@dataclass(frozen=True)
class ClassCapsParams:
    dims: int = 16                      # pose values of each class capsule
    routing_iterations: int = 3         # of dynamic routing (Sabour et al. 2017, Procedure 1)
    # LaLonde & Bagci: one transformation matrix per capsule type instead of per capsule (true,
    # or "type"); "all": one per class, shared by every primary capsule (Aff-CapsNet, Gu 2022).
    weight_sharing: bool | str = False
    # "none": coupling coefficients fixed uniform, i.e. one routing iteration (No-R, Gu 2022).
    routing: str = choices("dynamic", ROUTINGS)
    kernel_init_stddev: float = 0.1     # of the transformation matrices' Normal initialiser
    # Which way the coupling coefficients are normalised: "classes" (Sabour et al. 2017:
    # c_i = softmax_j(b_i), each input capsule shares itself out among the classes) or "inputs"
    # (softmax over the input capsules i for each class j, as gram-ai/capsule-networks and the
    # Udacity-style capsule_network notebook compute it; their first iteration averages votes).
    routing_softmax: str = choices("classes", _ROUTING_SOFTMAX)
    # Route on votes the gradient does not flow through, except in the last iteration's
    # weighted sum (CapsNet-Keras before its commit 540f15d, e.g. its tf1.4-keras branch).
    # The outputs are the same; gradients (Grad-CAM++, attacks) see fixed couplings.
    detach_routing_votes: bool = False
    # Class-capsule lengths as sqrt(|v|^2 + length_epsilon): 0 gives the exact length (every
    # model reportgen trains); CapsNet-Keras's Length layer adds K.epsilon() = 1e-7, so its
    # imports set 1e-7 and show the lengths that source computes (a floor of 3.2e-4).
    length_epsilon: float = 0.0


@dataclass(frozen=True)
class DecoderParams:
    # the reconstruction decoder from the masked class capsules; false: none
    enabled: bool = True
    # its hidden ReLU layers' widths; the output layer (sigmoid) has one unit per input value
    units: tuple[int, ...] = (512, 1024)


@dataclass(frozen=True)
class LossParams:
    # lambda recognition x mean squared pixel error; 0.392 = 0.0005 x 784 (the paper's summed error).
    reconstruction_weight: float = 0.392
    m_plus: float = 0.9                 # margin loss: a present class's length should exceed m+
    m_minus: float = 0.1                # ... an absent class's stay below m-
    down_weight: float = 0.5            # lambda, the weight of the absent classes' term


@dataclass(frozen=True)
class TrainingParams:
    epochs: int = 10                    # `reportgen train`'s defaults; its options win
    batch_size: int = 100               # images per training step
    learning_rate: float = 1e-3         # the optimizer's (its base rate, before any decay)
    save_every: int = 100               # save a step every K batches (and at each epoch's end)
    # the learning rate's factor per epoch, applied batch by batch (lr x decay^(epochs done));
    # 1: constant. CapsNet-Keras decays by 0.9 per epoch (its --lr_decay).
    learning_rate_decay: float = 1.0
    # true: the training step runs XLA-compiled even where the family's measurement (Family.xla)
    # says its gradients run faster without, for a small network XLA speeds up (measure with
    # bench/bench_xla.py; the site's own passes keep the family's choice)
    xla: bool = False
    # "adam": Keras's Adam (beta 0.9, 0.999, epsilon 1e-7); "sgd": stochastic gradient descent
    # with momentum as PyTorch's torch.optim.SGD computes it (b = momentum x b + g, then
    # w -= learning_rate x b; Tsai et al. 2020 train with SGD, 0.1, momentum 0.9, weight decay
    # 5e-4). reportgen.training.optimizers
    optimizer: str = choices("adam", OPTIMIZERS)
    # SGD's momentum (0: plain SGD, no momentum buffer); not set with "adam"
    momentum: float = 0.9
    # L2 weight decay added to the gradient of every trainable variable before the optimizer
    # sees it, g + weight_decay x w (PyTorch's SGD and Adam `weight_decay`; with Adam this is
    # L2 regularisation, not AdamW's decoupled decay); 0: none
    weight_decay: float = 0.0

    def __post_init__(self):
        check_training(self, PARAMS_FILE)


@dataclass(frozen=True)
class ModelParams:
    # a data set's name (reportgen.data.datasets) or a path to an .npz file or image folder
    dataset: str
    input_shape: tuple[int, int, int]   # [height, width, channels], channels 1 or 3
    num_classes: int = 10               # classes of the data set (at least 2)
    conv: tuple[ConvParams, ...] = (ConvParams(),)      # the convolutions before the capsules
    primary: PrimaryCapsParams = field(default_factory=PrimaryCapsParams)    # primary capsules
    class_caps: ClassCapsParams = field(default_factory=ClassCapsParams)    # class capsules
    decoder: DecoderParams = field(default_factory=DecoderParams)    # reconstruction decoder
    loss: LossParams = field(default_factory=LossParams)    # margin and reconstruction loss
    training: TrainingParams = field(default_factory=TrainingParams)    # training defaults
    description: str = ""                # one line the model's pages show
    # Where the weights came from when they were not trained by reportgen (`reportgen import`):
    # the source project, its commit and the file format, shown with the description.
    imported_from: str = ""
    # The model family (reportgen.settings.families): the kind of network, which reads the
    # shared tables above and its own table (its parsed settings: family_settings).
    family: str = DEFAULT_FAMILY
    family_settings: Any = None

    def to_dict(self) -> dict[str, Any]:
        """Every field, except the optional ones added after the first release while they keep
        their defaults: a model that does not use them keeps its dict (and its cache keys). The
        family's own table comes under its name, left out at its defaults likewise."""
        data = asdict(replace(self, family_settings=None))
        del data["family_settings"]
        family = family_of(self)
        if family.table is not None and self.family_settings is not None:
            own = asdict(self.family_settings)
            if own != asdict(family.settings()):
                data[family.table] = own
        for path, default in _OPTIONAL_DEFAULTS.items():
            *parents, key = path
            table = data
            for parent in parents:
                table = table[parent]
            if table.get(key) == default:
                del table[key]
        for conv in data["conv"]:
            for key, default in _OPTIONAL_CONV_DEFAULTS.items():
                if conv.get(key) == default:
                    del conv[key]
        return data

    @property
    def has_decoder(self) -> bool:
        return self.decoder.enabled


# Fields added for imported models, left out of to_dict() at these defaults.
_OPTIONAL_DEFAULTS = {("primary", "batch_norm"): False,
                      ("class_caps", "routing_softmax"): "classes",
                      ("class_caps", "detach_routing_votes"): False,
                      ("class_caps", "length_epsilon"): 0.0,
                      ("imported_from",): "",
                      ("class_caps", "routing"): "dynamic",
                      ("family",): DEFAULT_FAMILY,
                      ("training", "learning_rate_decay"): 1.0,
                      ("training", "xla"): False,
                      ("training", "optimizer"): "adam",
                      ("training", "momentum"): 0.9,
                      ("training", "weight_decay"): 0.0}
# ... and of each [[conv]] table
_OPTIONAL_CONV_DEFAULTS = {"padding": "valid"}


def check_training(training: TrainingParams, source: str, raw: dict | None = None) -> None:
    """The `[training]` values no type check refuses: the decay and momentum factors, and a
    momentum given to Adam (`raw`: the table as written, when there is one)."""
    if not 0 < training.learning_rate_decay <= 1:
        raise fail(source, "training.learning_rate_decay", "a factor in (0, 1] per epoch",
                   training.learning_rate_decay)
    if not 0 <= training.momentum < 1:
        raise fail(source, "training.momentum", "a factor in [0, 1)", training.momentum)
    if raw is not None and "momentum" in raw and training.optimizer != "sgd":
        raise fail(source, "training.momentum",
                   f'not set with optimizer "{training.optimizer}" (momentum is SGD\'s; set '
                   'optimizer = "sgd", or remove momentum)', raw["momentum"])


def fail(source: str, key: str, expected: str, received: Any) -> ReportgenError:
    return ReportgenError(
        f"Invalid model parameter '{key}' in {source}.",
        expected=expected, received=repr(received),
        fix=f"Edit '{key}' in {source} (see models/MNIST/{PARAMS_FILE} for a complete example).")


def parse_section(cls, raw: Any, source: str, prefix: str):
    """Build dataclass `cls` from a TOML table, checking unknown keys and every value's type."""
    if not isinstance(raw, dict):
        raise fail(source, prefix, "a table", raw)
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise fail(source, f"{prefix}.{unknown[0]}", f"one of {sorted(known)}", unknown[0])
    values = {}
    defaults = cls() if cls is not ModelParams else None
    for name, f in known.items():
        key = f"{prefix}.{name}"
        if name not in raw:
            continue
        value = raw[name]
        default = getattr(defaults, name)
        if (cls, name) == (ClassCapsParams, "weight_sharing"):
            values[name] = _weight_sharing(source, key, value)
            continue
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise fail(source, key, "true or false", value)
        elif isinstance(default, int):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise fail(source, key, "a positive integer", value)
        elif isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise fail(source, key, "a non-negative number", value)
            value = float(value)
        elif isinstance(default, str):
            if not isinstance(value, str):
                raise fail(source, key, "a string", value)
            allowed = f.metadata.get("choices")
            if allowed is not None and value not in allowed:
                raise fail(source, key, f"one of {list(allowed)}", value)
        elif isinstance(default, tuple):
            if (not isinstance(value, list) or
                    not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)):
                raise fail(source, key, "a list of positive integers", value)
            value = tuple(value)
        values[name] = value
    return cls(**values)


def _weight_sharing(source: str, key: str, value: Any) -> bool | str:
    """false / "none" -> False, true / "type" -> True (as before), "all" -> "all"."""
    if isinstance(value, bool):
        return value
    if value in WEIGHT_SHARING:
        return {"none": False, "type": True}.get(value, value)
    raise fail(source, key, f"true, false or one of {list(WEIGHT_SHARING)}", value)


def parse_model_params(raw: dict[str, Any], source: str = PARAMS_FILE) -> ModelParams:
    """Validate a parsed TOML document into ModelParams; errors name the field."""
    known_datasets = _known_datasets

    tables = {find_family(name).table for name in registered()} - {None}
    top = {f.name for f in fields(ModelParams)} - {"family_settings"} | tables
    unknown = sorted(set(raw) - top)
    if unknown:
        raise fail(source, unknown[0], f"one of {sorted(top)}", unknown[0])
    if "dataset" not in raw:
        raise fail(source, "dataset", f"one of {list(known_datasets())} or a path to your data",
                    None)
    dataset = raw["dataset"]
    if not isinstance(dataset, str) or not dataset:
        raise fail(source, "dataset", "a dataset name or path", dataset)
    shape = raw.get("input_shape")
    if (not isinstance(shape, list) or len(shape) != 3 or
            not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in shape) or
            shape[2] not in (1, 3)):
        raise fail(source, "input_shape", "[height, width, channels] with channels 1 or 3", shape)
    num_classes = raw.get("num_classes", 10)
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise fail(source, "num_classes", "an integer >= 2", num_classes)
    conv_raw = raw.get("conv", [{}])
    if isinstance(conv_raw, dict):
        conv_raw = [conv_raw]
    if not isinstance(conv_raw, list) or not conv_raw:
        raise fail(source, "conv", "one or more [[conv]] tables", conv_raw)
    conv = tuple(parse_section(ConvParams, c, source, f"conv[{i}]") for i, c in enumerate(conv_raw))
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise fail(source, "description", "a string", description)
    imported_from = raw.get("imported_from", "")
    if not isinstance(imported_from, str):
        raise fail(source, "imported_from", "a string", imported_from)
    family = raw.get("family", DEFAULT_FAMILY)
    if not isinstance(family, str) or family not in registered():
        raise fail(source, "family", f"one of {list(registered())}", family)
    plugin = find_family(family, source)
    settings = None
    for other in registered():
        # Every family's table is checked (a typo fails wherever it is); the model keeps only
        # its own family's: another's means nothing to it.
        owner = find_family(other)
        if owner.table is not None and (owner is plugin or owner.table in raw):
            parsed = _family_table(owner, raw.get(owner.table, {}), source)
            settings = parsed if owner is plugin else settings
    params = ModelParams(
        dataset=dataset,
        input_shape=tuple(shape),
        num_classes=num_classes,
        conv=conv,
        primary=parse_section(PrimaryCapsParams, raw.get("primary", {}), source, "primary"),
        class_caps=parse_section(ClassCapsParams, raw.get("class_caps", {}), source,
                                 "class_caps"),
        decoder=parse_section(DecoderParams, raw.get("decoder", {}), source, "decoder"),
        loss=parse_section(LossParams, raw.get("loss", {}), source, "loss"),
        training=_training(raw.get("training", {}), source),
        description=description,
        imported_from=imported_from,
        family=family,
        family_settings=settings,
    )
    if plugin.check is not None:
        return plugin.check(params, raw, source)
    conv_grid(params, source)
    return params


def _training(raw: Any, source: str) -> TrainingParams:
    """The [training] table; a value out of its range names `source`, the file's path (the
    dataclass's own check, for code that builds one, can only name params.toml)."""
    factors = ("learning_rate_decay", "momentum")
    given = {k: v for k, v in raw.items() if k in factors} if isinstance(raw, dict) else {}
    rest = {k: v for k, v in raw.items() if k not in factors} if isinstance(raw, dict) else raw
    training = parse_section(TrainingParams, rest, source, "training")
    for key, value in given.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise fail(source, f"training.{key}", "a non-negative number", value)
    given = {k: float(v) for k, v in given.items()}
    check_training(SimpleNamespace(**{**asdict(training), **given}), source, raw)
    return replace(training, **given)


def _family_table(owner, table: Any, source: str):
    if owner.parse is not None:
        return owner.parse(table, source)
    return parse_section(owner.settings, table, source, owner.table)


def conv_grid(params: ModelParams, source: str) -> tuple[int, int]:
    """The (H, W) the `[[conv]]` layers leave of the input (each by its padding: "valid" keeps
    the windows inside the input, "same" ceil(input / strides)); at least 1x1."""
    h, w = params.input_shape[:2]
    for i, c in enumerate(params.conv):
        if c.padding == "same":
            h, w = -(-h // c.strides), -(-w // c.strides)
        else:
            h, w = (h - c.kernel_size) // c.strides + 1, (w - c.kernel_size) // c.strides + 1
        if h < 1 or w < 1:
            raise fail(source, f"conv[{i}].kernel_size", "a kernel no larger than its input",
                       c.kernel_size)
    return h, w


def check_primary_fits(params: ModelParams, h: int, w: int, source: str) -> None:
    """The primary capsules' convolution must leave at least a 1x1 grid of the (H, W) before."""
    p = params.primary
    if (h - p.kernel_size) // p.strides + 1 < 1 or (w - p.kernel_size) // p.strides + 1 < 1:
        raise fail(source, "primary.kernel_size",
                   f"a kernel no larger than the {h}x{w} conv output", p.kernel_size)


def load_model_params(path: str | Path) -> ModelParams:
    """Read and validate one params.toml."""
    path = Path(path)
    if not path.is_file():
        raise ReportgenError(f"Model parameter file not found: {path}",
                             fix=f"Create {path} (copy models/MNIST/{PARAMS_FILE} as a start).")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ReportgenError(f"Model parameter file {path} is not valid TOML.",
                             received=str(exc), fix=f"Fix the TOML syntax in {path}.") from exc
    return parse_model_params(raw, source=str(path))


def printable_name(name: str) -> str:
    """A folder name as it can be shown on one line: control characters, bytes that are not
    valid UTF-8 (surrogate escapes) and other unprintables escaped as Python does."""
    return name if name.isprintable() else repr(name)[1:-1]


def suggest_model_name(name: str, taken: Iterable[str] = ()) -> str:
    """A safe name close to `name`, for a fix hint: accents dropped (é -> e), runs of other
    characters turned into '_', and a suffix (_2, _3, ...) while the name is one of `taken`
    (compared ignoring case, as on case-insensitive disks), so that a hint never names another
    model."""
    letters = "".join(c for c in unicodedata.normalize("NFKD", name)
                      if not unicodedata.combining(c))
    plain = re.sub(r"[^A-Za-z0-9_\-]+", "_", letters).lstrip("_-")[:64].rstrip("_-")
    plain = plain or "my_model"
    taken = {t.casefold() for t in taken}
    candidate, n = plain, 1
    while candidate.casefold() in taken:
        n += 1
        candidate = f"{plain[:64 - len(str(n)) - 1]}_{n}"
    return candidate


def check_model_name(name: str, folder: str | Path | None = None) -> str:
    """Refuse names that could escape models/ or break URLs.

    `folder`, when given, is the model folder that carries the name: the fix then says how to
    rename it instead of how to type another name.
    """
    # fullmatch: with match(), "$" would also accept a name ending in a newline
    if isinstance(name, str) and SAFE_NAME.fullmatch(name):
        return name
    if folder is not None and isinstance(name, str):
        fix = (f"Rename the folder {printable_name(str(folder))} to a plain name such as "
               f"{suggest_model_name(name, _sibling_names(Path(folder)))}")
    else:
        fix = "Use a plain directory name under models/."
    raise ReportgenError(
        "Unsafe model name.",
        expected="letters, digits, '_' or '-', starting with a letter or digit, at most 64 "
                 "characters (e.g. MNIST_WSharing)",
        received=repr(name), fix=fix)


def _sibling_names(folder: Path) -> list[str]:
    """The names beside `folder` (the other models): what a rename hint must not propose."""
    try:
        return [p.name for p in folder.parent.iterdir() if p.name != folder.name]
    except OSError:
        return []


def _known_datasets() -> tuple[str, ...]:
    from reportgen.data.datasets import known_datasets

    return known_datasets()
