"""Helpers shared by the technique modules: option labels and dicts, decoder calls, targets.

`variant_label` and `params_dict` turn a technique's frozen Params into a file-name-safe label
and a JSON-ready dict (captions, cache keys). `decode` and `target_classes` are the two steps
the decoder techniques (decoder_length, decoder_perturbation) share; the option checks and JSON numbers of the
dataset techniques are here too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re

import numpy as np

from reportgen.errors import ReportgenError

# Rows per decoder call: bounds memory for big batches (16 images x 16 dims x 11 deltas = 2,816).
DECODER_CHUNK = 4096

_UNSAFE = re.compile(r"[^A-Za-z0-9_.]+")


def _json_value(value):
    if isinstance(value, (tuple, list)):
        return [_json_value(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


# Field metadata of an option added after results were stored: left out of params_dict at its
# default, so the results of the variants that existed before keep their cache keys.
OMIT_DEFAULT = {"omit_default": True}


def params_dict(params) -> dict:
    """The options of `params` (a frozen dataclass or None) as a JSON-ready dict (an option
    marked OMIT_DEFAULT only when it differs from its default)."""
    if params is None:
        return {}
    return {f.name: _json_value(getattr(params, f.name)) for f in dataclasses.fields(params)
            if not (f.metadata.get("omit_default") and getattr(params, f.name) == f.default)}


def _format(value) -> str:
    if isinstance(value, float):
        value = f"{value:g}"
    text = str(value).replace("-", "m")       # -0.25 -> m0.25: no leading '-' in file names
    return _UNSAFE.sub("_", text).strip("_")


def variant_label(params) -> str:
    """A short, file-name-safe label telling the variants of one technique apart.

    Non-empty string options (layer names, methods, normalisations) always appear, as their value
    ("conv1", "modified"); other options appear only when they differ from the default, as name
    and value ("target3", "steps50"); a non-default sequence appears as its name and a short hash
    ("deltas-1a2b3c4d"). Parts are joined by '-'. "" for None or an all-default, string-free
    Params.
    """
    if params is None:
        return ""
    parts = []
    for f in dataclasses.fields(params):
        value = getattr(params, f.name)
        if isinstance(value, str):
            if value:
                parts.append(_format(value))
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        if value == default:
            continue
        if isinstance(value, (tuple, list)):
            digest = hashlib.sha256(repr(_json_value(value)).encode()).hexdigest()[:8]
            parts.append(f"{f.name}-{digest}")
        else:
            parts.append(f"{f.name}{_format(value)}")
    return "-".join(parts)


def target_classes(batch, target: int) -> np.ndarray:
    """The class capsule each image's decoder analysis uses: the predicted one for target -1."""
    classes = batch["class_capsules"].shape[1]
    if target == -1:
        return np.asarray(batch["predicted"], np.int64)
    if not isinstance(target, (int, np.integer)) or isinstance(target, bool) or \
            not 0 <= target < classes:
        raise ReportgenError(
            "Invalid decoder target class.",
            expected=f"-1 (the predicted class) or a class index 0..{classes - 1}",
            received=repr(target), fix="Set the technique's 'target' option to a valid class.")
    return np.full(len(batch), int(target), np.int64)


def masked_inputs(vectors: np.ndarray, targets: np.ndarray, classes: int) -> np.ndarray:
    """Place capsule vectors (B, ..., D) in their target's slot, zeros elsewhere: (B, ..., K*D).

    The same masking as the model's Mask layer, for hand-made capsule vectors.
    """
    dims = vectors.shape[-1]
    one_hot = np.eye(classes, dtype=np.float32)[targets]                 # (B, K)
    one_hot = one_hot.reshape((len(targets),) + (1,) * (vectors.ndim - 2) + (classes, 1))
    masked = one_hot * vectors[..., None, :].astype(np.float32)          # (B, ..., K, D)
    return masked.reshape(vectors.shape[:-1] + (classes * dims,))


def decode(net, inputs: np.ndarray) -> np.ndarray:
    """Run the decoder on masked capsules (..., K*D) -> images (..., H, W, C), float32.

    One eager call (never predict(): ~110 ms setup per call), split into chunks of at
    most DECODER_CHUNK rows to bound memory.
    """
    if net.decoder is None:
        raise ReportgenError("This model has no decoder.",
                             fix="Decoder techniques apply only to models with a decoder.")
    lead = inputs.shape[:-1]
    rows = np.ascontiguousarray(inputs.reshape(-1, inputs.shape[-1]), np.float32)
    outputs = [np.asarray(net.decoder(rows[start:start + DECODER_CHUNK], training=False))
               for start in range(0, max(len(rows), 1), DECODER_CHUNK)]
    images = np.concatenate(outputs, axis=0) if len(outputs) > 1 else outputs[0]
    return images.reshape(lead + images.shape[1:]).astype(np.float32, copy=False)


def check_option(technique: str, option: str, value, allowed) -> None:
    """ReportgenError unless `value` is one of `allowed` (Params.__post_init__ validation)."""
    if value not in allowed:
        raise ReportgenError(
            f"Invalid option '{option}' for technique '{technique}'.",
            expected=f"one of {list(allowed)}", received=repr(value),
            fix=f"Set '{option}' to one of: {', '.join(map(str, allowed))}.")


def check_positive(technique: str, option: str, value, kind=int) -> None:
    """ReportgenError unless `value` is a positive number of type `kind`."""
    ok = isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
    if kind is int:
        ok = ok and float(value).is_integer()
    if not ok or not math.isfinite(float(value)) or value <= 0:
        raise ReportgenError(
            f"Invalid option '{option}' for technique '{technique}'.",
            expected=f"a positive {'integer' if kind is int else 'number'}", received=repr(value),
            fix=f"Set '{option}' to a positive value.")


def check_conv_layer(model, technique: str, layer: str) -> None:
    """ReportgenError naming `layer` and listing the model's conv layers when it is not one
    (`model`: a CapsNet or its ModelDescription)."""
    from reportgen.techniques.base import model_description

    names = model_description(model).conv_layer_names
    if layer not in names:
        raise ReportgenError(
            f"Unknown conv layer '{layer}' for technique '{technique}'.",
            expected=f"one of this model's conv layers: {', '.join(names)}",
            received=repr(layer), fix="Set the technique's 'layer' option to one of those names.")


def require_images(evaluation, technique: str) -> None:
    """ReportgenError for an empty evaluation set (nothing to aggregate)."""
    if len(evaluation.images) == 0:
        raise ReportgenError(f"Technique '{technique}' needs at least one evaluation image.",
                             fix="Build with a non-empty evaluation set (--eval-images > 0).")


def finite_number(value) -> float | None:
    """A JSON number, or None when not finite."""
    value = float(np.asarray(value))
    return value if math.isfinite(value) else None


def rounded_number(value) -> float | None:
    """A JSON number rounded to 6 decimals (float32 arrays print as 0.8999999761…), or None
    for NaN."""
    value = float(value)
    return None if math.isnan(value) else round(value, 6)


def float_tuple(technique: str, option: str, values) -> tuple[float, ...]:
    """A list of numbers (from TOML or JSON) as a tuple of floats, so Params stay hashable."""
    try:
        return tuple(float(v) for v in values)
    except (TypeError, ValueError) as exc:
        raise ReportgenError(f"Invalid option '{option}' for technique '{technique}'.",
                             expected="a list of numbers", received=repr(values)) from exc


def check_target(technique: str, target) -> None:
    """ReportgenError unless the decoder option `target` is -1 or a class index >= 0."""
    if isinstance(target, bool) or not isinstance(target, (int, np.integer)) or target < -1:
        raise ReportgenError(f"Invalid option 'target' for technique '{technique}'.",
                             expected="-1 (the predicted class) or a class index >= 0",
                             received=repr(target))


def target_vectors(batch, target: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """The target class of each image (B,) and its class-capsule vector (B, D) as `dtype`."""
    capsules = np.asarray(batch["class_capsules"], dtype)               # (B, K, D)
    targets = target_classes(batch, target)
    return targets, capsules[np.arange(len(targets)), targets]


def decoder_result(batch, inputs: np.ndarray, targets: np.ndarray, **arrays) -> dict:
    """{"images": the decoder's images of `inputs`, **arrays, "target", "inputs"}."""
    return {"images": decode(batch.net, inputs), **arrays,
            "target": targets.astype(np.float32), "inputs": inputs}
