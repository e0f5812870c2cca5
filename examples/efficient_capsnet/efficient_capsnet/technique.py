"""Self-attention coupling: per input, the coupling coefficients of Efficient-CapsNet's
self-attention routing from every primary capsule to every class (Mazzia, Salvetti &
Chiaberge 2021, eq. 4), the routing bias b_ij added after the softmax, and the weights c_ij +
b_ij the votes are actually summed with (eq. 5).

For each class j, c_ij = softmax_j(u_hat[j|i] . sum_k u_hat[j|k] / sqrt(D)): a primary capsule
couples to the classes whose votes agree with the other capsules' votes for them. Each row of
c sums to 1 over the classes; b is learnt and does not depend on the input, so c + b need not
sum to 1 and may be negative. The figure answers: which primary capsules feed the predicted
class, and how much does the bias change that?

Reads two probe tensors: the coupling "routing:<routed>" (the model output
"primary_caps_routing", a routing output of the network contract) and
"primary_caps_routing_with_bias", the output the family declares as its own
(`Family.outputs`). The bias is their difference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.sdk import Technique, lazy

from efficient_capsnet.family import BIASED_ROUTING, CITATION

NAME = "self_attention_coupling"


@dataclass(frozen=True)
class Params:
    """No options."""


def variants(description) -> list[Params]:
    return [Params()]


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"coupling": (B, children, classes) c_ij, "weights": c_ij + b_ij, "bias": (B,
    children, classes) their difference b_ij (the same for every image, to float rounding),
    "predicted": (B,)}."""
    layer = batch.net.description.routed_layers[0].name
    coupling = np.asarray(batch[f"routing:{layer}"], np.float64)
    weights = np.asarray(batch[BIASED_ROUTING], np.float64)
    return {"coupling": coupling.astype(np.float32), "weights": weights.astype(np.float32),
            "bias": (weights - coupling).astype(np.float32),
            "predicted": np.asarray(batch["predicted"], np.float32)}


def numbers(arrays, params, ctx) -> dict:
    """The predicted class's share of the coupling (sum_i c_ij / children), with and without
    the bias, and the largest |b_ij|."""
    coupling = np.asarray(arrays["coupling"], np.float64)
    weights = np.asarray(arrays["weights"], np.float64)
    predicted = int(np.asarray(arrays["predicted"]).reshape(-1)[0])
    children = coupling.shape[0]
    return {"predicted": predicted,
            "coupling_share": float(coupling[:, predicted].sum() / children),
            "weight_share": float(weights[:, predicted].sum() / weights.sum())
            if weights.sum() else float("nan"),
            "max_abs_bias": float(np.abs(np.asarray(arrays["bias"])).max())}


TECHNIQUE = Technique(
    name=NAME,
    title="Self-attention coupling (Efficient-CapsNet)",
    layer="class",
    scope="input",
    needs=frozenset({"routing:<routed>", BIASED_ROUTING, "predicted"}),
    applies_to=frozenset({"self_attention_routing"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("efficient_capsnet.figures", "render"),
    variants=variants,
    numbers=numbers,
    citations=(CITATION,),
    description="Which primary capsules route to which class in Efficient-CapsNet (Mazzia, "
                "Salvetti & Chiaberge 2021): the self-attention coupling coefficients c_ij "
                "(each primary capsule's sum to 1 over the classes), the learnt routing bias "
                "b_ij added after the softmax, and the weights c_ij + b_ij each vote is summed "
                "with.",
)
