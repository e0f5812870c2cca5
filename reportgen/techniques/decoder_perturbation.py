"""Decoder, dimension perturbation (SPEC §3.6; Sabour et al. 2017, fig. 4).

Add delta to one dimension at a time of the target class capsule (every other class capsule
masked) and reconstruct: a dims x deltas grid of what each dimension encodes. All images x
dims x deltas go through the decoder in one call (chunked for big batches).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.errors import ReportgenError
from reportgen.techniques.base import Technique
from reportgen.techniques.compute import decode, masked_inputs, target_classes

DELTAS = tuple(float(d) for d in np.round(np.linspace(-0.25, 0.25, 11), 2))


@dataclass(frozen=True)
class Params:
    target: int = -1                          # class index; -1 = the predicted class
    deltas: tuple[float, ...] = DELTAS        # -0.25, -0.20, ..., 0.25

    def __post_init__(self):
        # Lists (from TOML or JSON) become tuples of floats: Params stay hashable.
        try:
            object.__setattr__(self, "deltas", tuple(float(v) for v in self.deltas))
        except (TypeError, ValueError) as exc:
            raise ReportgenError("Invalid option 'deltas' for technique 'decoder_perturbation'.",
                                 expected="a list of numbers",
                                 received=repr(self.deltas)) from exc
        if (isinstance(self.target, bool) or not isinstance(self.target, (int, np.integer))
                or self.target < -1):
            raise ReportgenError("Invalid option 'target' for technique 'decoder_perturbation'.",
                                 expected="-1 (the predicted class) or a class index >= 0",
                                 received=repr(self.target))
        if not self.deltas or any(not np.isfinite(d) for d in self.deltas):
            raise ReportgenError("Invalid option 'deltas' for technique 'decoder_perturbation'.",
                                 expected="a non-empty list of finite numbers",
                                 received=repr(self.deltas))


def variants(net) -> list[Params]:
    return [Params()] if net.decoder is not None else []


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"images": (B, D, S, H, W, C), "deltas": (B, S), "target": (B,), "inputs": (B, D, S, K*D)}.

    D = class-capsule dims, S = number of deltas; images[b, d, s] has deltas[s] added to dim d.
    """
    params = params or Params()
    capsules = np.asarray(batch["class_capsules"], np.float32)          # (B, K, D)
    targets = target_classes(batch, params.target)
    vectors = capsules[np.arange(len(targets)), targets]                 # (B, D)
    dims = vectors.shape[-1]
    deltas = np.asarray(params.deltas, np.float32)                       # (S,)
    # offsets[d, s] adds deltas[s] to dimension d only.
    offsets = np.eye(dims, dtype=np.float32)[:, None, :] * deltas[None, :, None]   # (D, S, D)
    perturbed = vectors[:, None, None, :] + offsets[None]                # (B, D, S, D)
    inputs = masked_inputs(perturbed, targets, capsules.shape[1])
    return {"images": decode(batch.net, inputs),
            "deltas": np.tile(deltas, (len(targets), 1)),
            "target": targets.astype(np.float32),
            "inputs": inputs}


def _render(result, params, ctx):
    from reportgen.figures.panels import render_decoder_perturbation
    return render_decoder_perturbation(result, params, ctx)


TECHNIQUE = Technique(
    name="decoder_perturbation",
    title="Decoder, dimension perturbation",
    layer="decoder",
    scope="input",
    needs=frozenset({"class_capsules", "predicted"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=_render,
    variants=variants,
    description="Each dimension of the class capsule (the predicted one unless chosen) shifted "
                "by -0.25 ... 0.25 in steps of 0.05 while the others stay, then reconstructed: "
                "one row per dimension shows what that dimension encodes (stroke width, skew, "
                "scale ... in Sabour et al. 2017).",
)
