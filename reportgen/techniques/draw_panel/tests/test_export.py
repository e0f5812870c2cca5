"""The draw panel's ONNX export against the Keras model it came from: every registered family's
tiny example (reportgen's five and the example packages'), run by onnxruntime one image at a
time as the page runs it, equal to the model's own outputs within 1e-4."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.settings.families import example_params, registered

onnxruntime = pytest.importorskip("onnxruntime", reason="the ONNX runtime checks the export")

TOLERANCE = 1e-4
# Unrolled EM routing: about 10 s for tf2onnx to convert on 2 idle cores (IDPA: 1 s).
SLOW_TO_CONVERT = {"em"}
FAMILIES = ("capsnet", "cnn", "em", "gracapsnet", "self_routing", "efficient_capsnet", "idpa")


def _built(name: str, seed: int = 0):
    import keras

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.settings.model_params import parse_model_params

    keras.utils.set_random_seed(seed)
    return build_capsnet(parse_model_params(example_params(name)))


def _onnx_outputs(data: bytes, images: np.ndarray) -> dict[str, np.ndarray]:
    session = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    (image,) = session.get_inputs()
    names = [o.name for o in session.get_outputs()]
    rows = [dict(zip(names, session.run(None, {image.name: x[None]}))) for x in images]
    return {n: np.concatenate([r[n] for r in rows]) for n in names}


def test_every_family_and_example_package_is_covered():
    assert set(FAMILIES) <= set(registered()), \
        "install the example packages (pip install -e examples/...) to run their exports"


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow)
                                  if n in SLOW_TO_CONVERT else n for n in FAMILIES])
def test_onnx_outputs_equal_keras(name):
    from reportgen.probe.probe import run_probe
    from reportgen.techniques.draw_panel.export import exported_outputs, keras_value, onnx_bytes
    from reportgen.techniques.pose_space import has_poses
    from reportgen.techniques.pose_space.numbers import flat_poses

    net = _built(name)
    description = net.description
    shape = net.model.input_shape[1:]
    images = np.random.default_rng(7).random((3, *shape), dtype=np.float32)
    ours = _onnx_outputs(onnx_bytes(net), images)
    wanted = exported_outputs(description)
    assert set(ours) == set(wanted)
    keras_outputs = net.model(images, training=False)
    for output, source in wanted.items():
        expected = keras_value(keras_outputs, output, source)
        assert ours[output].shape == expected.shape, output
        np.testing.assert_allclose(ours[output], expected, atol=TOLERANCE, rtol=0,
                                   err_msg=f"{name}: {output} ({source})")
    # What the site calls the class scores and the prediction (the probe's tensors).
    poses = has_poses(description)
    probed = run_probe(net, images, needs={"lengths", "predicted",
                                           *(("class_capsules",) if poses else ())})
    np.testing.assert_allclose(ours["scores"], probed["lengths"], atol=TOLERANCE, rtol=0)
    assert (np.argmax(ours["scores"], axis=1) == probed["predicted"]).all()
    # the class poses: the pose-space chart's point of each image, flattened as it flattens
    # them (EM's 4x4 matrices row-major); exactly where the class capsules have a pose
    assert ("poses" in ours) == poses
    if poses:
        np.testing.assert_allclose(ours["poses"], flat_poses(probed["class_capsules"]),
                                   atol=TOLERANCE, rtol=0, err_msg=f"{name}: poses")
    if "routing" in ours and description.class_capsules is not None:
        # weights into the class capsules: each child's over the classes (Sabour et al. eq. 3)
        routed = [c for c in description.routed_layers if c.routing.output_of(c.name)
                  == wanted["routing"]][0]
        if routed.routing.sums_over == "parents":
            np.testing.assert_allclose(ours["routing"].sum(axis=-1), 1.0, atol=1e-5)


def test_the_same_network_exports_to_the_same_bytes():
    from reportgen.techniques.draw_panel.export import onnx_bytes

    net = _built("cnn")
    assert onnx_bytes(net) == onnx_bytes(net)


def test_canonical_form_ignores_names_and_node_order_but_not_the_computation():
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from reportgen.techniques.draw_panel.canonical import canonical_onnx

    def model(names, order, weight=1.0):
        w = numpy_helper.from_array(np.full((2,), weight, np.float32), names[0])
        nodes = [helper.make_node("Mul", ["image", names[0]], [names[1]], name=names[2]),
                 helper.make_node("Relu", ["image"], [names[3]], name=names[4]),
                 helper.make_node("Add", [names[1], names[3]], ["scores"], name=names[5])]
        graph = helper.make_graph([nodes[i] for i in order], "g",
                                  [helper.make_tensor_value_info("image", TensorProto.FLOAT, [2])],
                                  [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [2])],
                                  [w])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    first = model(["w__1", "m__2", "a__3", "r__4", "b__5", "c__6"], [0, 1, 2])
    second = model(["w__9", "m__8", "a__7", "r__6", "b__5", "c__4"], [1, 0, 2])
    other = model(["w__1", "m__2", "a__3", "r__4", "b__5", "c__6"], [0, 1, 2], weight=2.0)
    a, b, c = (canonical_onnx(m.SerializeToString()) for m in (first, second, other))
    assert a == b and a != c
    onnx.checker.check_model(onnx.load_from_string(a))
    x = np.array([-1.0, 2.0], np.float32)
    run = onnxruntime.InferenceSession(a, providers=["CPUExecutionProvider"]).run
    np.testing.assert_allclose(run(None, {"image": x})[0], x * 1.0 + np.maximum(x, 0))
