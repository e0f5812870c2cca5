"""A model as the engine plans it: known by its description and digest, without TensorFlow.

Planning (which techniques apply, which variants, which cache keys) needs only the parameter
file: `describe(params)` (reportgen.capsnet.description) imports no TensorFlow. The Keras
model is built the first time something actually needs it (a missing result), so a rebuild
whose results are all stored never imports TensorFlow.
"""

from __future__ import annotations

from typing import Callable

from reportgen.cache.keys import hash_json
from reportgen.capsnet.description import NUMERICS_VERSION, describe, lacks_words


def model_digest(params) -> str:
    """What identifies a model's architecture and settings in cache keys, with the version of
    the layers' numerics and its family's code (reportgen.engine.code_identity)."""
    from reportgen.engine.code_identity import family_code
    from reportgen.settings.families import family_of, origin

    family = family_of(params)
    return hash_json({"params": params.to_dict(), "numerics": NUMERICS_VERSION,
                      "family_code": family_code(family, origin(family))})


class ModelHandle:
    """`handle.description` and `handle.digest` at once; `handle.net()` builds the Keras model
    (a reportgen.capsnet.network.Network) with `build(params)` on first use."""

    def __init__(self, params, build: Callable | None = None):
        self.params = params
        self.description = describe(params)
        self.digest = model_digest(params)
        self._build = build or build_keras_model
        self._net = None

    @property
    def built(self) -> bool:
        return self._net is not None

    def net(self):
        if self._net is None:
            self._net = self._build(self.params)
        return self._net

    def release(self) -> None:
        """Let the Keras model and its compiled passes go (built again if asked for): a build
        of several models holds one at a time."""
        self._net = None


def build_keras_model(params):
    """Import TensorFlow (quietly) and build the network of `params` (any family)."""
    from reportgen.tf_quiet import import_tensorflow_quietly

    import_tensorflow_quietly()
    from reportgen.capsnet.architecture import build_capsnet

    return build_capsnet(params)


def materialise(model):
    """The built network of a ModelHandle; anything else (a CapsNet) as it is."""
    return model.net() if isinstance(model, ModelHandle) else model


# What a model trained on another number of classes per image misses (Technique.labels), by
# that number, and the plain clause that says so.
LABELS_PER_IMAGE = {2: "one_class_per_image"}
_LABEL_REASONS = {"one_class_per_image": "each of its images carries two classes (overlapping "
                                         "digits), and this analysis scores one"}


def not_applicable_reason(missing: frozenset[str] | str) -> str:
    """Why a technique does not apply, naming what the model lacks (its most fundamental missing
    feature), to follow "Not applicable to this model:": "it has no reconstruction decoder";
    a technique's own clause (Technique.unsuited) as it is."""
    if isinstance(missing, str):
        return missing
    for name, reason in _LABEL_REASONS.items():
        if name in missing:
            return reason
    lacks = lacks_words()
    lacking = [lacks[f] for f in lacks if f in missing] + sorted(set(missing) - set(lacks))
    if not lacking:
        return "it does not apply here"
    return f"it has no {lacking[0]}"
