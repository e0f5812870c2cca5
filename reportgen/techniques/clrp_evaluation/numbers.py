"""What the CLRP evaluation and its drawing share: the methods' order and labels, the
summary keys."""

from __future__ import annotations

# the maps scored for pointing and ablation, in Gu, Yang & Tresp's Table 1 order (their
# finding, tested here, not assumed: random < gradient < LRP < CLRP)
METHODS = ("random", "gradient", "lrp", "clrp1", "clrp2")
LABELS = {"random": "random", "gradient": "gradient", "lrp": "LRP", "clrp1": "CLRP1",
          "clrp2": "CLRP2"}
# the maps whose top-2 classes' discriminativeness is measured
DISCRIMINATIVE = ("lrp", "clrp1", "clrp2")
# the paired differences (a - b) the summary records, with their intervals
DISC_PAIRS = (("clrp1", "lrp"), ("clrp2", "lrp"))
DROP_PAIRS = (("gradient", "random"), ("lrp", "gradient"), ("clrp1", "lrp"), ("clrp2", "lrp"))


def disc_key(method: str) -> str:
    return f"discriminativeness_{method}"


def pointing_key(method: str) -> str:
    return f"pointing_{method}"


def drop_key(method: str) -> str:
    return f"ablation_drop_{method}"
