"""Routing diagnostics results: the per-layer filter keys and the dead units they imply."""

from __future__ import annotations

import numpy as np

FILTER_PREFIX = "filter_max_"             # + conv layer name: (filters,) max output over the set


def dead_units(arrays) -> dict:
    """{layer: indices of dead filters}, indices of inactive capsule types, and totals."""
    filters = {k[len(FILTER_PREFIX):]: np.asarray(v) for k, v in arrays.items()
               if k.startswith(FILTER_PREFIX)}
    dead = {layer: np.flatnonzero(v <= 0).tolist() for layer, v in filters.items()}
    threshold = float(np.asarray(arrays["dead_type_threshold"]))
    types = np.flatnonzero(np.asarray(arrays["type_max_length"]) < threshold).tolist()
    return {"filters": dead, "filter_total": int(sum(v.size for v in filters.values())),
            "types": types, "type_total": int(np.asarray(arrays["type_max_length"]).size)}
