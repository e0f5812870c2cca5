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


# Why a model without a plain CNN's logits head gets neither LRP technique (Technique.unsuited:
# the plan's "not applicable" clause). The rules (rules.py) are those of a CNN's layers; a
# capsule layer's routing and squash have none in Gu, Yang & Tresp's LRP.
NOT_A_CNN = ("its classifier head is a layer of capsules, and LRP here has rules for a plain "
             "CNN's layers only (convolutions, pooling, dense layers and their logits)")


def unsuited(description) -> str | None:
    """NOT_A_CNN for a model without a logits head (every capsule family); None for a CNN."""
    return None if "logits" in description.features else NOT_A_CNN
