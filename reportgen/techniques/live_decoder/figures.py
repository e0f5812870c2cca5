"""The decoder's weights for the browser: one script per step that a page opened from file://
can load, its manifest, and the NumPy forward pass the page's JavaScript mirrors. No TensorFlow
here.

Format "reportgen-live-decoder" version 2: every kernel is quantised per row with a symmetric
scale (linear quantisation, as in Jacob et al. 2018, one scale per input unit): kernel[i][j] =
q[i][j] * scale[i], q a signed integer of `bits` bits (|q| <= 2^(bits-1) - 1). Each q is
written as `digits` characters of the base64 alphabet (A-Z a-z 0-9 + /, 6 bits each, most
significant first) holding q + 2^(bits-1): bits = 6 is one character per weight, so the script
is as small as the raw int8 values would be and needs no base64 decoding. When the 6-bit
weights move the reconstruction by more than QUANT_LIMIT per pixel against the model's own
decoder, 12 bits (two characters) are used instead.

Layers follow each other in decoder order; for each, the manifest gives `q_offset` (in values:
q[i][j] is value number q_offset + i * units + j of the weights string), and `scale_offset` and
`bias_offset` into `tables`: float32 little-endian values, base64-encoded (for each layer its
`inputs` scales then its `units` biases).

Reading it back in NumPy: `fmt.unpack(weights, tables, manifest)` on the strings `export`
hands on (`Panel.data`: the page code never parses the script it generated). The decoder maps
the masked class capsules (classes x dims values: the chosen class's pose vector in its slot, zeros
elsewhere, as in Sabour et al. 2017) through dense layers with the manifest's activations (relu
... relu, sigmoid) to `prod(output_shape)` values, reshaped to (height, width, channels)
row-major. The manifest's "check" records the largest difference of the exported weights'
reconstruction from the real (Keras) decoder's, measured when they were exported.

Browsers block fetch() from file://, so the weights travel inside `live_decoder.js`, a script
that registers itself in `window.reportgenLive.weights[model][step]` when a plain <script src>
loads it (see templates/assets/live-decoder.js).
"""

from __future__ import annotations

import base64
import json

import numpy as np

FORMAT = "reportgen-live-decoder"
FORMAT_VERSION = 2
ACTIVATIONS = ("linear", "relu", "sigmoid")      # codes 0, 1, 2 in the technique's arrays
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
BITS = (6, 12)              # tried in order: one, then two base64 characters per weight
QUANT_LIMIT = 1.5e-2        # largest per-pixel change against the real decoder that 6 bits may cause
FLOAT32_MAX = float(np.finfo(np.float32).max)

LAYOUT = ("per layer: kernel[i][j] = q[i][j] * scale[i]; q = (value of `digits` base64 "
          "characters of `weights`, most significant first) - 2^(bits-1), at value q_offset + "
          "i*units + j; scales and biases are float32 little-endian in `tables` (base64), at "
          "scale_offset (inputs values) and bias_offset (units values)")

_CODES = np.frombuffer(ALPHABET.encode("ascii"), np.uint8)
_LOOKUP = np.full(256, 255, np.uint8)
_LOOKUP[_CODES] = np.arange(64, dtype=np.uint8)


def quantise(kernel: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """(q int32 (inputs, units), scale float32 (inputs,)): one symmetric scale per row."""
    kernel = np.asarray(kernel, np.float32)
    top = 2 ** (bits - 1) - 1
    peak = np.max(np.abs(kernel), axis=1) if kernel.size else np.zeros(len(kernel), np.float32)
    scale = np.where(peak > 0, peak / top, 1.0).astype(np.float32)
    q = np.clip(np.rint(kernel / scale[:, None]), -top, top).astype(np.int32)
    return q, scale


def _characters(q: np.ndarray, bits: int) -> bytes:
    digits = bits // 6
    shifted = (np.asarray(q, np.int64).reshape(-1) + 2 ** (bits - 1))
    columns = [(shifted >> (6 * (digits - 1 - d))) & 63 for d in range(digits)]
    return _CODES[np.stack(columns, axis=1).reshape(-1)].tobytes()


def _values(text: bytes, bits: int) -> np.ndarray:
    digits = bits // 6
    codes = _LOOKUP[np.frombuffer(text, np.uint8)]
    if codes.size % digits or (codes == 255).any():
        raise ValueError("live decoder: the weights are not base64 characters of whole values")
    sixes = codes.astype(np.int64).reshape(-1, digits)
    shifted = np.zeros(len(sixes), np.int64)
    for d in range(digits):
        shifted = shifted * 64 + sixes[:, d]
    return shifted - 2 ** (bits - 1)


def pack(kernels, biases, activations, output_shape, classes: int, dims: int,
         model: str = "", step: str = "", bits: int = BITS[0]) -> tuple[str, str, dict]:
    """(weights characters, tables base64, manifest) of dense layers given as float32 kernels
    (inputs, units) and biases.

    Raises ValueError when a weight is not finite or the shapes do not chain.
    """
    if bits not in BITS:
        raise ValueError(f"live decoder: bits must be one of {BITS}")
    chars, tables, layers = [], [], []
    q_offset = t_offset = 0
    previous = classes * dims
    for index, (kernel, bias, activation) in enumerate(zip(kernels, biases, activations)):
        kernel = np.asarray(kernel, np.float32)
        bias = np.asarray(bias, np.float32).reshape(-1)
        if kernel.ndim != 2 or kernel.shape[0] != previous or bias.shape[0] != kernel.shape[1]:
            raise ValueError(f"live decoder: layer {index} has kernel {kernel.shape} and bias "
                             f"{bias.shape}; expected ({previous}, units) and (units,)")
        if activation not in ACTIVATIONS:
            raise ValueError(f"live decoder: activation {activation!r} of layer {index} is not "
                             f"one of {ACTIVATIONS}")
        for name, values in (("kernel", kernel), ("bias", bias)):
            if not np.all(np.isfinite(values)):
                raise ValueError(f"live decoder: the {name} of layer {index} has values that "
                                 "are not finite")
        inputs, units = (int(v) for v in kernel.shape)
        q, scale = quantise(kernel, bits)
        layers.append({"index": index, "inputs": inputs, "units": units,
                       "activation": activation, "q_offset": q_offset,
                       "scale_offset": t_offset, "bias_offset": t_offset + inputs})
        chars.append(_characters(q, bits))
        tables += [scale.astype("<f4").tobytes(), bias.astype("<f4").tobytes()]
        q_offset += kernel.size
        t_offset += inputs + units
        previous = units
    size = int(np.prod(output_shape))
    if previous != size:
        raise ValueError(f"live decoder: the last layer has {previous} units; the output shape "
                         f"{tuple(output_shape)} needs {size}")
    weights = b"".join(chars).decode("ascii")
    table_text = base64.b64encode(b"".join(tables)).decode("ascii")
    manifest = {
        "format": FORMAT, "version": FORMAT_VERSION, "model": model, "step": step,
        "bits": bits, "digits": bits // 6, "quantisation": "symmetric, one scale per kernel row",
        "layout": LAYOUT, "classes": int(classes), "dims": int(dims),
        "input_size": int(classes * dims), "output_shape": [int(v) for v in output_shape],
        "layers": layers, "values": q_offset, "tables": t_offset,
        "bytes": len(weights) + len(table_text),
    }
    return weights, table_text, manifest


def unpack(weights: str, tables: str, manifest: dict) -> list[tuple[np.ndarray, np.ndarray, str]]:
    """[(kernel float32 (inputs, units), bias float32 (units,), activation)] as the page reads
    them (dequantised)."""
    if manifest.get("format") != FORMAT or manifest.get("version") != FORMAT_VERSION:
        raise ValueError(f"not a {FORMAT} v{FORMAT_VERSION} manifest")
    bits = manifest["bits"]
    if bits not in BITS or len(weights) != manifest["values"] * (bits // 6):
        raise ValueError(f"live decoder: {len(weights)} weight characters, the manifest says "
                         f"{manifest['values']} values of {bits} bits")
    q = _values(weights.encode("ascii"), bits)
    table = np.frombuffer(base64.b64decode(tables), "<f4")
    if len(table) != manifest["tables"]:
        raise ValueError(f"live decoder: {len(table)} table values, the manifest says "
                         f"{manifest['tables']}")
    out = []
    for layer in manifest["layers"]:
        n, m = layer["inputs"], layer["units"]
        q0, s0, b0 = layer["q_offset"], layer["scale_offset"], layer["bias_offset"]
        scale = table[s0:s0 + n].astype(np.float32)
        kernel = q[q0:q0 + n * m].reshape(n, m).astype(np.float32) * scale[:, None]
        out.append((kernel, table[b0:b0 + m].astype(np.float32), layer["activation"]))
    return out


def forward(layers, inputs: np.ndarray, output_shape) -> np.ndarray:
    """The dense forward pass the page's JavaScript runs (float64 sums, like JS numbers).

    `inputs` (N, classes*dims) masked capsules -> (N, *output_shape) float64 in [0, 1].
    """
    x = np.asarray(inputs, np.float64).reshape(len(inputs), -1)
    for kernel, bias, activation in layers:
        x = x @ np.asarray(kernel, np.float64) + np.asarray(bias, np.float64)
        if activation == "relu":
            x = np.maximum(x, 0.0)
        elif activation == "sigmoid":
            x = 1.0 / (1.0 + np.exp(-x))
    return x.reshape((len(x), *output_shape))


def masked(vectors: np.ndarray, classes_: np.ndarray, classes: int) -> np.ndarray:
    """Pose vectors (N, D) placed in their class's slot of (N, classes*D), zeros elsewhere."""
    vectors = np.asarray(vectors, np.float64)
    n, dims = vectors.shape
    out = np.zeros((n, classes, dims), np.float64)
    out[np.arange(n), np.asarray(classes_, np.int64)] = vectors
    return out.reshape(n, classes * dims)


def to_pixels(images: np.ndarray) -> np.ndarray:
    """[0, 1] floats -> uint8 the way the page writes its canvas (round half up, clipped)."""
    return np.floor(np.clip(np.asarray(images, np.float64), 0.0, 1.0) * 255.0 + 0.5) \
        .astype(np.uint8)


def script(manifest: dict, weights: str, tables: str) -> str:
    """`live_decoder.js`: manifest, weight characters and tables, registered under model and
    step."""
    body = json.dumps({"manifest": manifest, "weights": weights, "tables": tables},
                      ensure_ascii=False, separators=(",", ":"))
    return (f"/* reportgen live decoder weights ({manifest['bits']}-bit, one scale per kernel "
            "row): see the manifest's layout. */\n"
            "(function (registry) {\n"
            f"  var model = {js_literal(manifest['model'])};\n"
            "  registry.weights = registry.weights || {};\n"
            "  registry.weights[model] = registry.weights[model] || {};\n"
            f"  registry.weights[model][{js_literal(manifest['step'])}] = {js_safe(body)};\n"
            "})(window.reportgenLive = window.reportgenLive || {});\n")


def js_literal(value) -> str:
    return js_safe(json.dumps(value, ensure_ascii=False))


def js_safe(text: str) -> str:
    """JSON as JavaScript inside a page: no "</script", no U+2028/9 (old parsers)."""
    return text.replace("</", "<\\/").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _check(layers, result, output_shape) -> dict | None:
    if "check_inputs" not in result or not len(result["check_inputs"]):
        return None
    ours = forward(layers, result["check_inputs"], output_shape)
    diff = np.abs(ours - np.asarray(result["check_outputs"], np.float64))
    return {"reference": "the model's decoder (Keras, float32) at this step",
            "vectors": int(len(result["check_inputs"])),
            "max_abs_diff": float(np.round(diff.max(), 6)),
            "mean_abs_diff": float(np.round(diff.mean(), 7))}


def export(result, model: str = "", step: str = "") -> tuple[str, str, dict]:
    """(weights characters, tables base64, manifest) of one step's decoder arrays: 6 bits,
    or 12 where 6 move the reconstruction by more than QUANT_LIMIT against the real decoder.
    What the page's script carries and what the live decoder's Python reference reads."""
    kernels, biases, index = [], [], 0
    while f"kernel{index}" in result:
        kernels.append(result[f"kernel{index}"])
        biases.append(result[f"bias{index}"])
        index += 1
    activations = [ACTIVATIONS[int(code)] for code in np.asarray(result["activations"])]
    output_shape = [int(v) for v in np.asarray(result["output_shape"]).reshape(-1)]
    classes, dims = (int(v) for v in np.asarray(result["capsule_shape"]).reshape(-1))
    for bits in BITS:
        weights, tables, manifest = pack(kernels, biases, activations, output_shape, classes,
                                         dims, model=model, step=step, bits=bits)
        check = _check(unpack(weights, tables, manifest), result, output_shape)
        if check is None or check["max_abs_diff"] <= QUANT_LIMIT:
            break
    if check is not None:
        manifest["check"] = check
    return weights, tables, manifest


def _names(ctx) -> tuple[str, str]:
    return (getattr(ctx, "model", "") if ctx is not None else "",
            getattr(ctx, "step", "") if ctx is not None else "")


def live_manifest(result, params, ctx) -> dict:
    """The live decoder's numbers (`Panel.numbers`): the manifest."""
    return export(result, *_names(ctx))[2]


def live_weights(result, params, ctx) -> dict:
    """The live decoder's data (`Panel.data`): the weights and tables its script carries."""
    weights, tables, _ = export(result, *_names(ctx))
    return {"weights": weights, "tables": tables}


def render_live_decoder(result, params, ctx) -> list:
    """Figures of one exported decoder: its manifest (JSON) and the page's script."""
    from reportgen.figures.figure import Figure

    model, step = _names(ctx)
    weights, tables, manifest = export(result, model, step)
    activations = [layer["activation"] for layer in manifest["layers"]]
    check = manifest.get("check")
    shapes = " → ".join([str(manifest["input_size"])] + [str(layer["units"])
                                                          for layer in manifest["layers"]])
    text = script(manifest, weights, tables).encode("utf-8")
    caption = (f"Decoder weights for the browser at step {step}: {len(activations)} dense "
               f"layers ({shapes}; {', '.join(activations)}), {manifest['bits']}-bit with one "
               f"scale per kernel row, {len(text):,} bytes (layout in the JSON manifest)."
               + (f" Against the float32 decoder: max |Δ| = {check['max_abs_diff']:.2g} per "
                  f"pixel over {check['vectors']} capsule vectors." if check else ""))
    data = json.dumps(manifest, indent=1, sort_keys=True).encode()
    return [Figure(name="live_decoder.json", data=data + b"\n", kind="json", caption=caption),
            Figure(name="live_decoder.js", data=text, kind="js", caption=caption)]
