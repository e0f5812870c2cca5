"""Per-image outcomes a summary keeps so that two models can be compared on the same images.

Two models' accuracies over one evaluation set are not independent samples: each image is
easy or hard for both. Their difference is read paired, image by image (McNemar 1947; the
paired bootstrap of `intervals.paired_difference`), which needs each model's right/wrong per
image. A summary keeps them under summary[PER_IMAGE]: {"images": the fingerprint of the
evaluation labels (their count and a hash of their order), key: "0110…" one character per
image}. Two models' outcomes pair only when their fingerprints are equal — the same
stratified sample of the same test split, image for image.

No TensorFlow here; NumPy and SciPy.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from reportgen.results import intervals as iv

PER_IMAGE = "per_image"
IMAGES = "images"


def fingerprint(labels) -> str:
    """"N:hash" of the evaluation labels in their order (equal for the same sample)."""
    labels = np.ascontiguousarray(np.asarray(labels, np.int64).reshape(-1))
    return f"{labels.size}:{hashlib.sha1(labels.tobytes()).hexdigest()[:16]}"


def attach_outcomes(summary: dict, key: str, correct, labels) -> dict:
    """Record the per-image outcomes `correct` (N,) of summary[key] over the images whose
    labels are `labels` (N,); returns `summary`."""
    correct = np.asarray(correct, bool).reshape(-1)
    if correct.size != np.asarray(labels).size:
        raise ValueError(f"outcomes of '{key}' need one per image: {correct.size} for "
                         f"{np.asarray(labels).size} labels")
    kept = summary.setdefault(PER_IMAGE, {})
    kept[IMAGES] = fingerprint(labels)
    kept[key] = "".join("1" if c else "0" for c in correct.tolist())
    return summary


def outcomes_of(summary: dict | None, key: str) -> tuple[str, np.ndarray] | None:
    """(fingerprint, outcomes (N,) bool) a summary recorded for `key`, or None."""
    kept = (summary or {}).get(PER_IMAGE) or {}
    text, images = kept.get(key), kept.get(IMAGES)
    if not isinstance(text, str) or not isinstance(images, str):
        return None
    return images, np.frombuffer(text.encode("ascii"), np.uint8) == ord("1")


def mcnemar_exact(a, b) -> float:
    """The two-sided exact McNemar p-value of two models' outcomes on the same images: the
    images only one of them gets right, n01 and n10, as a binomial draw of n01 + n10 with
    p = 1/2 (1.0 when no image tells them apart)."""
    from scipy.stats import binomtest

    a = np.asarray(a, bool).reshape(-1)
    b = np.asarray(b, bool).reshape(-1)
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    if only_a + only_b == 0:
        return 1.0
    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


@dataclass(frozen=True)
class PairedComparison:
    """Model a's score minus model b's on the same images: the difference with its paired
    95% interval (images resampled together), McNemar's exact p-value, and the images a
    model gets right that the other does not."""

    difference: iv.Interval
    p_value: float
    only_a: int
    only_b: int

    @property
    def decided(self) -> bool:
        """Whether the interval excludes 0 (the two scores can be told apart)."""
        return self.difference.excludes(0.0)

    def words(self, a: str, b: str, what: str) -> str:
        """One sentence, decided by the interval."""
        d = self.difference
        points = f"{100 * abs(d.value):.1f} points ({iv.ci_text(d, 100, 1)} on the difference"
        points += f", McNemar {p_words(self.p_value)}, {d.n:,} images)"
        if d.above(0.0):
            return f"{a}'s {what} is above {b}'s by {points}."
        if d.below(0.0):
            return f"{a}'s {what} is below {b}'s by {points}."
        needed = iv.images_to_tell(d, 0.0)
        tail = f"; about {needed:,} images would be needed to tell them apart" \
            if needed is not None else "; they get the same images right"
        return (f"{a}'s and {b}'s {what} cannot be told apart on these {d.n:,} images "
                f"(difference {100 * d.value:+.1f} points, {iv.ci_text(d, 100, 1)}){tail}.")


def p_words(p: float) -> str:
    """"p = 0.219", or "p < 0.001" below what three decimals show."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def compare(a, b) -> PairedComparison:
    """`PairedComparison` of outcomes a and b (N,) of two models on the same images."""
    a = np.asarray(a, bool).reshape(-1)
    b = np.asarray(b, bool).reshape(-1)
    if a.shape != b.shape:
        raise ValueError(f"paired outcomes need the same images: {a.size} vs {b.size}")
    difference = iv.paired_difference(a.astype(np.float64), b.astype(np.float64))
    return PairedComparison(difference, mcnemar_exact(a, b), int(np.sum(a & ~b)),
                            int(np.sum(~a & b)))


def pairable(first: tuple[str, np.ndarray] | None,
             second: tuple[str, np.ndarray] | None) -> bool:
    """Whether two recorded outcomes are of the same images (equal fingerprints)."""
    return first is not None and second is not None and first[0] == second[0] \
        and first[1].size == second[1].size
