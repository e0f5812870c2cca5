"""The decoder's weights for the browser : a compact binary, its manifest, a script that
carries both to a page opened from file://, and the NumPy forward pass the page's JavaScript
mirrors. No TensorFlow here.

Binary layout (`live_decoder.bin`), format "reportgen-live-decoder" version 1:

- every value is an IEEE 754 half-precision float (float16), little-endian, 2 bytes;
- layers follow each other in decoder order; each layer is its kernel, then its bias:
  kernel (inputs x units) row-major, i.e. kernel[i][j] is value number `kernel_offset + i *
  units + j`; bias[j] is value number `bias_offset + j`;
- offsets in the manifest count values (byte offset = 2 x value offset); nothing else is in the
  file (no header, no padding), so its size is 2 x the number of weights.

Reading it back in NumPy: `w = np.frombuffer(data, "<f2")`, then
`w[o:o + n * m].reshape(n, m)` per kernel. The decoder maps the masked class capsules (classes x
dims values: the chosen class's pose vector in its slot, zeros elsewhere, as in Sabour et al. 2017) through dense
layers with the manifest's activations (relu ... relu, sigmoid) to `prod(output_shape)` values,
reshaped to (height, width, channels) row-major.

float16 keeps 11 significant bits (relative error <= 2^-11 per weight): the reconstruction
differs from the float32 decoder's by about 1e-3 per pixel; the manifest's "check" records the
largest difference measured against the real (Keras) decoder when the weights were exported.

The page cannot fetch() the binary from file:// (browsers block it), so the same bytes are also
written base64-encoded inside `live_decoder.js`, a script that registers itself in
`window.reportgenLive.weights[model][step]` when a plain <script src> loads it (see
templates/assets/live-decoder.js).
"""

from __future__ import annotations

import base64
import json

import numpy as np

FORMAT = "reportgen-live-decoder"
FORMAT_VERSION = 1
ACTIVATIONS = ("linear", "relu", "sigmoid")      # codes 0, 1, 2 in the technique's arrays
FLOAT16_MAX = float(np.finfo(np.float16).max)

LAYOUT = ("float16 little-endian, no header; layers in order, each its kernel (inputs x units, "
          "row-major: kernel[i][j] = value kernel_offset + i*units + j) then its bias (units); "
          "offsets count values (byte offset = 2 x offset)")


def pack(kernels, biases, activations, output_shape, classes: int, dims: int,
         model: str = "", step: str = "") -> tuple[bytes, dict]:
    """(binary, manifest) of dense layers given as float32 kernels (inputs, units) and biases.

    Raises ValueError when a weight does not fit float16 (|w| > 65504) or the shapes do not
    chain.
    """
    parts, layers, offset = [], [], 0
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
            if not np.all(np.isfinite(values)) or np.max(np.abs(values), initial=0) > FLOAT16_MAX:
                raise ValueError(f"live decoder: the {name} of layer {index} has values that "
                                 "float16 cannot hold (not finite or larger than 65504)")
        units = int(kernel.shape[1])
        layers.append({"index": index, "inputs": int(kernel.shape[0]), "units": units,
                       "activation": activation, "kernel_offset": offset,
                       "bias_offset": offset + kernel.size})
        parts += [kernel.astype("<f2").tobytes(), bias.astype("<f2").tobytes()]
        offset += kernel.size + units
        previous = units
    size = int(np.prod(output_shape))
    if previous != size:
        raise ValueError(f"live decoder: the last layer has {previous} units; the output shape "
                         f"{tuple(output_shape)} needs {size}")
    data = b"".join(parts)
    manifest = {
        "format": FORMAT, "version": FORMAT_VERSION, "model": model, "step": step,
        "dtype": "float16", "byte_order": "little", "layout": LAYOUT,
        "classes": int(classes), "dims": int(dims), "input_size": int(classes * dims),
        "output_shape": [int(v) for v in output_shape],
        "layers": layers, "values": offset, "bytes": len(data),
    }
    return data, manifest


def unpack(data: bytes, manifest: dict) -> list[tuple[np.ndarray, np.ndarray, str]]:
    """[(kernel float32 (inputs, units), bias float32 (units,), activation)] from the binary."""
    if manifest.get("format") != FORMAT or manifest.get("version") != FORMAT_VERSION:
        raise ValueError(f"not a {FORMAT} v{FORMAT_VERSION} manifest")
    if len(data) != manifest["bytes"]:
        raise ValueError(f"live decoder: {len(data)} bytes, the manifest says {manifest['bytes']}")
    values = np.frombuffer(data, "<f2")
    out = []
    for layer in manifest["layers"]:
        n, m = layer["inputs"], layer["units"]
        k0, b0 = layer["kernel_offset"], layer["bias_offset"]
        out.append((values[k0:k0 + n * m].reshape(n, m).astype(np.float32),
                    values[b0:b0 + m].astype(np.float32), layer["activation"]))
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


def script(manifest: dict, data: bytes) -> str:
    """`live_decoder.js`: manifest and base64 weights, registered under model and step."""
    body = json.dumps({"manifest": manifest, "weights": base64.b64encode(data).decode("ascii")},
                      ensure_ascii=False, separators=(",", ":"))
    return ("/* reportgen live decoder weights (float16, base64): see the manifest's layout. */\n"
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


def render_live_decoder(result, params, ctx) -> list:
    """Figures of one exported decoder: the binary, its manifest (JSON) and the page's script."""
    from reportgen.figures.figure import Figure

    kernels, biases, index = [], [], 0
    while f"kernel{index}" in result:
        kernels.append(result[f"kernel{index}"])
        biases.append(result[f"bias{index}"])
        index += 1
    activations = [ACTIVATIONS[int(code)] for code in np.asarray(result["activations"])]
    output_shape = [int(v) for v in np.asarray(result["output_shape"]).reshape(-1)]
    classes, dims = (int(v) for v in np.asarray(result["capsule_shape"]).reshape(-1))
    model = getattr(ctx, "model", "") if ctx is not None else ""
    step = getattr(ctx, "step", "") if ctx is not None else ""
    data, manifest = pack(kernels, biases, activations, output_shape, classes, dims,
                          model=model, step=step)
    if "check_inputs" in result and len(result["check_inputs"]):
        ours = forward(unpack(data, manifest), result["check_inputs"], output_shape)
        diff = np.abs(ours - np.asarray(result["check_outputs"], np.float64))
        manifest["check"] = {
            "reference": "the model's decoder (Keras, float32) at this step",
            "vectors": int(len(result["check_inputs"])),
            "max_abs_diff": float(np.round(diff.max(), 6)),
            "mean_abs_diff": float(np.round(diff.mean(), 7)),
        }
    shapes = " → ".join([str(manifest["input_size"])] + [str(layer["units"])
                                                          for layer in manifest["layers"]])
    check = manifest.get("check")
    caption = (f"Decoder weights for the browser at step {step}: {len(kernels)} dense layers "
               f"({shapes}; {', '.join(activations)}), float16 little-endian, "
               f"{manifest['bytes']:,} bytes (layout in the JSON manifest)."
               + (f" Against the float32 decoder: max |Δ| = {check['max_abs_diff']:.2g} per "
                  f"pixel over {check['vectors']} capsule vectors." if check else ""))
    text = json.dumps(manifest, indent=1, sort_keys=True).encode()
    return [Figure(name="live_decoder.bin", data=data, kind="bin", caption=caption),
            Figure(name="live_decoder.json", data=text + b"\n", kind="json", caption=caption),
            Figure(name="live_decoder.js", data=script(manifest, data).encode("utf-8"),
                   kind="js", caption=caption)]
