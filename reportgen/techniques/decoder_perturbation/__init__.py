"""Decoder, dimension perturbation (Sabour et al. 2017, fig. 4).

Add delta to one dimension at a time of the target class capsule (every other class capsule
masked) and reconstruct: a dims x deltas grid of what each dimension encodes. All images x
dims x deltas go through the decoder in one call (chunked for big batches).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.errors import ReportgenError
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import (check_target, decoder_result, float_tuple,
                                          masked_inputs, target_vectors)

DELTAS = tuple(float(d) for d in np.round(np.linspace(-0.25, 0.25, 11), 2))


@dataclass(frozen=True)
class Params:
    target: int = -1                          # class index; -1 = the predicted class
    deltas: tuple[float, ...] = DELTAS        # -0.25, -0.20, ..., 0.25

    def __post_init__(self):
        deltas = float_tuple("decoder_perturbation", "deltas", self.deltas)
        object.__setattr__(self, "deltas", deltas)
        check_target("decoder_perturbation", self.target)
        if not self.deltas or any(not np.isfinite(d) for d in self.deltas):
            raise ReportgenError("Invalid option 'deltas' for technique 'decoder_perturbation'.",
                                 expected="a non-empty list of finite numbers",
                                 received=repr(self.deltas))


def variants(description) -> list[Params]:
    return [Params()]


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"images": (B, D, S, H, W, C), "deltas": (B, S), "target": (B,), "inputs": (B, D, S, K*D)}.

    D = class-capsule dims, S = number of deltas; images[b, d, s] has deltas[s] added to dim d.
    """
    params = params or Params()
    targets, vectors = target_vectors(batch, params.target, np.float32)   # (B,), (B, D)
    dims = vectors.shape[-1]
    deltas = np.asarray(params.deltas, np.float32)                       # (S,)
    # offsets[d, s] adds deltas[s] to dimension d only.
    offsets = np.eye(dims, dtype=np.float32)[:, None, :] * deltas[None, :, None]   # (D, S, D)
    perturbed = vectors[:, None, None, :] + offsets[None]                # (B, D, S, D)
    inputs = masked_inputs(perturbed, targets, batch["class_capsules"].shape[1])
    return decoder_result(batch, inputs, targets, deltas=np.tile(deltas, (len(targets), 1)))


TECHNIQUE = Technique(
    name="decoder_perturbation",
    citations=cite('sabour2017dynamic'),
    title="Decoder, dimension perturbation",
    layer="decoder",
    scope="input",
    needs=frozenset({"class_capsules", "predicted"}),
    applies_to=frozenset({"decoder", "class_capsules", "vector_capsules"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.techniques.decoder_perturbation.figures", "render_decoder_perturbation"),
    # 176 reconstructions and their differences per input: the heaviest figure of a step
    analysed_steps_only=True,
    variants=variants,
    description="Each dimension of the class capsule (the predicted one unless chosen) shifted "
                "by -0.25 ... 0.25 in steps of 0.05 while the others stay, then reconstructed: "
                "one row per dimension shows what that dimension encodes (stroke width, skew, "
                "scale ... in Sabour et al. 2017).",
)
