"""Routing Path Visualization (Bhullar et al. 2025; first a preprint of 2020), with the thesis's
modified method.

For class capsule j and primary capsule i with lengths l_i, l_j and final coupling coefficient
c_ij, a routing path's strength is
    modified (default):  m_ij = l_i * c_ij * l_j
    original (Bhullar et al.):  m_ij = l_i * (c_ij * l_j)**2
and the map of class j at grid location h is the mean of m_ij over the primary capsules at h
(all capsule types).

Any other routing whose weights lead from children to parents (RoutingWeights.paths: EM
assignments R of matrix capsules, Hinton et al. 2018, through several layers primary ->
ConvCaps ... -> classes) has weights w and activations a in place of c and l. A path
i -> p -> … -> j multiplies one factor per hop, w_e a_head (modified) or (w_e a_head)^2
(original), and m_ij = a_i times the sum over all paths from i to j: with one routing layer this
is exactly the formula above. The sums are matrix products of the hops, top layer first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.capsnet.description import one_hop_of_lengths
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy, model_description
from reportgen.techniques.compute import check_option

METHODS = ("modified", "original")


@dataclass(frozen=True)
class Params:
    method: str = "modified"

    def __post_init__(self):
        check_option("rpv", "method", self.method, METHODS)


def variants(description) -> list[Params]:
    return [Params(method=m) for m in METHODS]


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"maps": (B, classes, grid_h, grid_w)} mean routing-path strength per grid location."""
    params = params or Params()
    check_option("rpv", "method", params.method, METHODS)
    description = model_description(batch.net)
    if not one_hop_of_lengths(description):
        return {"maps": _path_maps(batch, params)}
    layer = description.primary_capsules
    primary = np.asarray(batch[f"activations:{layer.name}"], np.float32)   # (B, gh, gw, T)
    b, gh, gw, types = primary.shape
    # l_j as the exact norm: the model's "lengths" add a 1e-7 guard under the square root, which
    # visibly biases the short class capsules of an untrained model.
    lengths = np.linalg.norm(np.asarray(batch["class_capsules"], np.float32), axis=-1)   # (B, K)
    # Capsule i = (row * gw + col) * types + type, so the coupling reshapes onto the grid.
    coupling = np.asarray(batch[f"routing:{layer.name}"], np.float32).reshape(b, gh, gw, types, -1)
    if params.method == "modified":
        paths = np.einsum("bhwt,bhwtk->bkhw", primary, coupling)
        scale = lengths
    else:
        paths = np.einsum("bhwt,bhwtk->bkhw", primary, np.square(coupling))
        scale = np.square(lengths)
    maps = paths * (scale / types)[:, :, None, None]
    return {"maps": maps.astype(np.float32, copy=False)}


def _path_maps(batch, params: Params) -> np.ndarray:
    """Path strengths from the primary capsules through every routed layer (module
    docstring), averaged over the types at each primary grid location."""
    layers = model_description(batch.net).capsule_layers
    power = 1 if params.method == "modified" else 2
    flows = None                                          # (B, children, classes)
    for layer, after in reversed(list(zip(layers, layers[1:]))):
        weights = np.asarray(batch[f"routing:{layer.name}"], np.float64)      # (B, N, P)
        heads = batch["activations"] if after.grid is None else \
            batch[f"activations:{after.name}"]
        heads = np.asarray(heads, np.float64).reshape(len(weights), 1, -1)
        hops = (weights * heads) ** power
        flows = hops if flows is None else np.einsum("bnp,bpk->bnk", hops, flows)
    primary = layers[0]
    gh, gw = primary.grid
    tails = np.asarray(batch[f"activations:{primary.name}"], np.float64).reshape(len(flows), -1)
    paths = (tails[..., None] * flows).reshape(len(flows), gh, gw, primary.types, -1)
    return paths.mean(axis=3).transpose(0, 3, 1, 2).astype(np.float32)


TECHNIQUE = Technique(
    name="rpv",
    citations=cite('bhullar2020rpv'),
    title="Routing Path Visualization",
    layer="class",
    scope="input",
    # Family-neutral names (reportgen.probe.probe): every routed layer's weights and
    # activations; one-hop vector capsules take their l_j from the class capsules' poses.
    needs=frozenset({"class_capsules", "activations", "activations:<capsules>",
                     "routing:<routed>"}),
    applies_to=frozenset({"capsule_maps", "class_capsules", "routing_paths",
                          "capsule_activations"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.techniques.rpv.figures", "render_rpv"),
    variants=variants,
    description="Where each class capsule's evidence comes from: for every primary-capsule grid "
                "location, the mean strength of the routing paths from its capsules to the class "
                "capsule, from the capsule lengths and the final coupling coefficients of dynamic "
                "routing. Original method (Bhullar et al. 2025): l_i (c_ij l_j)^2; modified method "
                "(default, sharper): l_i c_ij l_j. For any other routing whose weights lead from "
                "children to parents (matrix capsules with EM routing) the paths run through "
                "every routed layer, with its routing weights and activations a in place of c "
                "and l.",
)
