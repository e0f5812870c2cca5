"""The evaluation set that dataset-level analyses share.

One EvalBatch per (model, step): a stratified sample of test images with labels. Probe tensors
over it are computed once, in chunks, on first request, and shared by every analysis that asks
(`tensors(...)`): no analysis runs its own forward pass over the clean set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from reportgen.data.held_out import stratified_sample  # noqa: F401  (the analyses' sampler)

CHUNK = 100


@dataclass
class EvalBatch:
    net: object                      # reportgen.capsnet.network.Network, weights loaded
    images: np.ndarray               # (N, H, W, C) float32 in [0, 1]
    labels: np.ndarray               # (N,) int64
    class_names: tuple[str, ...]
    _tensors: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.images)

    def chunk_size(self) -> int:
        """Images per probe pass: 64 for the baseline's 1,152 primary capsules, fewer for
        bigger grids (MNIST_LPcaps' 10,368 capsules make votes of 6.6 MB per image); one of the
        compiled passes' batch shapes, so that no chunk is padded (reportgen.capsnet.compiled)."""
        from reportgen.capsnet.compiled import fitting_bucket

        description = self.net.description
        primary = description.primary_capsules
        capsules = (primary.capsules if primary is not None else 1) * description.classes
        return fitting_bucket(int(max(8, min(CHUNK, CHUNK * 11_520 // max(capsules, 1)))))

    def prefetch(self, needs) -> None:
        """Compute, in one pass, every tensor of `needs` this model has ("<layer>" stands for
        every conv layer): what the analyses about to run declared."""
        from reportgen.probe.probe import available, expand_needs

        description = self.net.description
        self.tensors(*sorted(n for n in expand_needs(needs, description)
                             if available(n, description)))

    def tensors(self, *names: str) -> dict[str, np.ndarray]:
        """Probe tensors (see reportgen.probe.probe.TENSORS) over the whole set, memoised.

        A pass keeps only the tensors asked for (conv maps of 500 images are ~0.2 GB each), so
        callers that know what several analyses need ask for the union once (see `prefetch`);
        gradients are taken only when asked for ("grad[true]:<layer>" against `labels`).
        A family-neutral name ("routing:<layer>") is read from the tensor that holds it for this
        model (reportgen.probe.probe.resolve) and returned under the name asked for.
        """
        from reportgen.probe.probe import resolve, run_probe

        held = {n: resolve(n, self.net.description) for n in names}
        missing = sorted({held[n] for n in names if held[n] not in self._tensors})
        if missing:
            parts: dict[str, list[np.ndarray]] = {}
            chunk = self.chunk_size()
            for start in range(0, len(self.images), chunk):
                batch = run_probe(self.net, self.images[start:start + chunk], needs=missing,
                                  labels=self.labels[start:start + chunk])
                for n in missing:
                    if n in batch.tensors:
                        parts.setdefault(n, []).append(batch.tensors[n])
            for n, chunks in parts.items():
                self._tensors[n] = np.concatenate(chunks)
            for n in missing:
                if n not in self._tensors:
                    raise KeyError(f"The probe has no tensor '{n}' for this model. Known: "
                                   f"{sorted(self._tensors)}")
        return {n: self._tensors[held[n]] for n in names}

    def restricted(self, declared, reader: str = "this technique") -> RestrictedEvaluation:
        """This evaluation set, where asking for a tensor not in `declared` raises
        UndeclaredTensorError."""
        return RestrictedEvaluation(self, frozenset(declared), reader)


@dataclass(frozen=True)
class RestrictedEvaluation:
    """An EvalBatch as one technique sees it: the same images, labels and shared tensors, but
    `tensors(...)` refuses names the technique did not declare in `needs`."""

    evaluation: EvalBatch
    declared: frozenset[str]
    reader: str = "this technique"

    @property
    def net(self):
        return self.evaluation.net

    @property
    def images(self) -> np.ndarray:
        return self.evaluation.images

    @property
    def labels(self) -> np.ndarray:
        return self.evaluation.labels

    @property
    def class_names(self) -> tuple[str, ...]:
        return self.evaluation.class_names

    def __len__(self) -> int:
        return len(self.evaluation)

    def chunk_size(self) -> int:
        return self.evaluation.chunk_size()

    def tensors(self, *names: str) -> dict[str, np.ndarray]:
        from reportgen.probe.probe import check_declared, resolve

        for n in names:          # declared under either name (needs are stored resolved)
            if resolve(n, self.net.description) not in self.declared:
                check_declared(n, self.declared, self.reader)
        return self.evaluation.tensors(*names)
