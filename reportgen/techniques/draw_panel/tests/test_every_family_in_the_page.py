"""onnxruntime-web in headless Chromium runs every registered family's exported network (the
built-in five and the example packages') equal to Keras within 1e-4, from file://, fetching
nothing: the page loads the site's runtime script and the draw panel's network script as a
built site ships them, and runs the manifest's check images as the panel does on load."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from browser_support import CHROMIUM, chromium

pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
pytestmark = [pytest.mark.slow, pytest.mark.browser,
              pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed "
                                                          "(apt-get install chromium)")]
FAMILIES = ("capsnet", "cnn", "em", "gracapsnet", "self_routing", "efficient_capsnet", "idpa")
TOLERANCE = 1e-4

# What draw-panel.js does on load (runtime(), check()), in one function the test calls.
HARNESS = """<!doctype html><meta charset="utf-8"><title>draw panel harness</title>
<script src="onnxruntime-web.js"></script>
<script>
function bytesOf(b64) { const s = atob(b64); const a = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) a[i] = s.charCodeAt(i); return a; }
function floatsOf(b64) { const b = bytesOf(b64); return new Float32Array(b.buffer); }
async function runAll(name) {
  const bundle = window.reportgenOrt;
  const url = URL.createObjectURL(new Blob([bundle.module], {type: "text/javascript"}));
  const wasm = await new Response(new Blob([bytesOf(bundle.wasm)]).stream()
    .pipeThrough(new DecompressionStream("gzip"))).arrayBuffer();
  const ort = await import(url);
  ort.env.wasm.wasmBinary = wasm; ort.env.wasm.numThreads = 1; ort.env.wasm.proxy = false;
  await new Promise((ok, bad) => { const s = document.createElement("script");
    s.src = name + ".js"; s.onload = ok; s.onerror = bad; document.head.appendChild(s); });
  const record = window.reportgenDraw[name]["1-1"];
  const m = record.manifest;
  const session = await ort.InferenceSession.create(bytesOf(record.onnx),
                                                    {executionProviders: ["wasm"]});
  const size = m.input[0] * m.input[1] * m.input[2];
  const inputs = floatsOf(m.check.inputs);
  const out = {};
  for (let n = 0; n < m.check.count; n++) {
    const image = new ort.Tensor("float32", inputs.slice(n * size, (n + 1) * size),
                                 [1, ...m.input]);
    const got = await session.run({image: image});
    for (const key of Object.keys(m.check.outputs)) {
      out[key] = (out[key] || []).concat(Array.from(got[key].data));
    }
  }
  return out;
}
</script>"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from reportgen.techniques.draw_panel import runtime

    script = runtime.runtime_script()
    if script is None:
        pytest.skip(runtime.missing_reason())
    path = tmp_path_factory.mktemp("every-family")
    (path / "onnxruntime-web.js").write_text(script, "utf-8")
    (path / "harness.html").write_text(HARNESS, "utf-8")
    return path


@pytest.fixture(scope="module")
def browser():
    with chromium() as launched:
        yield launched


def _exported(name: str, folder):
    import keras

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.settings.families import example_params
    from reportgen.settings.model_params import parse_model_params
    from reportgen.techniques import draw_panel
    from reportgen.techniques.draw_panel.figures import manifest, script

    keras.utils.set_random_seed(0)
    net = build_capsnet(parse_model_params(example_params(name)))
    result = draw_panel.compute(SimpleNamespace(net=net))
    ctx = SimpleNamespace(model=name, step="1-1", class_names=(),
                          description=net.description)
    record = manifest(result, ctx)
    (folder / f"{name}.js").write_text(script(record, result["onnx"].tobytes()), "utf-8")
    return result, record


@pytest.mark.parametrize("name", FAMILIES)
def test_the_page_runs_the_family_equal_to_keras(name, folder, browser):
    from reportgen.settings.families import registered

    if name not in registered():
        pytest.skip(f"install examples/{name} to export its family")
    result, record = _exported(name, folder)
    context = browser.new_context()
    requests = []
    context.on("request", lambda r: requests.append(r.url))
    page = context.new_page()
    page.goto((folder / "harness.html").as_uri())
    got = page.evaluate("(name) => runAll(name)", name)
    context.close()
    assert set(got) == set(record["outputs"]) and "scores" in got
    for key, values in got.items():
        want = np.asarray(result[f"check_{key}"], np.float32).ravel()
        np.testing.assert_allclose(np.asarray(values, np.float32), want, atol=TOLERANCE,
                                   rtol=0, err_msg=f"{name}: {key}")
    assert all(u.startswith(("file:", "blob:", "data:")) for u in requests), requests
