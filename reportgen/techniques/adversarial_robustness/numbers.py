"""Adversarial robustness results: attack targets and attacks (their order and labels) and the
flat summary keys."""

from __future__ import annotations

TARGETS = ("capsules", "votes")
# "capsules": the model's output (class capsules; for a CNN its class probabilities)
TARGET_LABELS = {"capsules": "output capsules", "votes": "votes (Gu 2022)"}
ATTACKS = ("fgsm", "pgd")
ATTACK_LABELS = {"fgsm": "FGSM", "pgd": "PGD"}


def metric_key(metric: str, target: str, attack: str, epsilon: float) -> str:
    """Flat summary key, e.g. accuracy_votes_pgd_0.1."""
    return f"{metric}_{target}_{attack}_{float(epsilon):g}"
