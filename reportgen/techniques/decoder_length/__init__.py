"""Decoder, capsule length (Sabour et al. 2017): reconstruct one class at growing certainty.

The target class capsule's vector x is rescaled to each length p (x <- x * p / |x|), every other
class capsule is masked, and the decoder reconstructs: how the network draws the class as its
probability grows. A zero capsule has no direction and stays zero (the "lengths" array reports
the lengths actually fed). All images x all lengths go through the decoder in one call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.errors import ReportgenError
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import (check_target, decoder_result, float_tuple,
                                          masked_inputs, target_vectors)

LENGTHS = tuple(float(p) for p in np.round(np.linspace(0.0, 1.0, 11), 1))


@dataclass(frozen=True)
class Params:
    target: int = -1                          # class index; -1 = the predicted class
    lengths: tuple[float, ...] = LENGTHS      # 0.0, 0.1, ..., 1.0

    def __post_init__(self):
        object.__setattr__(self, "lengths", float_tuple("decoder_length", "lengths", self.lengths))
        check_target("decoder_length", self.target)
        if not self.lengths or any(not np.isfinite(p) or p < 0 for p in self.lengths):
            raise ReportgenError("Invalid option 'lengths' for technique 'decoder_length'.",
                                 expected="a non-empty list of lengths >= 0",
                                 received=repr(self.lengths))


def variants(description) -> list[Params]:
    return [Params()]


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"images": (B, P, H, W, C), "lengths": (B, P), "target": (B,), "inputs": (B, P, K*D)}."""
    params = params or Params()
    targets, vectors = target_vectors(batch, params.target, np.float64)   # (B,), (B, D)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    directions = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    wanted = np.asarray(params.lengths, np.float64)
    fed = directions[:, None, :] * wanted[None, :, None]                 # (B, P, D)
    inputs = masked_inputs(fed.astype(np.float32), targets, batch["class_capsules"].shape[1])
    return decoder_result(batch, inputs, targets,
                          lengths=np.linalg.norm(fed, axis=-1).astype(np.float32))


TECHNIQUE = Technique(
    name="decoder_length",
    citations=cite('sabour2017dynamic'),
    title="Decoder, capsule length",
    layer="decoder",
    scope="input",
    needs=frozenset({"class_capsules", "predicted"}),
    applies_to=frozenset({"decoder", "class_capsules", "vector_capsules"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.techniques.decoder_length.figures", "render_decoder_length"),
    variants=variants,
    description="The class capsule (the predicted one unless chosen) rescaled to lengths 0.0, "
                "0.1, ..., 1.0 with its direction kept, the other capsules masked, and "
                "reconstructed by the decoder: how the network draws the class at growing "
                "certainty.",
)
