"""Gu 2022's model kinds across families: No-R (uniform coupling), Aff-CapsNet (one matrix per
class shared by all primary capsules), GraCapsNet (multi-head graph pooling; Gu, Wu & Tresp 2021)
and the CNN baselines, with exact parameter counts (Keras and the TF-free arithmetic), the
CNN-CR-SF that is a CapsNet-NoR, and the settings' checks. Each family's own layers are tested
in its package (reportgen/families/<name>/tests/)."""

from __future__ import annotations

import numpy as np
import pytest
from family_nets import build, tiny_cnn

from reportgen.capsnet.description import describe
from reportgen.capsnet.param_count import count_trainable_params
from reportgen.errors import ReportgenError
from reportgen.results.capsules_vs_cnns import model_kind
from reportgen.settings.model_params import load_model_params, parse_model_params

# Conv(256, 9, 1) on 28x28x1: 9*9*1*256 + 256 = 20,992 -> 20x20x256; Conv(256, 9, 2):
# 9*9*256*256 + 256 = 5,308,672 -> 6x6x256 = 9,216 values (1,152 capsules of 8).
# Decoder 160 -> 512 -> 1024 -> 784: 82,432 + 525,312 + 803,600 = 1,411,344.
COUNTS = {
    # the baseline with uniform couplings: routing has no weights
    "MNIST_NoR": 8_215_568,
    # 8,215,568 - 1,152*10*16*8 (1,474,560) + 10*16*8 (1,280)
    "MNIST_AffCaps": 6_742_288,
    # conv 3x3 (2,560) + conv 3x3 s2 (590,080) + 4,608 capsules x 16x8 (589,824) + W 16x10 (160)
    "MNIST_GraCaps": 1_182_624,
    # 40x40: conv 20,992 -> 32x32, primary 5,308,672 -> 12x12 (4,608 capsules), votes
    # 4,608*10*16*8 = 5,898,240, decoder to 1,600: 82,432 + 525,312 + 1,640,000
    "MNIST40_CapsNet": 13_475_648,
    "MNIST40_CapsNet_NoR": 13_475_648,
    "MNIST40_AffCapsNet_DR": 7_578_688,          # 13,475,648 - 5,898,240 + 1,280
    "MNIST40_AffCapsNet": 7_578_688,
    # 20,992 + 5,308,672 + FC(256 -> 10) 2,570
    "MNIST40_ConvNet_Avg": 5_332_234,
    # Conv(256,5) 6,656 -> 36; Conv(256,5) 1,638,656 -> 32; Conv(128,5) 819,328 -> 28x28x128
    # = 100,352; FC 328: 32,915,784; FC 192: 63,168; FC 10: 1,930
    "MNIST40_ConvNet_FC": 35_445_522,
    # ConvNet-R: 20,992 + 5,308,672 + FC(9,216 -> 160) 1,474,720 + FC(160 -> 10) 1,610
    # + the reconstruction from all 160 units 1,411,344
    "MNIST_ConvNet_R": 8_217_338,
    # ConvNet-CR: the same without FC(10) (a class's score is the sigmoid of its 16 units' sum)
    "MNIST_ConvNet_CR": 8_215_728,
    # ConvNet-CR-SF: FC(160) without bias (the votes of CapsNet-NoR summed with uniform
    # couplings: 1,474,560) = CapsNet-NoR exactly
    "MNIST_ConvNet_CR_SF": 8_215_568,
}
KINDS = {"MNIST_NoR": "CapsNet-NoR", "MNIST_AffCaps": "Aff-CapsNet", "MNIST_GraCaps": "GraCapsNet",
         "MNIST40_CapsNet": "CapsNet", "MNIST40_CapsNet_NoR": "CapsNet-NoR",
         "MNIST40_AffCapsNet_DR": "Aff-CapsNet-DR", "MNIST40_AffCapsNet": "Aff-CapsNet",
         "MNIST40_ConvNet_Avg": "ConvNet-Avg", "MNIST40_ConvNet_FC": "ConvNet-FC",
         "MNIST_ConvNet_R": "ConvNet-R", "MNIST_ConvNet_CR": "ConvNet-CR",
         "MNIST_ConvNet_CR_SF": "ConvNet-CR-SF"}


def _np(x):
    return np.asarray(x, np.float64)


def test_tf_free_counts_and_kinds():
    for name, count in COUNTS.items():
        params = load_model_params(f"models/{name}/params.toml")
        assert count_trainable_params(params) == count, name
        assert model_kind(params) == KINDS[name], name
    assert model_kind(load_model_params("models/MNIST/params.toml")) == "CapsNet"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(COUNTS))
def test_keras_counts(name):
    import keras

    from reportgen.capsnet.architecture import build_capsnet

    keras.backend.clear_session()
    net = build_capsnet(load_model_params(f"models/{name}/params.toml"))
    assert net.trainable_params() == COUNTS[name]
    assert describe(net.params) == net.description


def test_cr_sf_counts_as_capsnet_without_routing():
    """ConvNet-CR-SF is a CapsNet with uniform couplings: the same trainable parameters."""
    convs = [{"filters": 8, "kernel_size": 3}, {"filters": 8, "kernel_size": 3, "strides": 2}]
    cnn = parse_model_params({**tiny_cnn("cr_sf"), "conv": convs})
    nor = parse_model_params({**tiny_cnn("cr_sf"), "family": "capsnet", "conv": convs[:1],
                              "primary": {"types": 2, "dims": 4, "kernel_size": 3,
                                          "strides": 2},
                              "class_caps": {"dims": 4, "routing": "none"}})
    assert count_trainable_params(cnn) == count_trainable_params(nor)



def _nor_and_cr_sf():
    """A tiny CapsNet-NoR and the ConvNet-CR-SF of the same shapes (differently seeded)."""
    convs = [{"filters": 8, "kernel_size": 3}, {"filters": 8, "kernel_size": 3, "strides": 2}]
    cnn = build({**tiny_cnn("cr_sf"), "conv": convs}, seed=1)
    nor = build({**tiny_cnn("cr_sf"), "family": "capsnet", "conv": convs[:1],
                 "primary": {"types": 2, "dims": 4, "kernel_size": 3, "strides": 2},
                 "class_caps": {"dims": 4, "routing": "none"}}, seed=2)
    return nor, cnn


def _nor_kernel_as_dense(kernel):
    """NoR's votes W[i, j, d, k] as a dense kernel K[i * in_dims + k, j * dims + d]."""
    inputs, classes, dims, in_dims = kernel.shape
    return kernel.transpose(0, 3, 1, 2).reshape(inputs * in_dims, classes * dims)


@pytest.mark.slow
def test_cr_sf_trains_as_capsnet_nor(images):
    """ConvNet-CR-SF is CapsNet-NoR: its vote matrices start as NoR's (Normal, stddev
    class_caps.kernel_init_stddev); with NoR's weights it gives NoR's class capsules, lengths
    and reconstructions; and an Adam step from the same weights moves both nets alike (the
    uniform coupling 1/classes sits outside the kernel, as in the CapsNet)."""
    import keras

    from reportgen.training.trainer import make_train_step

    nor, cnn = _nor_and_cr_sf()
    kernel = _np(cnn.model.get_layer("feature_units").kernel)
    assert np.std(kernel) == pytest.approx(np.std(_np(nor.class_caps.kernel)), rel=0.15)
    assert np.std(kernel) == pytest.approx(0.1, rel=0.1)
    pairs = list(zip(nor.model.trainable_weights, cnn.model.trainable_weights))
    assert len(pairs) == len(cnn.model.trainable_weights)
    for source, target in pairs:
        value = _np(source)
        target.assign(_nor_kernel_as_dense(value) if source is nor.class_caps.kernel else value)

    def same_outputs():
        a, b = nor.model(images), cnn.model(images)
        np.testing.assert_allclose(_np(b["features"]), _np(a["class_capsules"]), rtol=1e-4,
                                   atol=1e-6)
        np.testing.assert_allclose(_np(b["probabilities"]), _np(a["lengths"]), rtol=1e-4,
                                   atol=1e-6)
        np.testing.assert_allclose(_np(b["reconstruction"]), _np(a["reconstruction"]),
                                   rtol=1e-4, atol=1e-6)

    same_outputs()
    one_hot = np.eye(3, dtype=np.float32)[[0, 1, 2, 0, 1]]
    for net in (nor, cnn):
        optimizer = keras.optimizers.Adam(0.01)
        optimizer.build(net.model.trainable_variables)
        make_train_step(net, optimizer)(images, one_hot)
    np.testing.assert_allclose(_np(cnn.model.get_layer("feature_units").kernel),
                               _nor_kernel_as_dense(_np(nor.class_caps.kernel)), rtol=1e-4,
                               atol=1e-6)
    same_outputs()

@pytest.mark.parametrize("patch, field", [
    ({"family": "transformer"}, "family"),
    ({"family": "cnn", "cnn": {"head": "max"}}, "cnn.head"),
    ({"class_caps": {"weight_sharing": "some"}}, "class_caps.weight_sharing"),
    ({"class_caps": {"routing": "em"}}, "class_caps.routing"),
    ({"graph": {"radius": 2}}, "graph.radius"),
])
def test_invalid_family_fields_are_named(patch, field):
    with pytest.raises(ReportgenError) as err:
        parse_model_params({"dataset": "mnist", "input_shape": [28, 28, 1], **patch},
                           source="models/X/params.toml")
    assert f"'{field}'" in err.value.message


def test_weight_sharing_spellings_and_unchanged_dicts():
    def sharing(value):
        raw = {"dataset": "mnist", "input_shape": [28, 28, 1],
               "class_caps": {"weight_sharing": value}}
        return parse_model_params(raw).class_caps.weight_sharing

    assert [sharing(v) for v in (False, "none", True, "type", "all")] == \
        [False, False, True, True, "all"]
    # A model of the first release keeps its dict (and so its cache keys).
    data = load_model_params("models/MNIST/params.toml").to_dict()
    assert not {"family", "graph", "cnn"} & set(data)
    assert "routing" not in data["class_caps"]
    assert load_model_params("models/MNIST_GraCaps/params.toml").to_dict()["family"] == \
        "gracapsnet"
