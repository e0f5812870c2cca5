"""Routing weights: where on the input each parent's routing weights come from, for every
routed capsule layer of any family, whatever its capsules' activations.

The routing weights w_ij from child capsule i of a routed layer to parent j of the next layer
are whatever the layer's RoutingWeights say they are: the coupling coefficients c_ij of dynamic
routing (Sabour et al. 2017), EM assignments R_ij (Hinton et al. 2018), self-routing or
attention couplings, ... The probe gives them dense, "routing:<layer>" (B, children, parents),
0 where a child cannot route (window-form weights of a convolutional capsule layer densified).
Children are numbered (row * W + col) * types + type on the layer's grid; parents likewise on
the next layer's grid, or are the classes.

For child grid cell h and parent type p (a class, or a capsule type of the next grid layer),
the map is the mean weight from the cell's capsules to that type:

    map[h, p] = sum_{t, q in S(h)} w[(h, t), (q, p)] / (types * |S(h)|)

over the cell's capsule types t and the parent positions q whose window sees the cell, S(h)
(one position when the parents are the classes; none at an edge no window reaches: NaN). Each
map is placed over the input by the children's receptive field, as capsule heatmaps are. Only
routing weights are read: it needs no activation, so it serves pose-only capsules too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.results.references import cite
from reportgen.techniques.routing_weights.numbers import (MAPS, PREDICTED, drawn_layers,
                                                          into_classes, layer_and_parents,
                                                          parents_are_classes, positions_per_cell,
                                                          sums_words, unsuited)
from reportgen.techniques.routing_weights.numbers import layer_name as _layer_name
from reportgen.techniques.base import Technique, lazy, model_description
from reportgen.techniques.compute import check_option


@dataclass(frozen=True)
class Params:
    # The routed capsule layer on a grid whose routing weights are drawn: "" = the one routing
    # into the class capsules (a CapsNet's primary capsules); a layer routing into a
    # convolutional capsule layer is named.
    layer: str = ""


def variants(description) -> list[Params]:
    """One per routed capsule layer whose children are on a grid, in model order: the one
    routing into the class capsules is the default ("")."""
    classes = into_classes(description)
    return [Params(layer="" if c is classes else c.name) for c in drawn_layers(description)]


def layer_name(model, params: Params | None) -> str:
    """The routed layer a variant draws (`model`: a CapsNet or its ModelDescription)."""
    description = model_description(model)
    name = _layer_name(description, (params or Params()).layer)
    check_option("routing_weights", "layer", name, [c.name for c in drawn_layers(description)])
    return name


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"maps": (B, gh, gw, parent types) the mean routing weight from each child grid cell to
    each parent type (module docstring), "predicted": (B,) the predicted class}, float32."""
    description = model_description(batch.net)
    name = layer_name(description, params)
    layer, after = layer_and_parents(description, name)
    gh, gw = layer.grid
    positions = 1 if parents_are_classes(after) else after.grid[0] * after.grid[1]
    weights = np.asarray(batch[f"routing:{name}"], np.float64)           # (B, N, M)
    # child (row * gw + col) * types + type; parent position * parent types + parent type
    per_cell = weights.reshape(len(weights), gh, gw, layer.types, positions, after.types) \
        .sum(axis=(3, 4))                                                # (B, gh, gw, P)
    count = (layer.types * positions_per_cell(description, name))[None, :, :, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        maps = np.where(count > 0, per_cell / np.maximum(count, 1), np.nan)
    return {MAPS: maps.astype(np.float32),
            PREDICTED: np.asarray(batch["predicted"]).astype(np.float32)}


def numbers(result, params, ctx) -> dict:
    """What the maps are, said from the layer's RoutingWeights (their words, over which axis
    they sum to 1, their letter), with each map's mean and largest weight."""
    description = ctx.description
    name = _layer_name(description, (params or Params()).layer)
    layer, after = layer_and_parents(description, name)
    maps = np.asarray(result[MAPS], np.float64)                          # (gh, gw, P)
    seen = np.isfinite(maps).any(axis=-1)                                # cells some window sees
    per_map = maps[seen]                                                 # (cells, P)
    routing = layer.routing
    return {"layer": name, "parents": after.name,
            "parent_kind": "classes" if parents_are_classes(after) else "capsule types",
            "words": routing.words, "sums_over": routing.sums_over, "symbol": routing.symbol,
            "sums": sums_words(layer, after), "grid": list(layer.grid), "types": layer.types,
            "predicted": int(np.asarray(result[PREDICTED]).reshape(-1)[0]),
            "map_mean": [float(v) for v in per_map.mean(axis=0)] if len(per_map) else [],
            "map_max": [float(v) for v in per_map.max(axis=0)] if len(per_map) else []}


def page_layer(params) -> str:
    """Weights into the class capsules (the default variant) are shown on the ClassCaps page,
    weights into a convolutional capsule layer (a named one) on the ConvCaps page."""
    return "class" if params is None or not params.layer else "convcaps"


TECHNIQUE = Technique(
    name="routing_weights",
    citations=cite("sabour2017dynamic"),
    title="Routing weights",
    layer="class",
    scope="input",
    # family-neutral: every routed layer's dense routing weights, and the prediction
    needs=frozenset({"routing:<routed>", "predicted"}),
    applies_to=frozenset({"capsules", "primary_capsules", "routing_weights"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.techniques.routing_weights.figures", "render"),
    variants=variants,
    numbers=numbers,
    page_layer=page_layer,
    unsuited=unsuited,
    # per input, at the steps with dataset analyses: a map per parent type of every routed layer
    analysed_steps_only=True,
    description="The routing weights themselves, of every routed capsule layer whatever the "
                "family (the coupling coefficients c_ij of dynamic routing, Sabour et al. 2017; "
                "EM assignments; self-routing or self-attention couplings; ...): one map per "
                "parent type or class, the mean weight from each child grid cell to it (over "
                "the cell's capsule types and the parent positions that see it), placed over "
                "the input by the children's receptive field like the capsule heatmaps. It "
                "reads no capsule activation, so pose-only capsules have it too; the caption "
                "says what the weights are and over which axis they sum to 1.",
)
