"""What keeps a step's figures small and quick to draw: the dimension-perturbation grid at one
pixel per reconstructed pixel, and labels drawn from glyph masks rasterised once (the same
pixels as Pillow's text drawing, within rounding)."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from reportgen.figures import colormaps
from reportgen.figures.figure import RenderContext
from reportgen.techniques.decoder_perturbation.figures import render_decoder_perturbation


def _pillow_texts(canvas, texts):
    """The reference: Pillow's own text drawing, glyph by glyph, at the same places."""
    from PIL import ImageDraw

    image = Image.fromarray(canvas)
    draw = ImageDraw.Draw(image)
    for x, y, text, align, *rest in texts:
        size = rest[1] if len(rest) > 1 else colormaps.FONT_SIZE
        font = colormaps.font(size)
        width = colormaps.text_size(text, size)[0]
        x = x - width / 2 if align == "center" else (x - width if align == "right" else x)
        colour = tuple(rest[0]) if rest and rest[0] is not None else colormaps.TEXT_COLOR
        draw.text((int(round(x - font.getbbox(text)[0])), int(round(y))), text, fill=colour,
                  font=font)
    return np.asarray(image)


def test_cached_text_draws_what_pillow_draws():
    canvas = np.full((60, 240, 3), 255, np.uint8)
    texts = [(4, 2, "dim 12", "left", None), (120, 20, "+0.25 δ", "center", (217, 95, 2)),
             (236, 40, "class 7: 0.731", "right", (110, 110, 110), 12)]
    ours = colormaps.draw_texts(canvas.copy(), texts)
    pillow = _pillow_texts(canvas.copy(), texts)
    assert (ours != 255).any()
    # same glyphs at the same places, their edges at TEXT_LEVELS coverages: within half a
    # coverage step of Pillow's (plus rounding)
    step = 255 / (colormaps.TEXT_LEVELS - 1)
    assert np.abs(ours.astype(int) - pillow.astype(int)).max() <= step / 2 + 1
    assert len(np.unique(ours.reshape(-1, 3), axis=0)) <= 3 * colormaps.TEXT_LEVELS
    # texts at or over the edge are clipped, not an error
    edge = colormaps.draw_texts(np.full((10, 20, 3), 255, np.uint8),
                             [(-5, -3, "clipped", "left"), (18, 5, "x", "left")])
    assert edge.shape == (10, 20, 3) and (edge != 255).any()


def test_perturbation_grid_is_one_pixel_per_pixel(monkeypatch):
    # exact pixels to find; the site's palette encoding is tested in test_figures.py
    monkeypatch.setattr("reportgen.figures.encode.PALETTE_TOLERANCE", 0)
    rng = np.random.default_rng(0)
    dims, steps, size = 16, 11, 28
    result = {"images": rng.uniform(size=(dims, steps, size, size, 1)).astype(np.float32),
              "deltas": np.linspace(-0.25, 0.25, steps), "target": np.int64(3)}
    ctx = RenderContext(model="M", step="1-0", class_names=tuple(map(str, range(10))))
    figure = render_decoder_perturbation(result, None, ctx)[0]
    image = np.asarray(Image.open(io.BytesIO(figure.data)).convert("RGB"))
    assert (figure.width, figure.height) == (image.shape[1], image.shape[0])
    # one grid of 11 columns of 28-pixel tiles, each column as wide as its δ label (2-pixel
    # gutters), plus labels (the differences are a figure of their own): narrower than the
    # grid drawn at twice the size
    grid = steps * size + (steps - 1) * 2
    assert grid < figure.width < 2 * grid
    # a reconstruction appears pixel for pixel (found by its exact 28 x 28 values, drawn at
    # the figures' colour levels)
    levels = colormaps.COLOUR_LEVELS - 1
    shown = np.round(np.clip(result["images"][7, 2, :, :, 0], 0, 1) * levels) / levels
    tile = (shown * 255 + 0.5).astype(np.uint8)
    found = [(y, x) for y, x in np.argwhere(image[:, :, 0] == tile[0, 0])
             if y + size <= image.shape[0] and x + size <= image.shape[1]
             and np.array_equal(image[y:y + size, x:x + size, 0], tile)]
    assert len(found) == 1


def test_index_split_keeps_data_js_small_and_loses_nothing():
    from reportgen.pages.input_scripts import split_index

    steps = {f"{e}-10": {"accuracy": 0.5, "checkpoint": {"conv_kernels": {"caption": "k"}},
                         "dataset": {}, "predictions": {"test-0": {"predicted": "1"}},
                         "inputs": {f"test-{i}": {"rpv": {"caption": "x" * 500 + f"{e}/{i}",
                                                          "more": "m" * 300}}
                                    for i in range(16)}}
             for e in range(21)}
    index = {"slug": "M</script>", "steps": steps}
    small, scripts = split_index(index, "models/M")
    assert index["steps"]["3-10"]["inputs"]          # the whole index is left as it was
    assert all(record["inputs"] == {} for record in small["steps"].values())
    assert small["steps"]["3-10"]["predictions"] == steps["3-10"]["predictions"]
    assert small["input_scripts"]["test-7"] == "models/M/inputs/test-7.js"
    assert sorted(scripts) == sorted(small["input_scripts"].values())
    text = scripts["models/M/inputs/test-7.js"]
    assert "</script" not in text and "x" * 500 + "20/7" in text and "20/8" not in text
    # what the script holds, its texts put back, is the input's panels at every step
    from reportgen.pages.input_scripts import read_script

    assert read_script(text) == {s: r["inputs"]["test-7"] for s, r in steps.items()}
    # each text once: the 21 steps' captions differ, their shared details appear once
    assert text.count("x" * 500) == 21 and text.count("m" * 300) == 1
    import json

    assert len(json.dumps(small)) < len(json.dumps(index)) / 10


def test_cards_of_analysed_step_techniques_name_the_steps_that_have_them():
    from reportgen.pages.sitedata import ModelData, Panel, StepData
    from reportgen.pages.views import ModelInfo

    analyses = [Panel(technique="routing_entropy", variant="", title="t", layer="dataset",
                      caption="", figures=[])]
    steps = [StepData(step="0-0", dataset_panels=analyses), StepData(step="1-10"),
             StepData(step="2-20", dataset_panels=analyses)]
    model = ModelData(name="M", dataset="d", description="", params=1, class_names=["0"],
                      architecture=[], history=[], steps=steps, inputs=[])
    info = ModelInfo(model=model, slug="M", panels=[], layers=[], default_step=steps[-1],
                     default_input=None)
    note = info.missing_note({"technique": "decoder_perturbation"})
    assert "(0-0, 2-20)" in note and "1-10" not in note
    assert info.missing_note({"technique": "rpv"}) == ""          # drawn at every step
    model.steps = [StepData(step="1-10")]                         # built with --analyses none
    assert "--analyses none" in info.missing_note({"technique": "decoder_perturbation"})
    # the draw panel travels with the last step built only, whatever the analyses
    model.steps = steps
    assert "last step built (2-20)" in info.missing_note({"technique": "draw_panel"})


def test_the_draw_panel_is_keyed_at_the_last_step_only():
    """The whole network per step (8.5 MB for MNIST_Demo): the build keys (so computes and
    ships) the draw panel at the last of the chosen steps, analysed or not, and nowhere else;
    the live decoder still at every analysed step."""
    from reportgen.engine.step import step_keys
    from reportgen.techniques import get_technique

    names = ("draw_panel", "live_decoder", "conv_kernels")
    variants = [(get_technique(n), get_technique(n).params_type()) for n in names]

    def keyed(analysed, last):
        keys = step_keys("model", "w.weights.h5", variants, [], "eval", analysed,
                         digest=lambda path: "weights", last=last)
        return {name for name, _ in keys.checkpoint}

    assert keyed(False, False) == {"conv_kernels"}
    assert keyed(True, False) == {"conv_kernels", "live_decoder"}
    assert keyed(False, True) == {"conv_kernels", "draw_panel"}
    assert keyed(True, True) == set(names)
