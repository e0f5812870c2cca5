"""The evaluation set that dataset-level analyses share (SPEC §4, issue 5).

One EvalBatch per (model, step): a stratified sample of test images with labels. Probe tensors
over it are computed once, in chunks, on first request, and shared by every analysis that asks
(`tensors(...)`): no analysis runs its own forward pass over the clean set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

CHUNK = 100


@dataclass
class EvalBatch:
    net: object                      # reportgen.capsnet.architecture.CapsNet, weights loaded
    images: np.ndarray               # (N, H, W, C) float32 in [0, 1]
    labels: np.ndarray               # (N,) int64
    class_names: tuple[str, ...]
    _tensors: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.images)

    def tensors(self, *names: str) -> dict[str, np.ndarray]:
        """Probe tensors (see reportgen.probe.probe.TENSORS) over the whole set, memoised.

        A pass keeps every tensor it produces (not only those asked for), so analyses asking one
        after another share one clean pass; gradients ("grad:<layer>") are taken only when asked
        for. Memory: ~0.25 GB for the baseline at 500 images, ~0.75 GB for MNIST_LPcaps.
        """
        from reportgen.probe.probe import run_probe

        missing = [n for n in names if n not in self._tensors]
        if missing:
            gradients = any(n.startswith("grad:") for n in missing)
            parts: dict[str, list[np.ndarray]] = {}
            for start in range(0, len(self.images), CHUNK):
                batch = run_probe(self.net, self.images[start:start + CHUNK],
                                  gradients=gradients)
                for n, value in batch.tensors.items():
                    if n not in self._tensors:
                        parts.setdefault(n, []).append(value)
            for n, chunks in parts.items():
                self._tensors[n] = np.concatenate(chunks)
            for n in missing:
                if n not in self._tensors:
                    raise KeyError(f"The probe has no tensor '{n}'. Known: {sorted(self._tensors)}")
        return {n: self._tensors[n] for n in names}


def stratified_sample(labels: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """Sorted indices of about `n` items, the same number per class (all items if n >= len)."""
    labels = np.asarray(labels)
    if n >= len(labels):
        return np.arange(len(labels))
    rng = np.random.default_rng(seed)
    classes = np.unique(labels)
    per_class = max(1, n // len(classes))
    chosen = np.concatenate([rng.permutation(np.flatnonzero(labels == c))[:per_class]
                             for c in classes])
    return np.sort(chosen)
