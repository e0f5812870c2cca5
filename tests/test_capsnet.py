"""Capsule ops, losses and the shared layers (Sabour et al. 2017) against the NumPy oracles, the
layers' configs and a saved model. Dynamic routing and the class capsules are tested in
reportgen/families/capsnet/tests/."""

from __future__ import annotations

import numpy as np
import pytest
from keras import ops
from reference import capsules as oracle

from reportgen.capsnet.layers import Length, Mask, PrimaryCaps
from reportgen.capsnet.losses import margin_loss, reconstruction_loss
from reportgen.capsnet.ops import capsule_length, log_length, safe_norm, squash
from reportgen.families.capsnet.layers import ClassCaps


def _np(x):
    return np.asarray(ops.convert_to_numpy(x))


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def test_squash(rng):
    s = rng.normal(size=(4, 6, 8)).astype(np.float32) * rng.uniform(0.1, 5, (4, 6, 1))
    s[0, 0] = 0.0
    v = _np(squash(s))
    np.testing.assert_allclose(v, oracle.squash(s), rtol=1e-5, atol=1e-6)
    assert not v[0, 0].any()
    lengths = np.linalg.norm(v, axis=-1)
    assert (lengths < 1).all()
    # Direction is kept.
    cosine = np.sum(v[1:] * s[1:], -1) / (lengths[1:] * np.linalg.norm(s[1:], axis=-1))
    np.testing.assert_allclose(cosine, 1.0, atol=1e-5)


SCALES = (1e-30, 1e-15, 1e-8, 1e-6, 1e-5, 1e-4, 1e-3, 1e-1, 1.0, 10.0, 1e8, 1e30)


@pytest.mark.parametrize("scale", SCALES)
def test_capsule_lengths_are_exact_at_every_scale(scale, rng):
    """Lengths equal NumPy's (in float64) to float32 rounding, tiny vectors included: no
    epsilon floor (sqrt(|x|^2 + 1e-7) would read 3.2e-4 for every vector below 1e-4)."""
    x = (rng.normal(size=(6, 16)) * scale).astype(np.float32)
    x[1, 1:] = 0.0                                   # one non-zero coordinate
    expected = np.linalg.norm(x.astype(np.float64), axis=-1)
    np.testing.assert_allclose(_np(safe_norm(x)), expected, rtol=1e-6)
    np.testing.assert_allclose(_np(capsule_length(x)), expected, rtol=1e-6)
    np.testing.assert_allclose(_np(Length()(x)), expected, rtol=1e-6)
    np.testing.assert_allclose(_np(safe_norm(x, axis=0)), np.linalg.norm(
        x.astype(np.float64), axis=0), rtol=1e-6)
    assert _np(safe_norm(x, keepdims=True)).shape == (6, 1)


@pytest.mark.parametrize("scale", [s for s in SCALES if s >= 1e-15])
def test_squash_keeps_a_tiny_vectors_length_and_direction(scale, rng):
    """|squash(s)| = |s|^2 / (1 + |s|^2) and squash(s) is parallel to s, from |s| = 1e-15 (a
    squashed length of 1e-30, still a normal float32) to 1e30 (|s|^2 would overflow)."""
    s = (rng.normal(size=(5, 8)) * scale).astype(np.float32)
    s64 = s.astype(np.float64)
    n = np.linalg.norm(s64, axis=-1)
    v = _np(squash(s)).astype(np.float64)
    np.testing.assert_allclose(np.linalg.norm(v, axis=-1), n ** 2 / (1 + n ** 2), rtol=1e-5)
    np.testing.assert_allclose(v, oracle.squash(s64), rtol=1e-5, atol=0)
    cosine = np.sum(v * s64, -1) / (np.linalg.norm(v, axis=-1) * n)
    np.testing.assert_allclose(cosine, 1.0, atol=1e-6)


def test_lengths_and_squash_have_a_finite_gradient_at_zero_and_the_exact_one_elsewhere(rng):
    import tensorflow as tf

    x = rng.normal(size=(4, 8)).astype(np.float32) * np.array([[1], [1e-6], [0], [1e3]],
                                                             np.float32)
    x = tf.constant(x)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        lengths = safe_norm(x)
        squashed = tf.reduce_sum(squash(x) * tf.constant(rng.normal(size=(4, 8)), tf.float32))
        logs = log_length(safe_norm(x))
    g_length = tape.gradient(lengths, x).numpy()
    assert np.isfinite(g_length).all() and np.isfinite(tape.gradient(squashed, x).numpy()).all()
    assert np.isfinite(tape.gradient(logs, x).numpy()).all()
    assert np.isfinite(_np(logs)).all() and _np(logs)[2] == pytest.approx(np.log(1.1754944e-38))
    np.testing.assert_array_equal(g_length[2], 0.0)             # exactly zero vector
    x64 = x.numpy().astype(np.float64)[[0, 1, 3]]
    unit = x64 / np.linalg.norm(x64, axis=-1, keepdims=True)     # d|x|/dx = x / |x|
    np.testing.assert_allclose(g_length[[0, 1, 3]], unit, rtol=1e-5, atol=1e-6)
    # the squash's Jacobian against central differences (float64 NumPy oracle) away from 0
    v = rng.normal(size=8) * 0.7
    eps, J = 1e-6, np.zeros((8, 8))
    for k in range(8):
        d = np.zeros(8)
        d[k] = eps
        J[:, k] = (oracle.squash(v + d) - oracle.squash(v - d)) / (2 * eps)
    xv = tf.constant(v[None].astype(np.float32))
    with tf.GradientTape() as tape:
        tape.watch(xv)
        out = squash(xv)[0]
    np.testing.assert_allclose(tape.jacobian(out, xv).numpy()[:, 0], J, atol=1e-5)
    # a model's lengths output: a finite gradient for an all-zero capsule
    zero = tf.zeros((1, 3, 4))
    with tf.GradientTape() as tape:
        tape.watch(zero)
        total = tf.reduce_sum(Length()(zero))
    assert np.isfinite(tape.gradient(total, zero).numpy()).all()


def test_length_epsilon_computes_an_imported_sources_lengths(rng):
    """Length(epsilon) = sqrt(|v|^2 + epsilon), as CapsNet-Keras's Length layer."""
    v = (rng.normal(size=(3, 5, 4)) * 1e-5).astype(np.float32)
    expected = np.sqrt(np.sum(v.astype(np.float64) ** 2, -1) + 1e-7)
    np.testing.assert_allclose(_np(Length(1e-7)(v)), expected, rtol=1e-6)


def test_margin_loss(rng):
    lengths = rng.uniform(0, 1, (6, 4)).astype(np.float32)
    one_hot = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 6)]
    np.testing.assert_allclose(_np(margin_loss(one_hot, lengths)),
                               oracle.margin_loss(one_hot, lengths), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(
        _np(margin_loss(one_hot, lengths, m_plus=0.8, m_minus=0.2, down_weight=0.25)),
        oracle.margin_loss(one_hot, lengths, 0.8, 0.2, 0.25), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("weight", [0.392, 1.0])
def test_reconstruction_loss(weight, rng):
    images = rng.random((3, 5, 5, 1)).astype(np.float32)
    recon = rng.random((3, 5, 5, 1)).astype(np.float32)
    np.testing.assert_allclose(_np(reconstruction_loss(images, recon, weight)),
                               oracle.reconstruction_loss(images, recon, weight), rtol=1e-5)
    # 0.392 x mean over 784 pixels = 0.0005 x sum (the paper's weight).
    mnist = rng.random((1, 28, 28, 1)).astype(np.float32)
    np.testing.assert_allclose(_np(reconstruction_loss(mnist, 0 * mnist, 0.392)),
                               0.0005 * np.sum(mnist ** 2), rtol=1e-5)


@pytest.mark.parametrize("layer", [
    PrimaryCaps(4, 8, name="pc"),
    ClassCaps(10, 16, routing_iterations=2, weight_sharing=True, capsule_types=32,
              kernel_init_stddev=0.01, name="cc"),
    Length(name="len"),
    Length(1e-7, name="len_eps"),
    Mask(name="mask"),
])
def test_get_config_round_trip(layer):
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config


def test_primary_caps_groups_channels_by_type():
    """Channels t*dims ... (t+1)*dims - 1 of cell (row, col) form capsule (row*W + col)*T + t."""
    h, w, types, dims = 2, 3, 2, 3
    poses = np.arange(h * w * types * dims, dtype=np.float32).reshape(1, h, w, types * dims) / 50
    out = _np(PrimaryCaps(types, dims)(poses))
    assert out.shape == (1, h * w * types, dims)
    for row in range(h):
        for col in range(w):
            for t in range(types):
                s = poses[0, row, col, t * dims:(t + 1) * dims]
                np.testing.assert_allclose(out[0, (row * w + col) * types + t], oracle.squash(s),
                                           rtol=1e-5, atol=1e-6)


def test_mask_keeps_one_capsule(rng):
    capsules = rng.normal(size=(2, 3, 4)).astype(np.float32)
    longest = np.argmax(np.linalg.norm(capsules, axis=-1), axis=1)
    masked = _np(Mask()(capsules)).reshape(2, 3, 4)
    for b in range(2):
        np.testing.assert_allclose(masked[b, longest[b]], capsules[b, longest[b]])
        assert not np.delete(masked[b], longest[b], axis=0).any()
    chosen = _np(Mask()([capsules, np.eye(3, dtype=np.float32)[[2, 0]]])).reshape(2, 3, 4)
    np.testing.assert_allclose(chosen[0, 2], capsules[0, 2])
    np.testing.assert_allclose(chosen[1, 0], capsules[1, 0])


@pytest.mark.parametrize("weight_sharing", [False, True])
def test_model_with_batch_size_one(weight_sharing, make_net, images):
    net = make_net(seed=2, class_caps={"dims": 4, "weight_sharing": weight_sharing})
    out = net.model(images[:1], training=False)
    shapes = {k: tuple(v.shape) for k, v in out.items()}
    assert shapes["primary_capsules"] == (1, 64, 4)
    assert shapes["coupling"] == (1, 64, 3)
    assert shapes["class_capsules"] == (1, 3, 4)
    assert shapes["lengths"] == (1, 3)
    assert shapes["reconstruction"] == (1, 12, 12, 1)
    # The same image alone and within a batch gives the same outputs.
    batched = net.model(images, training=False)
    np.testing.assert_allclose(_np(out["lengths"]), _np(batched["lengths"])[:1], rtol=1e-5,
                               atol=1e-6)
    capsules, lengths = net.encoder(images[:1])
    assert tuple(capsules.shape) == (1, 3, 4) and tuple(lengths.shape) == (1, 3)


def test_save_load_round_trip(tiny_net, images, tmp_path):
    """Every capsule layer is registered as serializable: the whole model saved as .keras loads
    back (no custom_objects) and computes the same outputs."""
    import keras

    path = tmp_path / "capsnet.keras"
    tiny_net.model.save(path)
    loaded = keras.saving.load_model(path)
    assert {type(layer).__name__ for layer in loaded.layers} >= {"PrimaryCaps", "ClassCaps",
                                                                 "Length", "Mask"}
    want, got = tiny_net.model(images), loaded(images)
    assert sorted(got) == sorted(want)
    for key in want:
        np.testing.assert_allclose(_np(got[key]), _np(want[key]), rtol=1e-6, atol=1e-7,
                                   err_msg=key)


@pytest.mark.parametrize("family", ["capsnet", "gracapsnet"])
def test_primary_batch_norm(family, images, tmp_path):
    """`primary.batch_norm`: the primary conv's channels are batch-normalised before the squash
    (per channel over the batch and the grid; PyTorch's epsilon 1e-5), by the batch's statistics
    in training and by their moving averages (momentum 0.5) after; no trainable parameter is
    added, and the moving statistics travel with the weights file."""
    import keras
    from family_nets import TINY_GRACAPS, build

    from conftest import TINY_PARAMS
    from reportgen.capsnet.param_count import count_trainable_params
    from reportgen.training.checkpoints import load_weights, save_weights

    raw = TINY_GRACAPS if family == "gracapsnet" else TINY_PARAMS
    raw = {**raw, "primary": {**raw["primary"], "batch_norm": True}}
    net = build(raw, seed=3)
    plain = build({**raw, "primary": {**raw["primary"], "batch_norm": False}}, seed=3)
    assert net.trainable_params() == plain.trainable_params() == \
        count_trainable_params(net.params)
    conv = _np(net.model(images)["primary_conv"]).astype(np.float64)   # (B, H, W, C)
    types, dims = net.primary_caps.types, net.primary_caps.dims

    def capsules(normalised):
        return oracle.squash(normalised.reshape(len(images), -1, types, dims)
                             .reshape(len(images), -1, dims))

    mean, var = conv.mean(axis=(0, 1, 2)), conv.var(axis=(0, 1, 2))
    trained = net.model(images, training=True)["primary_capsules"]
    np.testing.assert_allclose(_np(trained), capsules((conv - mean) / np.sqrt(var + 1e-5)),
                               rtol=1e-4, atol=1e-5)
    norm = net.model.get_layer("primary_batch_norm")
    for _ in range(3):          # with the call above, four training batches (from 0 and 1)
        norm(net.model(images)["primary_conv"], training=True)
    moving_mean, moving_var = mean * (1 - 0.5 ** 4), 0.5 ** 4 + var * (1 - 0.5 ** 4)
    np.testing.assert_allclose(_np(norm.moving_mean), moving_mean, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(_np(norm.moving_variance), moving_var, rtol=1e-3, atol=1e-6)
    inferred = net.model(images)["primary_capsules"]
    np.testing.assert_allclose(_np(inferred),
                               capsules((conv - moving_mean) / np.sqrt(moving_var + 1e-5)),
                               rtol=1e-4, atol=1e-5)
    path = tmp_path / "1-3.weights.h5"
    save_weights(net, path)
    keras.backend.clear_session()
    fresh = build(raw, seed=4)
    load_weights(fresh, path)
    np.testing.assert_allclose(_np(fresh.model(images)["class_capsules"]),
                               _np(net.model(images)["class_capsules"]), rtol=1e-5, atol=1e-7)


def test_primary_batch_norm_is_an_optional_field():
    """Off by default, left out of a model's dict while off (its cache keys stay), a boolean."""
    from reportgen.errors import ReportgenError
    from reportgen.settings.model_params import load_model_params, parse_model_params

    assert load_model_params("models/MNIST/params.toml").primary.batch_norm is False
    assert "batch_norm" not in load_model_params("models/MNIST/params.toml").to_dict()["primary"]
    raw = {"dataset": "mnist", "input_shape": [28, 28, 1], "primary": {"batch_norm": True}}
    assert parse_model_params(raw).to_dict()["primary"]["batch_norm"] is True
    with pytest.raises(ReportgenError, match="primary.batch_norm"):
        parse_model_params({**raw, "primary": {"batch_norm": "yes"}})
