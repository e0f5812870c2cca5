"""Import of XifengGuo/CapsNet-Keras weights files: an HDF5 file written here in the exact layout
Keras 2's save_weights gives CapsNet-Keras (layer groups, weight names, shapes, the (classes,
inputs, 16, 8) DigitCaps W), imported, and compared with a NumPy forward pass written from
CapsNet-Keras's code (tests/reference/imported_capsnets.py)."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from reference.imported_capsnets import capsnet_keras_forward
from reportgen.capsnet.param_count import count_trainable_params
from reportgen.errors import ReportgenError
from reportgen.importers import capsnet_keras, import_checkpoint
from reportgen.importers.tensors import Checkpoint, read_checkpoint
from reportgen.settings.model_params import parse_model_params

TOLERANCE = 1e-4


def keras_weights(seed=0, side=28, channels=1, filters=16, types=4, dims=8, classes=10,
                  class_dims=16, units=(32, 64)):
    """Random CapsNet-Keras weights, scaled so that class-capsule lengths spread over (0, 1)."""
    rng = np.random.default_rng(seed)
    grid = ((side - 8) - 9) // 2 + 1
    w = {"conv1_kernel": rng.normal(0, 0.1, (9, 9, channels, filters)),
         "conv1_bias": rng.normal(0, 0.1, filters),
         "primary_kernel": rng.normal(0, 0.1, (9, 9, filters, types * dims)),
         "primary_bias": rng.normal(0, 0.1, types * dims),
         "W": rng.normal(0, 0.2, (classes, grid * grid * types, class_dims, dims))}
    decoder, width = [], classes * class_dims
    for n in (*units, side * side * channels):
        decoder.append((rng.normal(0, 1 / np.sqrt(width), (width, n)), rng.normal(0, 0.1, n)))
        width = n
    w["decoder"] = decoder
    return {k: (v.astype(np.float32) if isinstance(v, np.ndarray) else
                [(a.astype(np.float32), b.astype(np.float32)) for a, b in v])
            for k, v in w.items()}


def write_capsnet_keras_h5(path, w, dense_names=("dense_1", "dense_2", "dense_3"),
                           full_model=False):
    """The file `model.save_weights(path)` writes for CapsNet-Keras's train_model: every layer
    of the model listed in order, weights in the groups of the layers that have some."""
    layers = [("input_1", []),
              ("conv1", [("conv1/kernel:0", w["conv1_kernel"]), ("conv1/bias:0", w["conv1_bias"])]),
              ("primarycap_conv2d", [("primarycap_conv2d/kernel:0", w["primary_kernel"]),
                                     ("primarycap_conv2d/bias:0", w["primary_bias"])]),
              ("primarycap_reshape", []), ("primarycap_squash", []),
              ("digitcaps", [("digitcaps/W:0", w["W"])]),
              ("input_2", []), ("mask_1", []), ("capsnet", []),
              ("decoder", [item for name, (kernel, bias) in zip(dense_names, w["decoder"])
                           for item in ((f"{name}/kernel:0", kernel), (f"{name}/bias:0", bias))])]
    with h5py.File(path, "w") as f:
        root = f.create_group("model_weights") if full_model else f
        root.attrs["layer_names"] = np.array([n.encode() for n, _ in layers])
        root.attrs["backend"] = b"tensorflow"
        root.attrs["keras_version"] = b"2.0.7"
        for name, weights in layers:
            group = root.create_group(name)
            group.attrs["weight_names"] = np.array([n.encode() for n, _ in weights], dtype="S")
            for weight_name, array in weights:
                group.create_dataset(weight_name, data=array)


def _load(models_dir, name):
    from reportgen.catalog import Catalog

    return Catalog(models_dir).load(name)


@pytest.mark.parametrize("dense_names,full_model", [
    (("dense_1", "dense_2", "dense_3"), False),      # Keras 2.0.7 (master)
    (("dense", "dense_1", "dense_2"), True),         # tf.keras 2.2 names; a model.save file
])
def test_imported_capsnet_keras_reproduces_the_source(tmp_path, dense_names, full_model):
    w = keras_weights()
    path = tmp_path / "trained_model.h5"
    write_capsnet_keras_h5(path, w, dense_names, full_model)
    result = import_checkpoint(tmp_path / "models", path, "capsnet-keras")
    assert (result.name, str(result.step)) == ("MNIST_CapsNetKeras", "1-0")
    params = result.params
    assert params.primary.activation == "none" and params.class_caps.routing_softmax == "classes"
    assert (params.primary.types, params.primary.dims, params.conv[0].filters) == (4, 8, 16)
    assert params.imported_from.startswith("XifengGuo/CapsNet-Keras")

    x = np.random.default_rng(5).random((4, 28, 28, 1), dtype=np.float32)
    caps_ref, lengths_ref, c_ref, recon_ref = capsnet_keras_forward(w, x)
    top2 = np.sort(lengths_ref, 1)[:, -2:]
    assert (top2[:, 1] - top2[:, 0] > 1e-3).all() and lengths_ref.min() > 0.05  # a fair test
    out = _load(tmp_path / "models", result.name).model(x)
    np.testing.assert_allclose(out["lengths"].numpy(), lengths_ref, atol=TOLERANCE)
    np.testing.assert_allclose(out["class_capsules"].numpy(), caps_ref, atol=TOLERANCE)
    np.testing.assert_allclose(out["reconstruction"].numpy(), recon_ref, atol=TOLERANCE)
    np.testing.assert_allclose(out["coupling"].numpy(), c_ref.transpose(0, 2, 1), atol=TOLERANCE)


def test_a_color_model_with_other_sizes(tmp_path):
    """32x32x3 (CapsNet-Keras on CIFAR-10): 3 channels, an 8x8 grid, another decoder width."""
    w = keras_weights(seed=3, side=32, channels=3, filters=8, types=2, dims=4, classes=5,
                      class_dims=6, units=(24,))
    path = tmp_path / "weights-07.h5"
    write_capsnet_keras_h5(path, w, ("dense_1", "dense_2"))
    result = import_checkpoint(tmp_path / "models", path, "capsnet-keras", name="C",
                               routing_iterations=2)
    assert result.params.dataset == "cifar10" and result.params.input_shape == (32, 32, 3)
    assert result.params.class_caps.routing_iterations == 2
    x = np.random.default_rng(6).random((3, 32, 32, 3), dtype=np.float32)
    _, lengths_ref, _, recon_ref = capsnet_keras_forward(w, x, routings=2)
    out = _load(tmp_path / "models", "C").model(x)
    np.testing.assert_allclose(out["lengths"].numpy(), lengths_ref, atol=TOLERANCE)
    np.testing.assert_allclose(out["reconstruction"].numpy(), recon_ref, atol=TOLERANCE)


def test_tiny_class_capsules_read_as_capsnet_keras_computes_them(tmp_path):
    """CapsNet-Keras's Length layer is sqrt(|v|^2 + 1e-7): the import records that epsilon
    (class_caps.length_epsilon) and reads the source's lengths of tiny class capsules too,
    the 3.2e-4 floor included; the model reportgen trains has none (exact lengths)."""
    w = keras_weights(seed=4)
    w["W"] = w["W"] * (10.0 ** -(1.0 + 0.3 * np.arange(10)))[:, None, None, None].astype(
        np.float32)
    path = tmp_path / "trained_model.h5"
    write_capsnet_keras_h5(path, w)
    result = import_checkpoint(tmp_path / "models", path, "capsnet-keras")
    assert result.params.class_caps.length_epsilon == pytest.approx(1e-7)
    x = np.random.default_rng(7).random((4, 28, 28, 1), dtype=np.float32)
    caps_ref, lengths_ref, _, _ = capsnet_keras_forward(w, x)
    exact = np.linalg.norm(caps_ref, axis=-1)
    assert exact.min() < 1e-6 and (lengths_ref - exact).max() > 3e-4   # a fair test
    out = _load(tmp_path / "models", result.name).model(x)
    # within 1e-7: the source's squash also has K.epsilon() under its square root, reportgen's
    # not (reportgen.importers.capsnet_keras)
    np.testing.assert_allclose(out["lengths"].numpy(), lengths_ref, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(out["class_capsules"].numpy(), caps_ref, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(out["lengths"].numpy().argmax(1), lengths_ref.argmax(1))
    assert 'length_epsilon = 1e-07' in (tmp_path / "models" / result.name / "params.toml"
                                        ).read_text()


def test_full_size_conversion_keeps_every_parameter():
    """The CapsNet-Keras MNIST model (no file, no Keras model): 8,215,568 parameters, as
    reportgen's MNIST baseline, and every one of them converted."""
    shapes = {"conv1/conv1/kernel:0": (9, 9, 1, 256), "conv1/conv1/bias:0": (256,),
              "primarycap_conv2d/primarycap_conv2d/kernel:0": (9, 9, 256, 256),
              "primarycap_conv2d/primarycap_conv2d/bias:0": (256,),
              "digitcaps/digitcaps/W:0": (10, 1152, 16, 8),
              "decoder/dense_1/kernel:0": (160, 512), "decoder/dense_1/bias:0": (512,),
              "decoder/dense_2/kernel:0": (512, 1024), "decoder/dense_2/bias:0": (1024,),
              "decoder/dense_3/kernel:0": (1024, 784), "decoder/dense_3/bias:0": (784,)}
    tensors = {k: np.zeros(s, np.float32) for k, s in shapes.items()}
    groups = {}
    for key in shapes:
        groups.setdefault(key.split("/")[0], []).append(key)
    checkpoint = Checkpoint(path=Path("trained_model.h5"),
                            format="keras-h5", tensors=tensors, groups=groups)
    converted = capsnet_keras.convert(checkpoint)
    params = parse_model_params({"dataset": "mnist", **converted.raw_params})
    assert count_trainable_params(params) == checkpoint.parameter_count == 8_215_568
    assert converted.weights.parameter_count == 8_215_568
    assert converted.weights.class_caps.shape == (1152, 10, 16, 8)
    assert params.primary.types == 32 and params.decoder.units == (512, 1024)


def _error(tmp_path, w, **write):
    path = tmp_path / "bad.h5"
    write_capsnet_keras_h5(path, w, **write)
    with pytest.raises(ReportgenError) as info:
        import_checkpoint(tmp_path / "models", path, "capsnet-keras")
    assert "\n" not in info.value.message
    assert not (tmp_path / "models").exists()     # nothing written for a refused file
    return info.value.message


def test_a_wrong_shape_names_the_tensor_and_both_shapes(tmp_path):
    w = keras_weights()
    w["conv1_bias"] = w["conv1_bias"][:15]
    message = _error(tmp_path, w)
    assert "tensor 'conv1/conv1/bias:0'" in message
    assert "Expected shape (16,)" in message and "Received shape (15,)" in message


def test_a_grid_that_does_not_fit_the_input_names_digitcaps_w(tmp_path):
    w = keras_weights()
    w["W"] = w["W"][:, :100]
    message = _error(tmp_path, w)
    assert "tensor 'digitcaps/digitcaps/W:0'" in message
    assert "(10, 144, 16, 8)" in message and "(10, 100, 16, 8)" in message


def test_a_missing_layer_and_an_extra_layer_are_named(tmp_path):
    w = keras_weights()
    path = tmp_path / "bad.h5"
    write_capsnet_keras_h5(path, w)
    with h5py.File(path, "a") as f:
        del f["digitcaps"]["digitcaps"]
        f["digitcaps"].attrs["weight_names"] = np.array([], dtype="S")
    with pytest.raises(ReportgenError, match=r"tensor 'digitcaps/digitcaps/W:0'.*Expected shape "
                                             r"\(10, 1152, 16, 8\).*Received no such tensor"):
        import_checkpoint(tmp_path / "models", path, "capsnet-keras")
    write_capsnet_keras_h5(path, w)
    with h5py.File(path, "a") as f:
        names = list(f.attrs["layer_names"]) + [b"conv2"]
        f.attrs["layer_names"] = np.array(names)
        f.create_group("conv2").attrs["weight_names"] = np.array([b"conv2/kernel:0"])
        f["conv2"].create_dataset("conv2/kernel:0", data=np.zeros((3, 3, 16, 16), np.float32))
    with pytest.raises(ReportgenError, match=r"tensor 'conv2/conv2/kernel:0'.*no such tensor in "
                                             r"this architecture.*shape \(3, 3, 16, 16\)"):
        import_checkpoint(tmp_path / "models", path, "capsnet-keras")


def test_a_file_that_is_not_keras_weights_is_one_line(tmp_path):
    path = tmp_path / "other.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.zeros(3))
    with pytest.raises(ReportgenError, match="not a Keras 2 weights file") as info:
        read_checkpoint(path)
    assert "\n" not in info.value.message
    path.write_bytes(b"not hdf5 at all")
    with pytest.raises(ReportgenError, match="unreadable"):
        read_checkpoint(path)
