"""The compiled passes (reportgen.capsnet.compiled): XLA gives the probe's and the evaluation's
values of plain eager Keras calls, for every family that switches it on; one compiled pass
serves every checkpoint and every batch size of a model without retracing."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TINY_PARAMS
from em_fixture import TINY_EM
from family_nets import TINY_GRACAPS, TINY_SELF_ROUTING, build, tiny_cnn

# A tiny model of each family (tests/family_nets.py, tests/em_fixture.py).
TINY_BY_FAMILY = {"capsnet": TINY_PARAMS, "gracapsnet": TINY_GRACAPS,
                  "self_routing": TINY_SELF_ROUTING, "cnn": tiny_cnn("r"), "em": TINY_EM}


def _switched_on() -> list:
    """The families with XLA on; those that also compile a backward pass take ~15 s: slow."""
    from reportgen.settings.families import family

    return [pytest.param(name, marks=[pytest.mark.slow] if family(name).xla.gradients else [])
            for name in TINY_BY_FAMILY if family(name).xla.forward or family(name).xla.gradients]


def _eager_reference(net, images):
    """Every model output, and the gradient of each image's top class score with respect to
    each conv layer's output, by eager Keras calls (no tf.function, no XLA)."""
    import tensorflow as tf

    from reportgen.probe.probe import score_output

    x = tf.constant(images)
    with tf.GradientTape() as tape:
        tape.watch(x)
        outputs = net.model(x, training=False)
        scores = outputs[score_output(net.description)]
        top = tf.reduce_max(scores, axis=1)
    names = net.description.conv_layer_names
    grads = tape.gradient(top, [outputs[n] for n in names])
    return ({k: np.asarray(v) for k, v in outputs.items()},
            {n: np.asarray(g) for n, g in zip(names, grads)})


@pytest.mark.parametrize("name", _switched_on())
def test_xla_passes_equal_eager_keras(name, images):
    """Predictions, capsule outputs and gradients of the XLA-compiled probe and evaluation
    equal eager Keras calls within 1e-4, on 5 images (padded to a batch of 8)."""
    from reportgen.probe.probe import run_probe, score_output
    from reportgen.settings.families import family
    from reportgen.training.evaluate import class_lengths

    net = build(TINY_BY_FAMILY[name])
    xla = family(name).xla
    outputs, grads = _eager_reference(net, images)
    score = outputs[score_output(net.description)]
    # what every model predicts by: a CNN's probabilities, matrix capsules' activations
    lengths = next(outputs[k] for k in ("lengths", "probabilities", "activations")
                   if k in outputs)
    close = dict(rtol=1e-4, atol=1e-4)
    if xla.forward:
        assert net.uses_xla(gradients=False)
        batch = run_probe(net, images, gradients=False)
        np.testing.assert_array_equal(batch["predicted"], score.argmax(axis=1))
        np.testing.assert_allclose(batch["lengths"], lengths, **close)
        for n in net.description.conv_layer_names:
            np.testing.assert_allclose(batch[f"conv:{n}"], outputs[n], **close)
        for key in ("class_capsules", "coupling", "primary_capsules", "attention",
                    "reconstruction", "features", "logits"):
            if key in batch.tensors:
                np.testing.assert_allclose(batch[key], outputs[key], **close)
        np.testing.assert_allclose(class_lengths(net, images), lengths, **close)
    if xla.gradients:
        assert net.uses_xla(gradients=True)
        batch = run_probe(net, images, needs=[f"grad:{n}" for n in grads])
        for n, expected in grads.items():
            np.testing.assert_allclose(batch[f"grad:{n}"], expected, **close)


def test_one_trace_across_checkpoints_and_batch_sizes(tmp_path, make_net, images):
    """Loading another step's weights and odd batch sizes within one bucket (5, 7 images: both
    run as 8) neither retrace the probe's pass nor the evaluation's; the values follow the
    loaded weights."""
    import keras

    from reportgen.probe.probe import run_probe
    from reportgen.training.checkpoints import load_weights
    from reportgen.training.evaluate import class_lengths

    net = make_net(seed=3)
    first, second = tmp_path / "first.weights.h5", tmp_path / "second.weights.h5"
    net.model.save_weights(str(first))
    for w in net.model.trainable_weights:        # another step: other weights
        w.assign(keras.random.normal(w.shape, stddev=0.3, seed=7))
    net.model.save_weights(str(second))
    more = np.random.default_rng(5).random((7, *images.shape[1:]), dtype=np.float32)

    def traces():
        return {key: f.experimental_get_tracing_count() for key, f in net.compiled_passes.items()}

    load_weights(net, first)
    first_lengths = run_probe(net, images, needs=["lengths"])["lengths"]
    first_eval = class_lengths(net, images)
    after_first = traces()
    assert len(after_first) == 2 and set(after_first.values()) == {1}
    load_weights(net, second)
    second_lengths = run_probe(net, more, needs=["lengths"])["lengths"]
    class_lengths(net, more)
    moved = run_probe(net, images, needs=["lengths"])["lengths"]
    assert traces() == after_first
    reference = _eager_reference(net, more)[0]["lengths"]
    np.testing.assert_allclose(second_lengths, reference, rtol=1e-5, atol=1e-6)
    load_weights(net, first)
    np.testing.assert_allclose(run_probe(net, images, needs=["lengths"])["lengths"],
                               first_lengths, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(class_lengths(net, images), first_eval, rtol=1e-6, atol=1e-7)
    assert not np.allclose(first_lengths, moved, atol=1e-3)
    assert traces() == after_first


def test_run_in_buckets_pads_splits_and_drops_padding():
    """70 rows run as a batch of 64 and one of 8 (6 padded with zeros); the result is the
    function of the real rows only, in order."""
    import tensorflow as tf

    from reportgen.capsnet.compiled import bucket, fitting_bucket, run_in_buckets

    shapes = []

    @tf.function
    def function(x, k):
        shapes.append(int(x.shape[0]))        # runs when tracing: once per batch shape
        return {"sum": tf.reduce_sum(x, axis=1) + tf.cast(k, tf.float32), "rows": x}

    x = np.random.default_rng(0).random((70, 3), dtype=np.float32)
    k = np.arange(70)
    out = run_in_buckets(function, x, k)
    assert shapes == [64, 8]
    np.testing.assert_allclose(out["sum"], x.sum(axis=1) + k, rtol=1e-6)
    np.testing.assert_array_equal(out["rows"], x)
    run_in_buckets(function, x[:5], k[:5])
    assert shapes == [64, 8]
    assert [bucket(n) for n in (1, 8, 9, 33, 64)] == [8, 8, 16, 64, 64]
    assert [fitting_bucket(n) for n in (3, 8, 100, 20)] == [8, 8, 64, 16]


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n == "em" else [])
                                  for n in TINY_BY_FAMILY])
def test_encoder_outputs_equal_the_eager_encoder(name, images):
    """What the robustness, benchmark, fidelity and segmentation analyses classify with: the
    compiled encoder pass gives the eager encoder's class vectors and scores (5 images run as
    8), and empty arrays of the right shapes for no image."""
    from reportgen.capsnet.compiled import encoder_outputs, encoder_scores

    net = build(TINY_BY_FAMILY[name])
    vectors, scores = (np.asarray(t) for t in net.encoder(images, training=False))
    got_vectors, got_scores = encoder_outputs(net, images)
    close = dict(rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_vectors, vectors, **close)
    np.testing.assert_allclose(got_scores, scores, **close)
    np.testing.assert_allclose(encoder_scores(net, images), scores, **close)
    none_vectors, none_scores = encoder_outputs(net, images[:0])
    assert none_vectors.shape == (0, *vectors.shape[1:])
    assert none_scores.shape == (0, *scores.shape[1:])


class _Stub:
    """What `compiled` reads of a network: its passes and whether it uses XLA."""

    def __init__(self):
        self.compiled_passes = {}

    def uses_xla(self, gradients):
        return False


def test_passes_of_many_networks_do_not_warn_of_retracing():
    """TensorFlow counts traces per function code: one pass of eight networks, each traced
    once, reads to it as one function retraced 8 times and warns; reportgen drops that warning
    (and nothing else TensorFlow logs). The same calls through a bare tf.function warn."""
    import logging

    import tensorflow as tf

    from reportgen.capsnet.compiled import compiled

    logged = []

    class Keep(logging.Handler):
        def emit(self, record):
            logged.append(record.getMessage())

    logger = logging.getLogger("tensorflow")
    handler = Keep(level=logging.WARNING)
    logger.addHandler(handler)
    try:
        def doubled():
            return lambda x: x * 2.0

        for n in range(8):
            compiled(_Stub(), "doubled", doubled, gradients=True)(np.ones((n + 1, 3), np.float32))
        assert not [m for m in logged if "retracing" in m]

        def tripled(x):         # the same pattern, bare: TensorFlow warns
            return x * 3.0

        logger.removeFilter(next(f for f in logger.filters if "NotRetracing" in type(f).__name__))
        try:
            for n in range(8):
                tf.function(tripled)(np.ones((n + 1, 3), np.float32))
        finally:
            compiled(_Stub(), "doubled", doubled, gradients=True)      # puts the filter back
        assert [m for m in logged if "retracing" in m]
        logger.warning("something else")
        assert "something else" in logged
    finally:
        logger.removeHandler(handler)
