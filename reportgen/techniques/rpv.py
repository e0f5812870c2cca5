"""Routing Path Visualization (Bhullar 2020, with the thesis's modified method).

For class capsule j and primary capsule i with lengths l_i, l_j and final coupling coefficient
c_ij, a routing path's strength is
    modified (default):  m_ij = l_i * c_ij * l_j
    original (Bhullar):  m_ij = l_i * (c_ij * l_j)**2
and the map of class j at grid location h is the mean of m_ij over the primary capsules at h
(all capsule types).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.techniques.base import Technique, lazy
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
    primary = np.asarray(batch["primary_lengths"], np.float32)          # (B, gh, gw, T)
    b, gh, gw, types = primary.shape
    # l_j as the exact norm: the model's "lengths" add a 1e-7 guard under the square root, which
    # visibly biases the short class capsules of an untrained model.
    lengths = np.linalg.norm(np.asarray(batch["class_capsules"], np.float32), axis=-1)   # (B, K)
    # Capsule i = (row * gw + col) * types + type, so the coupling reshapes onto the grid.
    coupling = np.asarray(batch["coupling"], np.float32).reshape(b, gh, gw, types, -1)
    if params.method == "modified":
        paths = np.einsum("bhwt,bhwtk->bkhw", primary, coupling)
        scale = lengths
    else:
        paths = np.einsum("bhwt,bhwtk->bkhw", primary, np.square(coupling))
        scale = np.square(lengths)
    maps = paths * (scale / types)[:, :, None, None]
    return {"maps": maps.astype(np.float32, copy=False)}


TECHNIQUE = Technique(
    name="rpv",
    title="Routing Path Visualization",
    layer="class",
    scope="input",
    needs=frozenset({"primary_lengths", "coupling", "class_capsules"}),
    applies_to=frozenset({"primary_capsules", "vector_capsules", "class_capsules",
                          "dynamic_routing"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.figures.panels", "render_rpv"),
    variants=variants,
    description="Where each class capsule's evidence comes from: for every primary-capsule grid "
                "location, the mean strength of the routing paths from its capsules to the class "
                "capsule, from the capsule lengths and the final coupling coefficients of dynamic "
                "routing. Original method (Bhullar 2020): l_i (c_ij l_j)^2; modified method "
                "(default, sharper): l_i c_ij l_j.",
)
