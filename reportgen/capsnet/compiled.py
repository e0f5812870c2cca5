"""A network's passes as compiled TensorFlow functions, made once per network and reused: a
plain tf.function, XLA-compiled where the family measured it faster (Family.xla,
bench/bench_xla.py; Network.uses_xla).

Reuse across checkpoints: the weights are Keras variables, which loading a step assigns in
place, so one compiled pass serves every step of the model without retracing. Reuse across
batches: images run in a few fixed batch shapes (BUCKETS): a batch is padded with zeros to the
smallest bucket holding it and larger ones are split, so an odd last batch compiles nothing new.
At inference no row depends on another (batch norm reads its moving statistics), so padding
changes no real row; the padded rows are dropped.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

# Batch shapes of the compiled passes: at most 4 compilations of a pass, and a batch padded by
# at most 2x (a tiny one to 8).
BUCKETS = (8, 16, 32, 64)


def bucket(n: int) -> int:
    """The batch shape `n` images (n <= BUCKETS[-1]) run in."""
    return next((b for b in BUCKETS if b >= n), BUCKETS[-1])


def fitting_bucket(n: int) -> int:
    """The largest bucket no larger than `n` (at least the smallest): a chunk size that pads
    nothing."""
    return max([b for b in BUCKETS if b <= n], default=BUCKETS[0])


def compiled(net, key, make: Callable[[], Callable], gradients: bool):
    """The compiled function `make()` of `net` under `key` (what it computes), made on first
    use and kept on the network; XLA-compiled if the network's family gains from it for passes
    with or without `gradients`. A pass without `gradients` must never be differentiated: it
    is traced leaving out what only gradients need."""
    xla = net.uses_xla(gradients)
    found = net.compiled_passes.get((key, xla))
    if found is None:
        import tensorflow as tf

        _drop_retracing_warning()
        function = make() if gradients else _without_gradient(make())
        found = tf.function(function, jit_compile=True if xla else None)
        net.compiled_passes[(key, xla)] = found
    return found


class _NotRetracing:
    """Drops TensorFlow's "N out of the last M calls to <function> triggered tf.function
    retracing" warning. TensorFlow counts traces per function *code*, so the passes of several
    networks (several models in one build, or builds one after another in one Python session)
    count as one function retraced again and again, while each is traced once per network and
    batch shape by design. Anything else TensorFlow logs passes."""

    def filter(self, record) -> bool:
        return "triggered tf.function retracing" not in record.getMessage()


_RETRACING_FILTER = _NotRetracing()


def _drop_retracing_warning() -> None:
    import logging

    logger = logging.getLogger("tensorflow")
    if _RETRACING_FILTER not in logger.filters:
        logger.addFilter(_RETRACING_FILTER)


def _without_gradient(function: Callable) -> Callable:
    """`function`, traced knowing that no gradient will be taken of it (EM routing then skips
    work that only shapes gradients: reportgen.capsnet.gradient_pass)."""
    from reportgen.capsnet.gradient_pass import no_gradient_pass

    def traced(*args):
        with no_gradient_pass():
            return function(*args)
    return traced


def run_in_buckets(function, images: np.ndarray, *per_image: np.ndarray, keep=None):
    """`function(images, *per_image)` over every image, called on bucket-shaped batches;
    its outputs (any nesting of tensors with the batch axis first) as NumPy arrays of the
    real rows, in order; with `keep` (names), only those of a dict's entries (that it has) are
    copied out. `images` must hold at least one image."""
    import tensorflow as tf

    arrays = (np.asarray(images), *(np.asarray(a) for a in per_image))
    largest, parts = BUCKETS[-1], []
    for start in range(0, len(arrays[0]), largest):
        chunk = [a[start:start + largest] for a in arrays]
        rows, size = len(chunk[0]), bucket(len(chunk[0]))
        if size > rows:
            chunk = [np.concatenate([a, np.zeros((size - rows, *a.shape[1:]), a.dtype)])
                     for a in chunk]
        out = function(*chunk)
        if keep is not None:
            out = {name: out[name] for name in keep if name in out}
        parts.append(tf.nest.map_structure(lambda t, rows=rows: np.asarray(t)[:rows], out))
    if len(parts) == 1:
        return parts[0]
    return tf.nest.map_structure(lambda *xs: np.concatenate(xs), *parts)


def encoder_outputs(net, images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(class vectors, class scores (N, classes)) that `net.encoder` gives `images` at
    evaluation, through one compiled pass (what the analyses that classify many transformed or
    perturbed images call, chunk after chunk)."""
    images = np.asarray(images, np.float32)
    if len(images) == 0:        # the shapes from one eager call of a blank image
        vectors, scores = net.encoder(np.zeros((1, *images.shape[1:]), np.float32),
                                      training=False)
        return (np.zeros((0, *vectors.shape[1:]), np.float32),
                np.zeros((0, scores.shape[1]), np.float32))
    both = compiled(net, "encoder_outputs",
                    lambda: (lambda x: tuple(net.encoder(x, training=False))), gradients=False)
    vectors, scores = run_in_buckets(both, images)
    return vectors, scores


def encoder_scores(net, images: np.ndarray) -> np.ndarray:
    """The class scores (N, classes) `net.encoder` gives `images` at evaluation."""
    if len(images) == 0:
        return np.zeros((0, net.params.num_classes), np.float32)
    scores = compiled(net, "encoder_scores",
                      lambda: (lambda x: net.encoder(x, training=False)[1]), gradients=False)
    return run_in_buckets(scores, np.asarray(images, np.float32))
