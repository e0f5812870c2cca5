"""The live decoder: the quantised export of the decoder's weights, and the Decoder page's
JavaScript forward pass in headless Chromium (Debian's chromium driven by Playwright) checked
pixel by pixel against the model's own (Keras) decoder; sliders, keyboard, reset, class choice,
step change; over 127.0.0.1 and from file://, with no console error and no outside request.

The browser site is made of two tiny CapsNets (conftest.py: 3 classes x 4 dims, decoder
12 -> 16 -> 144, 12x12 images) standing for two training steps, their results computed by the
real techniques and placed by the real Assembler.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from reportgen.techniques.live_decoder import figures as fmt
from reportgen.pages.input_scripts import read_index
from reportgen.techniques import live_decoder

from browser_support import CHROMIUM, chromium, serve
CLASSES = ("zero", "one", "two")
STEPS = ("0-1", "0-2")                  # built from seeds 0 (tiny_net) and 1
TOLERANCE = 2e-2                        # 6-bit weights (<= 1.5e-2), then an 8-bit canvas
MODEL = "Tiny"


def _export(net, step="0-1"):
    from reportgen.probe.probe import empty_batch
    from reportgen.techniques.base import RenderContext

    result = live_decoder.compute(empty_batch(net), live_decoder.Params())
    ctx = RenderContext(model=MODEL, step=step, class_names=CLASSES)
    figures = {f.kind: f for f in live_decoder.TECHNIQUE.render(result, None, ctx)}
    return result, figures


def _keras(net, vectors, classes):
    """The model's decoder on capsule vectors (N, D) placed in their classes' slots."""
    from reportgen.techniques.compute import decode, masked_inputs

    inputs = masked_inputs(np.asarray(vectors, np.float32), np.asarray(classes),
                           net.params.num_classes)
    return decode(net, inputs)


# ------------------------------------------------------------------ the export


def _read_script(text: str) -> tuple[dict, str, str]:
    """(manifest, weights, tables) as the page's script registers them (the test reads the
    script; reportgen hands the same values on as data)."""
    line = next(line for line in text.splitlines()
                if line.startswith("  registry.weights[model]["))
    record = json.loads(line.split("] = ", 1)[1].rstrip(";"))     # "<\/" is JSON for "</"
    return record["manifest"], record["weights"], record["tables"]


def _layers(figures):
    manifest, weights, tables = _read_script(figures["js"].data.decode())
    return fmt.unpack(weights, tables, manifest)


def test_quantised_export_round_trips(tiny_net):
    result, figures = _export(tiny_net)
    assert set(figures) == {"json", "js"}          # one copy of the weights, in the script
    manifest = json.loads(figures["json"].data)
    script = figures["js"].data.decode()
    assert _read_script(script)[0] == manifest
    _, weights, tables = _read_script(script)
    # what the technique hands on to the page code is what the script carries
    from reportgen.techniques.base import RenderContext

    ctx = RenderContext(model=MODEL, step="0-1", class_names=CLASSES)
    assert live_decoder.TECHNIQUE.numbers(result, None, ctx) == manifest
    assert live_decoder.TECHNIQUE.data(result, None, ctx) == {"weights": weights,
                                                               "tables": tables}
    assert manifest["format"] == fmt.FORMAT and manifest["version"] == 2
    assert manifest["bits"] == 6 and manifest["digits"] == 1
    values = 12 * 16 + 16 * 144
    assert manifest["values"] == values and len(weights) == values      # one character each
    assert set(weights) <= set(fmt.ALPHABET)
    assert manifest["tables"] == (12 + 16) + (16 + 144)                 # scales and biases
    assert [layer["activation"] for layer in manifest["layers"]] == ["relu", "sigmoid"]
    assert manifest["output_shape"] == [12, 12, 1] and manifest["input_size"] == 12
    for index, (kernel, bias, _) in enumerate(fmt.unpack(weights, tables, manifest)):
        original = result[f"kernel{index}"]
        # biases are float32 as computed; every kernel weight within half a step of its row's
        # scale (max |row| / 31), and each row's largest weight exact up to float32 rounding
        np.testing.assert_array_equal(bias, result[f"bias{index}"])
        step = np.abs(original).max(axis=1, keepdims=True) / 31
        assert (np.abs(kernel - original) <= step / 2 * (1 + 1e-6)).all()
        np.testing.assert_allclose(np.abs(kernel).max(axis=1), np.abs(original).max(axis=1),
                                   rtol=1e-6)
    # the page's script carries it, registered under model and step
    assert '"Tiny"' in script and '"0-1"' in script and "</script" not in script
    assert manifest["check"]["max_abs_diff"] <= fmt.QUANT_LIMIT
    # deterministic bytes (the site is rebuilt byte for byte)
    assert [f.data for f in _export(tiny_net)[1].values()] == [f.data for f in figures.values()]


def test_twelve_bits_round_trip_and_are_finer():
    rng = np.random.default_rng(3)
    kernels = [rng.normal(size=(6, 5)).astype(np.float32),
               rng.normal(size=(5, 4)).astype(np.float32)]
    biases = [rng.normal(size=5).astype(np.float32), rng.normal(size=4).astype(np.float32)]
    errors = {}
    for bits in fmt.BITS:
        weights, tables, manifest = fmt.pack(kernels, biases, ["relu", "sigmoid"], [2, 2, 1],
                                             classes=2, dims=3, bits=bits)
        assert len(weights) == manifest["values"] * bits // 6
        layers = fmt.unpack(weights, tables, manifest)
        q, scale = fmt.quantise(kernels[0], bits)
        np.testing.assert_array_equal(layers[0][0], q.astype(np.float32) * scale[:, None])
        errors[bits] = max(np.abs(k - o).max() for (k, _, _), o in zip(layers, kernels))
    assert errors[12] < errors[6] / 30


def test_quantised_decoder_matches_keras(tiny_net):
    _, figures = _export(tiny_net)
    vectors, classes = live_decoder.check_vectors(3, 4, count=30, seed=5)
    ours = fmt.forward(_layers(figures), fmt.masked(vectors, classes, 3), [12, 12, 1])
    np.testing.assert_allclose(ours, _keras(tiny_net, vectors, classes), atol=fmt.QUANT_LIMIT)


@pytest.mark.slow
def test_real_demo_decoder_within_tolerance(tmp_path):
    """MNIST_Demo's decoder (160 -> 512 -> 1024 -> 784) after a short real training run (one
    epoch on 300 of the bundled digits, made here so a fresh clone runs it): one character per
    weight, and the reconstruction within 1.5e-2 of the Keras decoder's."""
    import shutil

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.catalog import Catalog
    from reportgen.training.checkpoints import load_weights
    from reportgen.training.trainer import TrainOptions, train

    demo = tmp_path / "models" / "MNIST_Demo"
    demo.mkdir(parents=True)
    root = Path(__file__).resolve().parents[4]    # the repository: reportgen/techniques/...
    shutil.copy(root / "models" / "MNIST_Demo" / "params.toml", demo)
    entry = Catalog(tmp_path / "models").get("MNIST_Demo")
    train(entry, TrainOptions(epochs=1, limit=300, save_every=1000))
    entry = Catalog(tmp_path / "models").get("MNIST_Demo")
    assert len(entry.steps) == 2                          # the untrained step and the trained one
    net = build_capsnet(entry.params)
    load_weights(net, entry.weights_path(entry.steps[-1]))
    _, figures = _export(net)
    manifest = json.loads(figures["json"].data)
    weights = 160 * 512 + 512 * 1024 + 1024 * 784
    assert manifest["bits"] == 6 and manifest["values"] == weights
    assert len(figures["js"].data) < 1.02 * weights          # about one byte per weight
    vectors, classes = live_decoder.check_vectors(10, 16, count=20, seed=7)
    ours = fmt.forward(_layers(figures), fmt.masked(vectors, classes, 10), [28, 28, 1])
    assert np.abs(ours - _keras(net, vectors, classes)).max() < fmt.QUANT_LIMIT
    assert manifest["check"]["max_abs_diff"] < fmt.QUANT_LIMIT


def test_models_without_decoder_have_no_live_decoder(make_net):
    plain = make_net(decoder={"enabled": False})
    # The technique applies to models with a decoder only (applies_to, read from the description).
    assert live_decoder.TECHNIQUE.variants(plain) == []
    assert not live_decoder.TECHNIQUE.applicable(plain.description)


def test_pack_refuses_what_it_cannot_hold():
    kernel = np.full((2, 3), np.inf, np.float32)
    with pytest.raises(ValueError, match="not finite"):
        fmt.pack([kernel], [np.zeros(3)], ["sigmoid"], [3, 1, 1], classes=1, dims=2)
    with pytest.raises(ValueError, match="output shape"):
        fmt.pack([np.zeros((2, 3))], [np.zeros(3)], ["sigmoid"], [2, 2, 1], classes=1, dims=2)


# ------------------------------------------------------------------ a site of two tiny steps


@pytest.fixture(scope="module")
def tiny_site(tmp_path_factory, tiny_net, make_net, images):
    """(site dir, {step: net}, {step: {input key: class capsules (K, D)}}, printed summary)."""
    import contextlib
    import io

    from reportgen.cache.keys import hash_json
    from reportgen.cache.store import ArtifactStore
    from reportgen.pages.assemble import Assembler, write_input_png
    from reportgen.pages.render import build_site, render_site
    from reportgen.pages.sitedata import InputInfo, ModelData, SiteData, StepData
    from reportgen.probe.probe import empty_batch, run_probe
    from reportgen.techniques import class_capsules
    from reportgen.techniques.base import RenderContext

    root = tmp_path_factory.mktemp("live")
    docs = root / "project" / "docs"
    store = ArtifactStore(root / "cache")
    assembler = Assembler(store, docs)
    nets = {STEPS[0]: tiny_net, STEPS[1]: make_net(seed=1)}
    keys = [f"test-{i}" for i in range(3)]
    inputs = []
    for i, key in enumerate(keys):
        path = docs / "artifacts" / MODEL / "inputs" / f"{key}.png"
        write_input_png(images[i], path)
        inputs.append(InputInfo(key=key, label=f"test #{i}", image=path.relative_to(docs)
                                .as_posix(), true_class=CLASSES[i]))
    steps, capsules = [], {}
    for name, net in nets.items():
        ctx = RenderContext(model=MODEL, step=name, class_names=CLASSES)
        step = StepData(step=name)
        key = hash_json({"live": name})
        store.put_arrays(key, live_decoder.compute(empty_batch(net), live_decoder.Params()), {})
        step.checkpoint_panels.append(assembler.panel(
            live_decoder.TECHNIQUE, live_decoder.Params(), key, ctx,
            docs / "artifacts" / MODEL / name / "checkpoint"))
        result = class_capsules.compute(run_probe(net, images[:3], gradients=False))
        capsules[name] = {}
        for i, inp in enumerate(keys):
            row = {k: v[i] for k, v in result.items()}
            key = hash_json({"capsules": name, "input": inp})
            store.put_arrays(key, row, {})
            item_ctx = RenderContext(model=MODEL, step=name, class_names=CLASSES,
                                     input_label=inp, image=images[i])
            step.input_panels[inp] = [assembler.panel(
                class_capsules.TECHNIQUE, class_capsules.Params(), key, item_ctx,
                docs / "artifacts" / MODEL / name / inp)]
            capsules[name][inp] = row["capsules"]
        steps.append(step)
    assembler.place_files()        # the stored files, linked into docs/ (as `build` does)
    model = ModelData(name=MODEL, dataset="random", description="", params=0,
                      class_names=list(CLASSES), architecture=[], history=[], steps=steps,
                      inputs=inputs)
    techniques = [{"name": t.name, "title": t.title, "layer": t.layer, "description": "",
                   "experimental": False} for t in (class_capsules.TECHNIQUE,
                                                    live_decoder.TECHNIQUE)]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        render_site(SiteData(title="live", models=[model], techniques=techniques), docs)
    site = build_site(root / "project", root / "site", strict=True)
    return site, nets, capsules, printed.getvalue()


def test_build_summary_prints_bytes_per_step(tiny_site):
    site, _, _, printed = tiny_site
    line = next(line for line in printed.splitlines() if line.startswith("live decoder"))
    scripts = sorted((site / "artifacts" / MODEL).glob("*/checkpoint/live_decoder.js"))
    assert len(scripts) == 2 and scripts[0].stat().st_size == scripts[1].stat().st_size
    size = scripts[0].stat().st_size
    assert line == f"live decoder {MODEL}: {size:,} bytes per step (6-bit weights, one script) × 2 steps"
    assert not list(site.rglob("*.bin"))
    index = read_index(site / "models" / MODEL)
    assert index["steps"]["0-2"]["live"] == f"models/{MODEL}/live/0-2.js"
    kinds = [f["kind"] for f in index["steps"]["0-2"]["checkpoint"]["live_decoder"]["figures"]]
    assert sorted(kinds) == ["js", "json"]
    html = (site / "models" / MODEL / "decoder.html").read_text()
    assert "data-rg-live-decoder" in html and "live-decoder.js" in html
    # no other page offers the live decoder as a picture
    assert "live_decoder" not in (site / "models" / MODEL / "filmstrip.html").read_text()


# ------------------------------------------------------------------ in the browser

pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
browser_only = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")


@pytest.fixture(scope="module")
def base_url(tiny_site):
    with serve(tiny_site[0]) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium() as launched:
        yield launched


@pytest.fixture()
def context(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    context.set_default_timeout(10000)
    requests, errors = [], []
    context.on("request", lambda request: requests.append(request.url))
    context.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    context.on("weberror", lambda error: errors.append(str(error.error)))
    yield context, requests, errors
    context.close()


def _pixels(page, selector="[data-ld-canvas]") -> np.ndarray:
    """The canvas as (H, W) grey values in [0, 1] (R channel; the decoder is single-channel)."""
    data = page.evaluate("""(selector) => {
        const canvas = document.querySelector(selector);
        const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height);
        return {width: canvas.width, height: canvas.height, data: Array.from(pixels.data)};
    }""", selector)
    rgba = np.asarray(data["data"], np.float64).reshape(data["height"], data["width"], 4)
    assert (rgba[..., 0] == rgba[..., 1]).all() and (rgba[..., 3] == 255).all()
    return rgba[..., 0] / 255.0


def _start(page, requests):
    """The weights load when the reader presses Start (the page is usable without them)."""
    button = page.locator("[data-ld-start]")
    button.wait_for(state="visible")
    assert "MB)" in button.inner_text()
    assert not [u for u in requests if u.endswith("live_decoder.js")]
    button.click()


def _ready(page):
    page.wait_for_selector("[data-ld-app]:not([hidden])")
    page.wait_for_function("document.querySelectorAll('[data-ld-dim]').length === 4")


def _check_against_keras(page, net, vector, cls):
    expected = _keras(net, np.asarray(vector)[None], [cls])[0, ..., 0]
    shown = _pixels(page)
    assert shown.shape == expected.shape == (12, 12)
    assert np.abs(shown - expected).max() <= TOLERANCE, np.abs(shown - expected).max()
    # the Python image beside it (same computation at the real capsule): within 1/255
    assert np.abs(_pixels(page, "[data-ld-python]") - shown).max() <= 1 / 255 + 1e-9
    return shown


@browser_only
def test_live_decoder_over_http(context, base_url, tiny_site):
    context, requests, errors = context
    _, nets, capsules, _ = tiny_site
    page = context.new_page()
    page.goto(base_url + f"models/{MODEL}/decoder.html")
    _start(page, requests)
    _ready(page)
    last = STEPS[-1]
    real = capsules[last]["test-0"]
    predicted = int(np.argmax(np.linalg.norm(real, axis=1)))
    assert page.locator("[data-ld-class]").input_value() == str(predicted)
    initial = _check_against_keras(page, nets[last], real[predicted], predicted)
    length = float(np.linalg.norm(real[predicted]))
    assert f"{length:.3f}" in page.locator("[data-ld-current]").inner_text()
    # the sliders start at the real pose values
    for d in range(4):
        value = float(page.locator(f'[data-ld-dim="{d}"]').input_value())
        assert abs(value - real[predicted, d]) <= 0.0026      # within one slider step

    # keyboard: ArrowRight on a focused slider changes its value and the canvas
    slider = page.locator('[data-ld-dim="0"]')
    before = float(slider.input_value())
    slider.focus()
    page.keyboard.press("ArrowRight")
    assert float(slider.input_value()) > before
    page.keyboard.press("End")                                # real value + 0.25
    page.wait_for_function("document.querySelector('[data-ld-dim=\"0\"] + output')"
                           ".classList.contains('rg-ld-moved')")
    page.wait_for_timeout(100)                                # one animation frame
    moved = _pixels(page)
    assert np.abs(moved - initial).max() > 2 / 255, "moving a slider changed nothing"
    vector = real[predicted].astype(np.float64).copy()
    vector[0] = float(slider.input_value())
    expected = _keras(nets[last], vector[None], [predicted])[0, ..., 0]
    assert np.abs(moved - expected).max() <= TOLERANCE

    # reset restores the initial image
    page.locator("[data-ld-reset]").click()
    np.testing.assert_array_equal(_pixels(page), initial)

    # the length slider rescales the capsule (direction kept)
    page.locator("[data-ld-length]").fill("0.5")
    page.wait_for_timeout(100)
    half = real[predicted] * (0.5 / length)
    expected = _keras(nets[last], half[None], [predicted])[0, ..., 0]
    assert np.abs(_pixels(page) - expected).max() <= TOLERANCE
    assert "0.500" in page.locator("[data-ld-current]").inner_text()

    # any class: the sliders restart at that class capsule's real values
    other = (predicted + 1) % 3
    page.select_option("[data-ld-class]", str(other))
    _check_against_keras(page, nets[last], real[other], other)

    # ±k σ ranges: the sliders' span follows the dimension's σ over the chosen inputs
    page.locator('[data-ld-range][value="std"]').check()
    span = float(slider.get_attribute("max")) - float(slider.get_attribute("min"))
    vectors = [c[int(np.argmax(np.linalg.norm(c, axis=1)))] for c in capsules[last].values()]
    sigma = float(np.std(np.asarray(vectors, np.float64)[:, 0]))
    assert span == pytest.approx(2 * max(2 * sigma, 1e-3), abs=1e-5)
    assert "chosen inputs" in page.locator("[data-ld-std-note]").inner_text()

    # another step and another input: that step's weights and capsules
    page.locator("[data-rg-step-slider]").focus()
    page.keyboard.press("Home")
    page.select_option("[data-rg-input-picker]", "test-2")
    page.wait_for_function("document.querySelector('[data-rg-step-value]').textContent"
                           " === '0-1'")
    _ready(page)
    real = capsules[STEPS[0]]["test-2"]
    predicted = int(np.argmax(np.linalg.norm(real, axis=1)))
    page.wait_for_function(f"document.querySelector('[data-ld-class]').value === "
                           f"'{predicted}'")
    _check_against_keras(page, nets[STEPS[0]], real[predicted], predicted)

    assert not errors, errors
    outside = [u for u in requests if not u.startswith((base_url, "data:", "blob:"))]
    assert not outside, outside


@browser_only
def test_live_decoder_from_file_url(context, tiny_site):
    context, requests, errors = context
    site, nets, capsules, _ = tiny_site
    page = context.new_page()
    page.goto((site / "models" / MODEL / "decoder.html").resolve().as_uri())
    _start(page, requests)
    _ready(page)
    real = capsules[STEPS[-1]]["test-0"]
    predicted = int(np.argmax(np.linalg.norm(real, axis=1)))
    initial = _check_against_keras(page, nets[STEPS[-1]], real[predicted], predicted)
    page.locator('[data-ld-dim="1"]').fill(str(float(real[predicted, 1]) - 0.25))
    page.wait_for_timeout(100)
    assert np.abs(_pixels(page) - initial).max() > 0
    page.locator("[data-ld-reset]").click()
    np.testing.assert_array_equal(_pixels(page), initial)
    # a keyboard user sees where they are: a dimension's slider shows a focus ring
    page.keyboard.press("Shift+Tab")                # leave the reset button by the keyboard
    page.keyboard.press("Tab")
    slider = page.locator('[data-ld-dim="1"]')
    slider.focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowLeft")
    ring = slider.evaluate("e => getComputedStyle(e).outlineStyle + ' ' + "
                           "getComputedStyle(e).outlineWidth")
    assert ring.split()[0] != "none" and ring.split()[1] != "0px", ring
    assert not errors, errors
    outside = [u for u in requests if not u.startswith(("file://", "data:", "blob:"))]
    assert not outside, outside


def test_weights_are_exported_only_at_the_steps_with_dataset_analyses():
    """1.4 MB per step for MNIST-sized decoders: the build keys (and so computes and ships) the
    live decoder where the dataset analyses run; other checkpoint results at every step."""
    from reportgen.engine.step import step_keys
    from reportgen.techniques import get_technique

    kernels = get_technique("conv_kernels")
    variants = [(live_decoder.TECHNIQUE, live_decoder.Params()),
                (kernels, kernels.params_type())]

    def keys(analysed):
        return step_keys("model", "w.weights.h5", variants, [], "eval", analysed,
                         digest=lambda path: "weights")

    assert {name for name, _ in keys(False).checkpoint} == {"conv_kernels"}
    assert {name for name, _ in keys(True).checkpoint} == {"conv_kernels", "live_decoder"}
