"""Dead units results (reportgen.techniques.dead_units): the per-layer keys and the dead units
they imply."""

from __future__ import annotations

import numpy as np

FILTER_PREFIX = "filter_max_"             # + conv layer name: (filters,) max output over the set
TYPE_PREFIX = "type_max_activation_"      # + grid capsule layer: (types,) max activation


def dead_units(arrays) -> dict:
    """{layer: indices of dead filters}, {layer: its filter count}, indices of inactive
    capsule types, and totals."""
    filters = {k[len(FILTER_PREFIX):]: np.asarray(v) for k, v in arrays.items()
               if k.startswith(FILTER_PREFIX)}
    dead = {layer: np.flatnonzero(v <= 0).tolist() for layer, v in filters.items()}
    threshold = float(np.asarray(arrays["dead_type_threshold"]))
    types = np.flatnonzero(np.asarray(arrays["type_max_length"]) < threshold).tolist()
    return {"filters": dead, "filter_counts": {layer: int(v.size) for layer, v in filters.items()},
            "filter_total": int(sum(v.size for v in filters.values())),
            "types": types, "type_total": int(np.asarray(arrays["type_max_length"]).size)}


def dead_filter_summary(dead: dict) -> dict:
    """The dead conv filters of `dead_units`, per layer and in all (JSON-ready): each layer
    counted on its own ("filter_layers", "filter_count_per_layer",
    "dead_filter_count_per_layer", "dead_filters_<layer>"), then summed."""
    layers = list(dead["filters"])
    count = sum(len(v) for v in dead["filters"].values())
    total = dead["filter_total"]
    return {"filter_layers": layers,
            "filter_count_per_layer": [dead["filter_counts"][layer] for layer in layers],
            "dead_filter_count_per_layer": [len(dead["filters"][layer]) for layer in layers],
            "dead_filter_count": count, "filter_count": total,
            "dead_filter_fraction": count / total if total else 0.0,
            **{f"dead_filters_{layer}": indices for layer, indices in dead["filters"].items()}}
