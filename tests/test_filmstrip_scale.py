"""The training filmstrip's frames share one colour scale: every step of a technique whose
colours follow the data is drawn again with the union of the steps' value ranges."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from reportgen.cache.store import ArtifactStore
from reportgen.capsnet.description import describe
from reportgen.commands.site_assembly import context, filmstrip_frames
from reportgen.figures.shared_scale import shared_range
from reportgen.pages.assemble import Assembler
from reportgen.pages.sitedata import StepData
from reportgen.settings.model_params import parse_model_params
from reportgen.techniques import get_technique

# 28x28 -> conv1 (9x9) 20x20 -> primary capsules (9x9, stride 2): a 6x6 grid of 8 types
SMALL_CAPSNET = {"dataset": "mnist", "input_shape": [28, 28, 1], "num_classes": 10,
                 "conv": [{"filters": 4, "kernel_size": 9}],
                 "primary": {"types": 8, "dims": 4, "kernel_size": 9, "strides": 2},
                 "class_caps": {"dims": 4}, "decoder": {"units": [16]}}
STEPS = ("0-0", "1-10", "2-10")
PEAKS = (0.286, 0.79, 0.5)       # each step's largest activation: own scales differ


def _setup(tmp_path, name, params, key_name, shape):
    store = ArtifactStore(tmp_path / "store")
    assembler = Assembler(store, tmp_path / "docs")
    tech = get_technique(name)
    description = describe(parse_model_params(SMALL_CAPSNET))     # conv1 20x20, 6x6x8 capsules
    dataset = SimpleNamespace(class_names=[str(k) for k in range(10)], y_test=np.zeros(3, int))
    item = SimpleNamespace(key="test-0", label="test #0", image=np.zeros((28, 28, 1)),
                           known_classes=())
    rng = np.random.default_rng(0)
    steps, stored = [], []
    for i, (step, peak) in enumerate(zip(STEPS, PEAKS)):
        values = rng.random(shape)
        values = (values / values.max() * peak).astype(np.float32)
        key = f"{i:02d}" * 32
        store.put_arrays(key, {key_name: values}, {"technique": name})
        stored.append(values)
        ctx = context("M", step, description, dataset, item)
        panel = assembler.panel(tech, params, key, ctx, tmp_path / "docs" / step)
        steps.append(StepData(step=step, input_panels={item.key: [panel]}))
        assembler.step_keys[("M", step)] = SimpleNamespace(inputs={(name, params, item.key): key})
    filmstrip_frames(assembler, "M", description, dataset, [(tech, params)], [item], steps)
    return tech, steps, stored, description, dataset, item


def test_conv_feature_maps_frames_use_one_scale(tmp_path):
    tech = get_technique("conv_feature_maps")
    params = tech.params_type(layer="conv1")
    tech, steps, stored, description, dataset, item = _setup(
        tmp_path, "conv_feature_maps", params, "maps", (6, 6, 4))
    reference = (0.0, float(max(float(v.max()) for v in stored)))
    ranges = {s.input_panels[item.key][0].shared_range for s in steps}
    assert ranges == {reference}                      # one vmin/vmax for every frame
    assert abs(reference[1] - max(PEAKS)) < 1e-6
    for step, values in zip(steps, stored):
        panel = step.input_panels[item.key][0]
        shared_png = next(f for f in panel.shared.figures if f.kind == "png")
        own_png = next(f for f in panel.figures if f.kind == "png")
        # in the folder of the step's figures of the input, named after its own figure
        assert shared_png.path == (f"artifacts/M/{step.step}/{item.key}/shared-scale-"
                                   + Path(own_png.path).name)
        ctx = context("M", step.step, description, dataset, item)
        expected = tech.render({"maps": values}, params,
                               replace(ctx, value_range=reference, thumbnail=True))
        assert Path(shared_png.source).read_bytes() == expected[0].data
        assert "0 … 0.79 = the range over every step shown" in panel.shared.caption
        # the step that peaks at the shared maximum looks the same on both scales (the
        # step's own figure at its own size)
        at_own_size = tech.render({"maps": values}, params, replace(ctx, value_range=reference))
        same = Path(own_png.source).read_bytes() == at_own_size[0].data
        assert same == (abs(float(values.max()) - reference[1]) < 1e-9)


def test_primary_heatmaps_share_only_per_layer_scales(tmp_path):
    tech = get_technique("primary_heatmaps")
    per_layer = tech.params_type()
    _, steps, stored, *_ = _setup(tmp_path, "primary_heatmaps", per_layer, "lengths", (6, 6, 8))
    top = float(max(float(v.max()) for v in stored))
    assert {s.input_panels["test-0"][0].shared_range for s in steps} == {(0.0, top)}
    # per-map normalisation has no data-wide scale to share
    assert shared_range("primary_heatmaps", tech.params_type(normalization="per_map"),
                        [{"lengths": v} for v in stored]) is None
    assert shared_range("gradcam_pp", None, [{"map": v} for v in stored]) is None
