"""Decoder, capsule length (SPEC §3.5): reconstruct one class at growing certainty.

The target class capsule's vector x is rescaled to each length p (x <- x * p / |x|), every other
class capsule is masked, and the decoder reconstructs: how the network draws the class as its
probability grows. A zero capsule has no direction and stays zero (the "lengths" array reports
the lengths actually fed). All images x all lengths go through the decoder in one call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.errors import ReportgenError
from reportgen.techniques.base import Technique
from reportgen.techniques.compute import decode, masked_inputs, target_classes

LENGTHS = tuple(float(p) for p in np.round(np.linspace(0.0, 1.0, 11), 1))


@dataclass(frozen=True)
class Params:
    target: int = -1                          # class index; -1 = the predicted class
    lengths: tuple[float, ...] = LENGTHS      # 0.0, 0.1, ..., 1.0

    def __post_init__(self):
        # Lists (from TOML or JSON) become tuples of floats: Params stay hashable.
        try:
            object.__setattr__(self, "lengths", tuple(float(v) for v in self.lengths))
        except (TypeError, ValueError) as exc:
            raise ReportgenError("Invalid option 'lengths' for technique 'decoder_length'.",
                                 expected="a list of numbers",
                                 received=repr(self.lengths)) from exc
        if (isinstance(self.target, bool) or not isinstance(self.target, (int, np.integer))
                or self.target < -1):
            raise ReportgenError("Invalid option 'target' for technique 'decoder_length'.",
                                 expected="-1 (the predicted class) or a class index >= 0",
                                 received=repr(self.target))
        if not self.lengths or any(not np.isfinite(p) or p < 0 for p in self.lengths):
            raise ReportgenError("Invalid option 'lengths' for technique 'decoder_length'.",
                                 expected="a non-empty list of lengths >= 0",
                                 received=repr(self.lengths))


def variants(net) -> list[Params]:
    return [Params()] if net.decoder is not None else []


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"images": (B, P, H, W, C), "lengths": (B, P), "target": (B,), "inputs": (B, P, K*D)}."""
    params = params or Params()
    capsules = np.asarray(batch["class_capsules"], np.float64)          # (B, K, D)
    targets = target_classes(batch, params.target)
    vectors = capsules[np.arange(len(targets)), targets]                 # (B, D)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    directions = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    wanted = np.asarray(params.lengths, np.float64)
    fed = directions[:, None, :] * wanted[None, :, None]                 # (B, P, D)
    inputs = masked_inputs(fed.astype(np.float32), targets, capsules.shape[1])
    return {"images": decode(batch.net, inputs),
            "lengths": np.linalg.norm(fed, axis=-1).astype(np.float32),
            "target": targets.astype(np.float32),
            "inputs": inputs}


def _render(result, params, ctx):
    from reportgen.figures.panels import render_decoder_length
    return render_decoder_length(result, params, ctx)


TECHNIQUE = Technique(
    name="decoder_length",
    title="Decoder, capsule length",
    layer="decoder",
    scope="input",
    needs=frozenset({"class_capsules", "predicted"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=_render,
    variants=variants,
    description="The class capsule (the predicted one unless chosen) rescaled to lengths 0.0, "
                "0.1, ..., 1.0 with its direction kept, the other capsules masked, and "
                "reconstructed by the decoder: how the network draws the class at growing "
                "certainty.",
)
