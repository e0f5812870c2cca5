"""Affine robustness results: the factors a result holds and the affNIST reference line."""

from __future__ import annotations

from reportgen.probe.affine import FACTORS

AFFNIST_REFERENCE = ("affNIST reference (Sabour et al. 2017, trained on translated MNIST, "
                     "tested on affNIST; context, not our result): CapsNet 79%, CNN of the same "
                     "size 66%")


def factors_in(arrays) -> list[str]:
    """The factors swept in `arrays` (or a summary), in FACTORS order."""
    return [f for f in FACTORS if f"values_{f}" in arrays or f"{f}_values" in arrays]
