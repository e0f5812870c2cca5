"""The draw panel's NumPy side: MNIST's centring of a drawing against hand-computed cases, and
the page's files (manifest, script, runtime) read back as the page reads them."""

from __future__ import annotations

import base64
import json
import re
from types import SimpleNamespace

import numpy as np
import pytest

from reportgen.techniques.draw_panel import centring
from reportgen.techniques.draw_panel.figures import manifest, render_draw_panel, script


def test_a_bar_lands_in_the_20_pixel_field_with_its_centre_of_mass_at_the_centre():
    ink = np.zeros((280, 280))
    ink[50:250, 130:150] = 1.0            # 200 x 20: the longer side becomes 20 pixels
    out = centring.centre_drawing(ink)
    rows, cols = np.nonzero(out)
    assert (rows.min(), rows.max()) == (4, 23)        # 20 rows
    assert (cols.min(), cols.max()) == (13, 14)       # 200:20 -> 20:2
    np.testing.assert_allclose(out[out > 0], 1.0)
    ys, xs = np.indices(out.shape)
    assert (out * ys).sum() / out.sum() == pytest.approx(13.5)
    assert (out * xs).sum() / out.sum() == pytest.approx(13.5)


def test_area_averaging_keeps_the_mean_ink():
    # a 40 x 40 square of ink 0.5 scaled by 1/2: every cell covers 2 x 2 pixels of 0.5
    ink = np.zeros((100, 100))
    ink[10:50, 30:70] = 0.5
    out = centring.centre_drawing(ink)
    np.testing.assert_allclose(np.unique(out), [0.0, 0.5])
    assert (out > 0).sum() == 400
    # a half-covered cell: a 3-pixel-wide bar over 1.5 cells of 2 pixels each
    weights = centring.area_weights(0.0, 4.0, 2, 4)
    np.testing.assert_allclose(weights, [[0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5]])
    np.testing.assert_allclose(weights @ np.array([1, 1, 1, 0.0]), [1.0, 0.5])


def test_off_centre_ink_is_moved_and_nothing_drawn_stays_blank():
    ink = np.zeros((28, 28))
    ink[0:4, 0:2] = 1.0                   # 4 x 2 in a corner: scaled up 5x to 20 x 10
    out = centring.centre_drawing(ink)
    ys, xs = np.indices(out.shape)
    assert abs((out * ys).sum() / out.sum() - 13.5) <= 0.5
    assert abs((out * xs).sum() / out.sum() - 13.5) <= 0.5
    assert not centring.centre_drawing(np.zeros((50, 50))).any()
    assert centring.box_size(28) == 20 and centring.box_size(12) == 9


def _result(classes=3, routing=True):
    rng = np.random.default_rng(0)
    result = {"onnx": np.frombuffer(b"\x08\x07onnx-bytes", np.uint8).copy(),
              "check_inputs": rng.random((3, 12, 12, 1), dtype=np.float32),
              "check_scores": rng.random((3, classes), dtype=np.float32),
              "check_reconstruction": rng.random((3, 12, 12, 1), dtype=np.float32)}
    if routing:
        result["check_routing"] = rng.random((3, 5 * 5 * 4, classes), dtype=np.float32)
    return result


def _ctx():
    routed = SimpleNamespace(name="primary_caps", types=4, grid=(5, 5))
    classes = SimpleNamespace(name="class_caps")
    head = SimpleNamespace(kind="capsules", readout="length")
    description = SimpleNamespace(class_capsules=classes, capsule_layers=(routed, classes),
                                  routed_layers=(routed,), head=head)
    return SimpleNamespace(model="Tiny <b>", step="1-5", class_names=("a", "b", "c"),
                           description=description)


def test_the_script_registers_the_manifest_and_the_network_as_the_page_reads_them():
    result = _result()
    figures = {f.name: f for f in render_draw_panel(result, None, _ctx())}
    text = figures["draw_panel.js"].data.decode()
    assert "</" not in text.replace("<\\/", "")
    body = json.loads(re.search(r"\]\s*=\s*(\{.*\});\n\}\)", text, re.S).group(1)
                      .replace("<\\/", "</"))
    assert base64.b64decode(body["onnx"]) == result["onnx"].tobytes()
    record = body["manifest"]
    assert record["model"] == "Tiny <b>" and record["step"] == "1-5"
    assert record["input"] == [12, 12, 1] and record["chance"] == pytest.approx(1 / 3)
    assert record["outputs"]["routing"] == {"layer": "primary_caps", "types": 4, "grid": [5, 5]}
    assert record["outputs"]["scores"]["kind"] == "length"
    for name in ("scores", "routing", "reconstruction"):
        got = np.frombuffer(base64.b64decode(record["check"]["outputs"][name]), "<f4")
        np.testing.assert_array_equal(got, result[f"check_{name}"].ravel())
    inputs = np.frombuffer(base64.b64decode(record["check"]["inputs"]), "<f4")
    np.testing.assert_array_equal(inputs, result["check_inputs"].ravel())
    numbers = json.loads(figures["draw_panel.json"].data)
    assert numbers["check"] == {"count": 3} and numbers["onnx_bytes"] == result["onnx"].size
    # class capsules without exported poses: their scores are the pose-space chart's point
    assert record["pose_point"] == "scores" and "poses" not in record["outputs"]


def test_exported_class_poses_are_the_pose_space_point():
    result = _result()
    result["check_poses"] = np.random.default_rng(4).random((3, 3 * 16), dtype=np.float32)
    record = manifest(result, _ctx())
    assert record["pose_point"] == "poses"
    assert record["outputs"]["poses"] == {"dimensions": 48}
    got = np.frombuffer(base64.b64decode(record["check"]["outputs"]["poses"]), "<f4")
    np.testing.assert_array_equal(got, result["check_poses"].ravel())


def test_a_model_without_routing_into_its_classes_ships_no_routing():
    record = manifest(_result(routing=False), _ctx())
    assert set(record["outputs"]) == {"scores", "reconstruction"}
    assert set(record["check"]["outputs"]) == {"scores", "reconstruction"}
    assert script(record, b"x").startswith("/* reportgen draw panel")


def test_the_runtime_script_carries_the_installed_package(monkeypatch):
    from reportgen.techniques.draw_panel import runtime

    if runtime.installed_version() is None:
        pytest.skip(runtime.missing_reason())
    text = runtime.runtime_script()
    body = json.loads(text[text.index("= ") + 2:].rstrip().rstrip(";").replace("<\\/", "</"))
    dist = runtime.package_dir() / "dist"
    assert body["module"] == (dist / runtime.BUNDLE).read_text("utf-8")
    import gzip
    assert gzip.decompress(base64.b64decode(body["wasm"])) == (dist / runtime.WASM).read_bytes()
    assert body["version"] == runtime.installed_version()


def test_without_the_package_the_reason_names_the_install_step(monkeypatch, tmp_path):
    from reportgen.techniques.draw_panel import runtime

    monkeypatch.setattr(runtime, "package_dir", lambda: tmp_path / "node_modules" / "x")
    assert runtime.installed_version() is None and runtime.runtime_script() is None
    assert "npm ci" in runtime.missing_reason()
