"""Matrix capsules with EM routing as a model family: parameter counts (Keras and TF-free), the
layers against NumPy, the description against the built model, receptive fields measured
through the convolutional capsule layers, save/load, the spread loss and its margin."""

from __future__ import annotations

import numpy as np
import pytest
from em_fixture import TINY_EM, build_tiny_em, em_params

from reportgen.capsnet.description import ReceptiveField, describe
from reportgen.capsnet.param_count import count_trainable_params
from reportgen.errors import ReportgenError
from reportgen.settings.model_params import PARAMS_FILE, load_model_params, parse_model_params

from . import numpy_oracle as oracle

# Hinton, Sabour & Frosst 2018's small MNIST network (A=64, B=8, C=D=16): 1,664 + 8,840 +
# 18,464 + 36,896 + 2,580; smallNORB's A=B=C=D=32 on 32x32 crops with 5 classes: 832 + 17,952 +
# 147,520 + 147,520 + 2,570.
COUNTS = {"MNIST_EM": 68_444, "FASHION_MNIST_EM": 68_444, "SMALLNORB_EM": 316_394}


@pytest.fixture(scope="module")
def tiny():
    return build_tiny_em(seed=0)


@pytest.fixture(scope="module")
def images():
    return np.random.default_rng(4).random((3, 12, 12, 1), dtype=np.float32)


@pytest.mark.parametrize("name", sorted(COUNTS))
@pytest.mark.slow
def test_parameter_counts(name):
    from reportgen.capsnet.architecture import build_capsnet

    params = load_model_params(f"models/{name}/{PARAMS_FILE}")
    assert count_trainable_params(params) == COUNTS[name]
    assert build_capsnet(params).trainable_params() == COUNTS[name]


def test_mnist_em_layers_as_published():
    description = describe(load_model_params(f"models/MNIST_EM/{PARAMS_FILE}"))
    grids = [(c.name, c.grid, c.types) for c in description.capsule_layers]
    assert grids == [("primary_caps", (12, 12), 8), ("conv_caps1", (5, 5), 16),
                     ("conv_caps2", (3, 3), 16), ("class_caps", None, 10)]
    assert description.features >= {"matrix_capsules", "em_routing", "primary_capsules",
                                     "class_capsules", "conv"}
    assert "decoder" not in description.features and "vector_capsules" not in description.features
    # Every grid layer is placed on the input through every layer before it.
    assert description.receptive_field("conv_caps1") == ReceptiveField((0, 0), (9, 9), (4, 4))
    assert description.receptive_field("conv_caps2") == ReceptiveField((0, 0), (17, 17), (4, 4))


def test_description_matches_the_built_model(tiny):
    description = tiny.description
    assert description == describe(tiny.params)
    shapes = {k: tuple(v.shape[1:]) for k, v in tiny.model.output.items()}
    for conv in description.conv_layers:
        assert shapes[conv.name] == (*conv.grid, conv.filters)
    layers = description.capsule_layers
    for layer, after in zip(layers, layers[1:]):
        assert tiny.model.get_layer(layer.name) is tiny.capsule_layers[layer.name]
        if layer.grid is not None:
            assert shapes[f"{layer.name}_poses"] == (*layer.grid, layer.types, 16)
            assert shapes[f"{layer.name}_activations"] == (*layer.grid, layer.types)
        routing = shapes[f"{layer.name}_routing"]
        if after.grid is None:
            assert routing == (layer.capsules, after.types)
        else:
            k = after.kernel_size[0]
            assert routing == (*after.grid, k, k, layer.types, after.types)
    assert shapes["class_capsules"] == (3, 16) and shapes["activations"] == (3,)
    assert tiny.decoder is None and description.decoder is None


def test_primary_caps_split_poses_and_logistic_activations():
    from reportgen.families.em.layers import MatrixPrimaryCaps

    x = np.random.default_rng(0).normal(size=(2, 3, 4, 2 * 17)).astype(np.float32)
    poses, activations = MatrixPrimaryCaps(2)(x)
    np.testing.assert_array_equal(np.asarray(poses), x[..., :32].reshape(2, 3, 4, 2, 16))
    np.testing.assert_allclose(np.asarray(activations), 1 / (1 + np.exp(-x[..., 32:])),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="34 channels"):
        MatrixPrimaryCaps(2).compute_output_shape((None, 3, 4, 30))


def _numpy_conv_votes(poses, kernel, stride):
    """Dense votes (B, children, parents, 16) and mask by explicit loops: V = M W."""
    b, h, w, tin, _ = poses.shape
    k, _, _, tout = kernel.shape[:4]
    ph, pw = (h - k) // stride + 1, (w - k) // stride + 1
    votes = np.zeros((b, h * w * tin, ph * pw * tout, 16), np.float32)
    mask = np.zeros((h * w * tin, ph * pw * tout), bool)
    for p in range(ph):
        for q in range(pw):
            for ky in range(k):
                for kx in range(k):
                    y, x = p * stride + ky, q * stride + kx
                    for i in range(tin):
                        for o in range(tout):
                            child, parent = (y * w + x) * tin + i, (p * pw + q) * tout + o
                            m = poses[:, y, x, i].reshape(b, 4, 4)
                            votes[:, child, parent] = (m @ kernel[ky, kx, i, o]).reshape(b, 16)
                            mask[child, parent] = True
    return votes, mask, (ph, pw)


def test_conv_caps_layer_against_numpy(tiny, images):
    """conv_caps1 of the tiny model: votes M W by loops, then the oracle routing with each
    child free to go to every parent whose window covers it."""
    out = tiny.model(images)
    poses = np.asarray(out["primary_caps_poses"])
    activations = np.asarray(out["primary_caps_activations"])
    layer = tiny.capsule_layers["conv_caps1"]
    votes, mask, (ph, pw) = _numpy_conv_votes(poses, layer.kernel.numpy(), layer.strides)
    tout = layer.types
    want = oracle.em_routing(votes, activations.reshape(3, -1),
                             np.tile(layer.beta_u.numpy(), ph * pw),
                             np.tile(layer.beta_a.numpy(), ph * pw), 2, 0.5, mask=mask)
    np.testing.assert_allclose(np.asarray(out["conv_caps1_activations"]).reshape(3, -1), want[0],
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out["conv_caps1_poses"]).reshape(3, -1, 16), want[1],
                               rtol=1e-4, atol=1e-5)
    windows = layer.windows(poses.shape[1:3])
    np.testing.assert_allclose(windows.densify(np.asarray(out["primary_caps_routing"])), want[2],
                               atol=1e-5)
    assert tout == 3 and (ph, pw) == (4, 4)


def test_class_caps_layer_with_coordinate_addition_against_numpy(tiny, images):
    """Shared transforms per (type, class); the scaled receptive-field centre (row, column) is
    added to entries (0, 3) and (1, 3) of every vote matrix."""
    out = tiny.model(images)
    poses = np.asarray(out["conv_caps2_poses"])                  # (B, 3, 3, 2, 16)
    activations = np.asarray(out["conv_caps2_activations"])
    layer = tiny.capsule_layers["class_caps"]
    field = tiny.description.receptive_field("conv_caps2")
    b, h, w, tin, _ = poses.shape
    kernel = layer.kernel.numpy()                                # (Tin, K, 4, 4)
    votes = np.zeros((b, h, w, tin, 3, 4, 4), np.float32)
    for y in range(h):
        for x in range(w):
            for i in range(tin):
                for j in range(3):
                    votes[:, y, x, i, j] = poses[:, y, x, i].reshape(b, 4, 4) @ kernel[i, j]
                    votes[:, y, x, i, j, 0, 3] += field.centre(y, x)[0] / 11.0
                    votes[:, y, x, i, j, 1, 3] += field.centre(y, x)[1] / 11.0
    want = oracle.em_routing(votes.reshape(b, -1, 3, 16), activations.reshape(b, -1),
                             layer.beta_u.numpy(), layer.beta_a.numpy(), 2, 0.5)
    np.testing.assert_allclose(np.asarray(out["activations"]), want[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out["class_capsules"]), want[1], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out["conv_caps2_routing"]), want[2], atol=1e-5)
    # Without coordinate addition the votes differ exactly by those offsets.
    offsets = layer.coordinate_offsets()
    assert offsets[2, 1, 0, 0, 0, 3] == pytest.approx(field.centre(2, 1)[0] / 11.0)
    assert offsets[2, 1, 0, 0, 1, 3] == pytest.approx(field.centre(2, 1)[1] / 11.0)
    assert np.count_nonzero(offsets) == 2 * h * w


def test_receptive_fields_are_what_the_capsule_layers_see(monkeypatch):
    """With one routing iteration (uniform assignments), a ConvCaps cell depends on exactly
    the children in its window: light one input pixel at a time and see which cells of every
    grid layer change. The description's receptive fields must predict that set."""
    from reportgen.families.em import layers as matrix_layers

    monkeypatch.setattr(matrix_layers, "COMPILE_FROM", float("inf"))   # bit-exact comparisons
    net = build_tiny_em(seed=1, em={**TINY_EM["em"], "routing_iterations": 1})
    for layer in net.model.layers:
        if layer.__class__.__name__ == "Conv2D":
            layer.set_weights([np.full(layer.kernel.shape, 0.05, np.float32),
                               np.zeros(layer.bias.shape, np.float32)])
    pixels = np.eye(144, dtype=np.float32).reshape(-1, 12, 12, 1)
    blank = net.model(np.zeros((1, 12, 12, 1), np.float32))
    lit = net.model(pixels)
    for layer in net.description.capsule_layers[:-1]:
        changed = np.zeros((*layer.grid, 144), bool)
        for key in (f"{layer.name}_poses", f"{layer.name}_activations"):
            diff = np.abs(np.asarray(lit[key]) - np.asarray(blank[key]))
            diff = diff.reshape(144, *layer.grid, -1).max(-1)
            changed |= np.moveaxis(diff > 0, 0, -1)
        field = layer.receptive_field
        expected = np.zeros((*layer.grid, 12, 12), bool)
        for r in range(layer.grid[0]):
            for c in range(layer.grid[1]):
                y0, x0 = field.start[0] + r * field.stride[0], field.start[1] + c * field.stride[1]
                expected[r, c, y0:y0 + field.size[0], x0:x0 + field.size[1]] = True
        np.testing.assert_array_equal(changed, expected.reshape(*layer.grid, 144),
                                      err_msg=layer.name)


@pytest.mark.parametrize("name", ["MatrixPrimaryCaps", "ConvCaps", "MatrixClassCaps"])
def test_get_config_round_trip(name, tiny):
    import keras

    layer = next(l for l in tiny.model.layers if l.__class__.__name__ == name)
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(clone) is type(layer) and clone.get_config() == layer.get_config()


def test_save_load_round_trip(tiny, images, tmp_path):
    import keras

    path = tmp_path / "em.keras"
    tiny.model.save(path)
    loaded = keras.models.load_model(path)
    want, got = tiny.model(images), loaded(images)
    for key in want:
        np.testing.assert_allclose(np.asarray(got[key]), np.asarray(want[key]), rtol=1e-6,
                                   atol=1e-7, err_msg=key)


def test_spread_loss_and_its_margin_schedule():
    from reportgen.capsnet.losses import spread_loss

    rng = np.random.default_rng(2)
    activations = rng.random((5, 4)).astype(np.float32)
    labels = np.array([0, 1, 2, 3, 1])
    one_hot = np.eye(4, dtype=np.float32)[labels]
    for margin in (0.2, 0.55, 0.9):
        want = [sum(max(0.0, margin - (a[t] - a[j])) ** 2 for j in range(4) if j != t)
                for a, t in zip(activations.astype(np.float64), labels)]
        np.testing.assert_allclose(np.asarray(spread_loss(one_hot, activations, margin)), want,
                                   rtol=1e-5)
    em = em_params().family_settings
    assert [em.margin(p) for p in (0.0, 0.5, 1.0, 2.0)] == pytest.approx([0.2, 0.55, 0.9, 0.9])
    assert em.learning_rate_factor(0.5) == 1.0                 # no decay unless asked for
    decaying = em_params(em={**TINY_EM["em"], "learning_rate_decay": 0.9}).family_settings
    assert [decaying.learning_rate_factor(p) for p in (0.0, 0.5, 1.0)] == pytest.approx(
        [1.0, 0.55, 0.1])
    net = build_tiny_em()
    net.set_training_progress(0.25)
    assert float(np.asarray(net.margin)) == pytest.approx(0.2 + 0.7 * 0.25)
    assert all(w.path != net.margin.path for w in net.model.weights)   # never saved


@pytest.mark.parametrize("patch, field", [
    ({"primary": {"types": 2, "dims": 8}}, "primary.dims"),
    ({"decoder": {"enabled": True}}, "decoder.enabled"),
    ({"em": {"inverse_temperature": 0}}, "em.inverse_temperature"),
    ({"em": {"margin_start": 0.5, "margin_end": 0.4}}, "em.margin_end"),
    ({"em": {"learning_rate_decay": 1.0}}, "em.learning_rate_decay"),
    ({"em": {"conv_caps": [{"types": 2, "kernel_size": 11}]}}, "em.conv_caps[0].kernel_size"),
    ({"em": {"conv_caps": [{"kernels": 2}]}}, "em.conv_caps[0].kernels"),
    ({"family": "matrix"}, "family"),
])
def test_invalid_em_settings_are_named(patch, field):
    with pytest.raises(ReportgenError) as err:
        parse_model_params({**TINY_EM, **patch}, source=f"models/X/{PARAMS_FILE}")
    assert f"'{field}'" in err.value.message


def test_other_families_keep_their_parameter_dicts():
    """The em settings are left out of to_dict() at their defaults: a vector CapsNet's cache
    keys do not change."""
    assert "em" not in load_model_params(f"models/MNIST/{PARAMS_FILE}").to_dict()
    assert em_params().to_dict()["em"]["conv_caps"][0] == {"types": 3, "kernel_size": 3,
                                                          "strides": 2}


@pytest.mark.slow
def test_eager_calls_of_big_vote_tensors_run_compiled_with_the_same_values(images, monkeypatch):
    """Eagerly, a layer with at least COMPILE_FROM vote values runs XLA-compiled: the same
    outputs and gradients up to float32 rounding."""
    import tensorflow as tf

    from reportgen.families.em import layers as matrix_layers

    net = build_tiny_em(seed=5)
    x = tf.constant(images)

    def run():
        with tf.GradientTape() as tape:
            tape.watch(x)
            out = net.model(x)
            score = tf.reduce_sum(out["activations"])
        return {k: np.asarray(v) for k, v in out.items()}, tape.gradient(score, x).numpy()

    plain, plain_grad = run()
    assert "_compiled_route" not in net.capsule_layers["conv_caps1"].__dict__
    monkeypatch.setattr(matrix_layers, "COMPILE_FROM", 0)
    compiled, compiled_grad = run()
    assert "_compiled_route" in net.capsule_layers["conv_caps1"].__dict__
    # XLA fuses the votes' multiply-adds (one rounding, not two): 1-ulp differences in the
    # votes, which routing at a low temperature magnifies to about 1e-5 in R_ij.
    for key in plain:
        np.testing.assert_allclose(compiled[key], plain[key], rtol=1e-4, atol=1e-5, err_msg=key)
    np.testing.assert_allclose(compiled_grad, plain_grad, rtol=1e-4, atol=1e-6)
