"""What the LRP/CLRP technique and its drawing share: the order of the maps, the words."""

from __future__ import annotations

import numpy as np

# maps[b, k, v]: image b, its k-th highest-scoring class (0 = the top class), variant v
VARIANTS = ("lrp", "clrp1", "clrp2")
LABELS = {"lrp": "LRP", "clrp1": "CLRP1", "clrp2": "CLRP2"}
# Why a CNN's chain of layers may have no LRP rule (rules.LRPUnsupported): said on the figure.
UNSUPPORTED = ("LRP has no rule for a layer of this network (rules for Conv2D, Dense, pooling, "
               "flatten and a sum of class units, with ReLU or linear activations: a squash "
               "or a vector norm, as ConvNet-CR-SF's head has, has none), so no map is drawn")


def supported(arrays) -> bool:
    """False where the network's layers had no LRP rule (the maps are NaN)."""
    return bool(np.asarray(arrays["supported"]).reshape(-1)[0])
