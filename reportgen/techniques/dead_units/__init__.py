"""Units that never fire, over the evaluation set: conv filters whose post-ReLU output is 0 at
every position of every image (dead filters), and the capsule types of every capsule layer on
a grid whose activation stays below a threshold everywhere (a vector capsule's activation is
its length, a matrix capsule's its logistic unit: the family-neutral "activations:<layer>").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.probe.probe import grid_capsule_layers
from reportgen.techniques.dead_units.numbers import (FILTER_PREFIX, TYPE_PREFIX,
                                                     dead_filter_summary, dead_units)
from reportgen.techniques.base import Technique, lazy, model_description
from reportgen.techniques.compute import check_positive, require_images

NAME = "dead_units"


@dataclass(frozen=True)
class Params:
    dead_type_threshold: float = 1e-3     # a capsule type never more active than this is inactive

    def __post_init__(self):
        check_positive(NAME, "dead_type_threshold", self.dead_type_threshold, float)


def relu_layers(model) -> list[str]:
    """The conv layers with a ReLU (the only ones where "dead" means never active)."""
    return [c.name for c in model_description(model).conv_layers if c.activation == "relu"]


def needs(params, description) -> frozenset[str]:
    return frozenset({"activations:<capsules>", "conv:<layer>"})


def compute(evaluation, params: Params | None = None) -> dict[str, np.ndarray]:
    """filter_max_<layer> (filters,): the largest output of every filter of every ReLU conv
    layer over all images and positions; type_max_activation_<layer> (types,): the largest
    activation of every capsule type of every grid capsule layer over all images and cells;
    type_max_length: the first (primary) layer's; dead_type_threshold; images."""
    params = params or Params()
    require_images(evaluation, NAME)
    description = evaluation.net.description
    grids, conv = grid_capsule_layers(description), relu_layers(description)
    tensors = evaluation.tensors(*[f"activations:{n}" for n in grids],
                                 *[f"conv:{n}" for n in conv])
    out = {"images": np.int64(len(evaluation.images)),
           "dead_type_threshold": np.float64(params.dead_type_threshold)}
    for name in grids:
        out[TYPE_PREFIX + name] = np.asarray(tensors[f"activations:{name}"]).max((0, 1, 2))
    if grids:
        out["type_max_length"] = out[TYPE_PREFIX + grids[0]]
    for layer in conv:
        out[FILTER_PREFIX + layer] = np.asarray(tensors[f"conv:{layer}"]).max((0, 1, 2))
    return out


def summarize(arrays, params: Params | None = None) -> dict:
    """Dead filters per conv layer and in all; inactive capsule types per grid layer
    ("dead_types_<layer>") and in all ("dead_types": the primary capsules').

    No 95% intervals: these are counts of this network's own units over the whole set, not
    estimates from a sample of images (a unit is dead on these images or it is not)."""
    dead = dead_units(arrays)
    threshold = float(np.asarray(arrays["dead_type_threshold"]))
    inactive = {k[len(TYPE_PREFIX):]: np.flatnonzero(np.asarray(v) < threshold).tolist()
                for k, v in arrays.items() if k.startswith(TYPE_PREFIX)}
    type_total = sum(np.asarray(v).size for k, v in arrays.items() if k.startswith(TYPE_PREFIX))
    count = sum(len(v) for v in inactive.values())
    return {"images": int(np.asarray(arrays["images"])),
            **dead_filter_summary(dead),
            "dead_type_count": count, "type_count": type_total,
            "dead_type_fraction": count / type_total if type_total else 0.0,
            "dead_types": dead["types"],
            "dead_type_threshold": threshold,
            **{f"dead_types_{layer}": v for layer, v in inactive.items()}}


def variants(description) -> list[Params]:
    return [Params()]


TECHNIQUE = Technique(
    name=NAME,
    title="Dead units",
    # reads no label: images of two digits (MultiMNIST) are analysed as any other
    labels=(1, 2),
    layer="class",
    scope="dataset",
    needs=needs,
    applies_to=frozenset({"primary_capsules", "grid_activations"}),
    params_type=Params,
    variants=variants,
    version=1,
    compute=compute,
    render=lazy("reportgen.techniques.dead_units.figures", "render", Params),
    summarize=summarize,
    render_trend=lazy("reportgen.techniques.dead_units.figures", "render_trend", Params),
    render_compare=lazy("reportgen.techniques.dead_units.figures", "render_compare", Params),
    description="Units that never fire over the evaluation set: the conv filters whose "
                "post-ReLU output is 0 on every image, and the capsule types of every capsule "
                "layer on a grid whose activation (a vector capsule's length, a matrix "
                "capsule's logistic unit) stays below a threshold on every image.",
)
