"""Numbers handed on as data: a panel's numbers (`Panel.numbers`) and bulky data (`Panel.data`)
are what its technique computes from the stored arrays, kept in the store beside the figures;
never parsed back from a figure, a download or a generated script. No TensorFlow here."""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from reportgen.cache.store import ArtifactStore
from reportgen.figures.encode import json_floats
from reportgen.pages.assemble import HANDED_ON_FILE, Assembler, export_figures, plain
from reportgen.pages.sitedata import InputInfo, ModelData, Panel, StepData
from reportgen.techniques.base import Figure, RenderContext, Technique
from reportgen.techniques.live_decoder import figures as fmt

from site_fixture import decoder_weights

CTX = RenderContext(model="M", step="1-2", class_names=("a", "b"))


@dataclass(frozen=True)
class Params:
    scale: float = 2.0


def _summary(arrays, params):
    x = arrays["x"]
    return {"mean": np.float32(x.mean()) * params.scale, "per_class": {2: x[:2], 10: x[2:]},
            "count": np.int64(len(x)), "shape": tuple(x.shape), "nan": float("nan"),
            "label": "z", "flag": np.bool_(True)}


SUMMARIZED = Technique(
    name="toy_summary", title="Toy", layer="model", scope="dataset", needs=frozenset(),
    applies_to=frozenset(), params_type=Params, version=1, compute=lambda batch, p: {},
    render=lambda arrays, p, ctx: [Figure("toy_summary.png", b"png bytes")],
    summarize=_summary)


def _numpy_to_json(obj):
    if isinstance(obj, np.ndarray) or (isinstance(obj, np.generic) and obj.dtype.kind == "f"):
        return json_floats(obj)
    return obj.item()


def _json_round_trip(value):
    return json.loads(json.dumps(value, sort_keys=True, default=_numpy_to_json))


def _same(a, b) -> bool:
    """Equal as JSON data, NaN equal to NaN, and dict keys in the same order."""
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


def test_plain_is_what_a_json_round_trip_gives_without_the_text():
    x = np.array([0.1, 0.25, 1 / 3, 7.0], np.float32)
    value = _summary({"x": x}, Params())
    assert _same(plain(value), _json_round_trip(value))
    assert list(plain(value)["per_class"]) == ["2", "10"]      # sorted as numbers, then text
    mean = np.float32(x.mean()) * np.float32(2.0)
    # a float32 keeps its value and is written with its own shortest digits, not float64's
    assert np.float32(plain(value)["mean"]) == mean and repr(plain(value)["mean"]) == str(mean)
    assert json.dumps(plain({"v": np.float32(0.1)})) == '{"v": 0.1}' != json.dumps(
        {"v": float(np.float32(0.1))})
    with pytest.raises(TypeError):
        plain({"x": object()})


def test_a_float32_widened_by_float_prints_its_own_digits_in_the_exports():
    """A summary's `float(array.mean())` of float32 numbers is a float64 holding a float32: the
    analyses' JSON and CSV print 0.8, not 0.800000011920929; a float64 result keeps its digits."""
    widened = float(np.float32(0.8))
    assert repr(widened) == "0.800000011920929"
    assert plain({"v": widened}) == {"v": 0.8}
    assert plain({"third": 1 / 3})["third"] == 1 / 3
    as_json, as_csv = export_figures("toy", {"accuracy": widened, "third": 1 / 3,
                                            "nan": float("nan")})
    assert b'"accuracy": 0.8,' in as_json.data and b"0.800000011920929" not in as_json.data
    assert as_csv.data.decode().splitlines()[1] == "accuracy,0.8,,,,"
    assert "0.3333333333333333" in as_csv.data.decode()


def _assembler(tmp_path):
    return Assembler(ArtifactStore(tmp_path / "cache"), tmp_path / "docs")


def test_a_summary_is_handed_on_fresh_and_from_the_store_without_the_arrays(tmp_path,
                                                                            monkeypatch):
    x = np.array([0.5, 1.5, 2.0, 4.0], np.float32)
    first = _assembler(tmp_path)
    first.store.put_arrays("ab" * 32, {"x": x}, {})
    out = tmp_path / "docs" / "artifacts"
    fresh = first.panel(SUMMARIZED, Params(), "ab" * 32, CTX, out)
    expected = plain(_summary({"x": x}, Params()))
    assert _same(fresh.numbers, expected) and fresh.data is None
    assert fresh.numbers["mean"] == pytest.approx(2 * 2.0) and fresh.numbers["count"] == 4
    assert fresh.numbers["per_class"]["10"] == [2.0, 4.0]
    # the download holds the same numbers (it is not where they are read from)
    exported = next(f for f in fresh.figures if f.kind == "json")
    assert _same(json.loads(Path(exported.source).read_bytes()), expected)
    # one store entry: the numbers are kept with the figures, and not placed in docs
    entries = [p.parent for p in (tmp_path / "cache" / "figures").rglob("meta.json")]
    assert len(entries) == 1 and (entries[0] / HANDED_ON_FILE).is_file()
    assert HANDED_ON_FILE not in {Path(f.path).name for f in fresh.figures}
    # a later build: the figures are stored, the numbers come from their entry
    later = _assembler(tmp_path)
    monkeypatch.setattr(ArtifactStore, "get_arrays", lambda self, key: pytest.fail("arrays"))
    cached = later.panel(SUMMARIZED, Params(), "ab" * 32, CTX, out)
    assert later.drawn == 0 and _same(cached.numbers, expected)
    monkeypatch.undo()
    # figures stored by an older reportgen, without the numbers: made again from the arrays
    # (into an entry of their own), not redrawn; then read from there without the arrays
    meta = json.loads((entries[0] / "meta.json").read_text())
    meta["figures"] = [f for f in meta["figures"] if f["name"] != HANDED_ON_FILE]
    (entries[0] / "meta.json").write_text(json.dumps(meta))
    (entries[0] / HANDED_ON_FILE).unlink()
    again = _assembler(tmp_path)
    rebuilt = again.panel(SUMMARIZED, Params(), "ab" * 32, CTX, out)
    assert again.drawn == 0 and _same(rebuilt.numbers, expected)
    monkeypatch.setattr(ArtifactStore, "get_arrays", lambda self, key: pytest.fail("arrays"))
    last = _assembler(tmp_path)
    assert _same(last.panel(SUMMARIZED, Params(), "ab" * 32, CTX, out).numbers, expected)
    assert len(list((tmp_path / "cache" / "figures").rglob("meta.json"))) == 2


def test_class_capsules_hand_on_their_values(tmp_path):
    from reportgen.techniques import class_capsules

    rng = np.random.default_rng(0)
    row = {"capsules": rng.normal(size=(3, 4)).astype(np.float32),
           "lengths": np.array([0.2, 0.9, 0.4], np.float32)}
    assembler = _assembler(tmp_path)
    assembler.store.put_arrays("cd" * 32, row, {})
    panel = assembler.panel(class_capsules.TECHNIQUE, class_capsules.Params(), "cd" * 32,
                            RenderContext(model="M", step="1-2", class_names=("a", "b", "c"),
                                          input_label="test #0", image=np.zeros((12, 12, 1))),
                            tmp_path / "docs" / "artifacts")
    # the same float32 values, written with their own digits (not float64's 17)
    np.testing.assert_array_equal(np.float32(panel.numbers["capsules"]), row["capsules"])
    np.testing.assert_array_equal(np.float32(panel.numbers["lengths"]), row["lengths"])
    assert [repr(v) for v in panel.numbers["lengths"]] == ["0.2", "0.9", "0.4"]
    assert panel.numbers["predicted"] == 1


def test_the_live_decoder_hands_on_its_manifest_and_weights_and_the_page_reads_them(tmp_path):
    from reportgen.pages.live import live_step
    from reportgen.techniques import live_decoder

    arrays = decoder_weights(seed=4, classes=2, dims=4, units=(8,), output=36)
    arrays["output_shape"] = np.array([6, 6, 1])
    assembler = _assembler(tmp_path)
    assembler.store.put_arrays("ef" * 32, arrays, {})
    panel = assembler.panel(live_decoder.TECHNIQUE, live_decoder.Params(), "ef" * 32, CTX,
                            tmp_path / "docs" / "artifacts")
    weights, tables, manifest = fmt.export(arrays, "M", "1-2")
    assert panel.numbers == manifest and panel.data == {"weights": weights, "tables": tables}
    # the dequantised weights: within half a quantisation step of the computed ones
    for index, (kernel, bias, _) in enumerate(fmt.unpack(weights, tables, manifest)):
        original = arrays[f"kernel{index}"]
        step = np.abs(original).max(axis=1, keepdims=True) / 31
        assert (np.abs(kernel - original) <= step / 2 * (1 + 1e-6)).all()
        np.testing.assert_array_equal(bias, arrays[f"bias{index}"])
    # the page's Python reference reconstruction is computed from them
    capsules = np.zeros((2, 4))
    capsules[1] = [0.3, -0.2, 0.5, 0.1]
    step = StepData(step="1-2", checkpoint_panels=[panel], input_panels={"test-0": [Panel(
        technique="class_capsules", variant="", title="", layer="class", caption="",
        figures=[], numbers={"capsules": capsules.tolist(), "lengths": [0.1, 0.6],
                             "predicted": 1})]})
    model = ModelData(name="M", dataset="", description="", params=0, class_names=["a", "b"],
                      architecture=[], history=[], steps=[step],
                      inputs=[InputInfo(key="test-0", label="", image="", true_class="b")])
    live = live_step(model, step)
    record = json.loads(live.inputs_script.split('["1-2"] = ', 1)[1].split(";\n})", 1)[0])
    layers = fmt.unpack(weights, tables, manifest)
    expected = fmt.to_pixels(fmt.forward(layers, fmt.masked(capsules, np.arange(2), 2),
                                         [6, 6, 1]))
    assert base64.b64decode(record["inputs"]["test-0"]["python"]) == expected.tobytes()
    assert live.script_bytes == len(fmt.script(manifest, weights, tables).encode("utf-8"))
    # without the handed-on weights the step has no live decoder (the script is not read)
    panel.data = None
    assert live_step(model, step) is None
