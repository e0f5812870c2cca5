/*
 * live-decoder.js: the Decoder page's live decoder. Readable on purpose; no library.
 *
 * What it shows: for the chosen input at the chosen training step, one slider per dimension of
 * a class capsule (the predicted class unless another is picked), starting at the capsule's real
 * pose values, plus a length slider. As they move, a dense forward pass written here in plain
 * JavaScript redraws the reconstruction on a canvas; beside it, the image Python computed at
 * build time from the real capsule. At the initial slider values both are the same computation
 * (mask all other classes, then dense layers with relu ... relu, sigmoid), so they agree.
 *
 * Where the numbers come from (all loaded with plain <script src> elements, because browsers
 * block fetch() of local files when the site is opened from file://):
 * - the step's weights: the live_decoder panel's "js" figure (from the page's model index,
 *   window.reportgenData[slug].steps[step].checkpoint.live_decoder), which registers
 *   window.reportgenLive.weights[model][step] = {manifest, weights: quantised values as base64
 *   characters, tables: base64 float32 scales and biases};
 * - the step's inputs: models/SLUG/live/STEP.js (index: steps[step].live), which registers
 *   window.reportgenLive.inputs[model][step] = {inputs: {key: {capsules (classes x dims),
 *   lengths, predicted, python: base64 uint8 images of every class's real capsule}}, std}.
 * A step's scripts are inserted when the step is first chosen (one step's weights are about one
 * byte per weight)
 * and stay cached in the page afterwards.
 *
 * It follows the page's choice through reportgen.js's "reportgen:selection" event.
 */
(function () {
  "use strict";

  /* "±0.25": the decoder perturbation technique's range (Sabour et al. 2017, Fig. 4) */
  var FIXED_RANGE = 0.25;
  var TICKS = 100; /* positions per dimension slider */
  var DISPLAY = 168; /* canvas display size (CSS px), pixelated */

  var card = document.querySelector("[data-rg-live-decoder]");
  var page = card ? card.closest("[data-rg-page]") : null;
  if (!card || !page) {
    return;
  }
  var root = page.getAttribute("data-rg-root") || "";
  var slug = page.getAttribute("data-rg-model") || "";

  function el(name) {
    return card.querySelector("[data-ld-" + name + "]");
  }

  var ui = {
    app: el("app"),
    status: el("status"),
    classPicker: el("class"),
    ranges: card.querySelectorAll("[data-ld-range]"),
    k: el("k"),
    reset: el("reset"),
    stdNote: el("std-note"),
    sliders: el("sliders"),
    canvas: el("canvas"),
    python: el("python"),
    length: el("length"),
    lengthValue: el("length-value"),
    current: el("current"),
    agreement: el("agreement"),
    start: el("start")
  };

  var state = {
    request: 0, /* increases with every selection: late loads of older choices are ignored */
    model: null, /* the page's model index */
    step: null,
    input: null,
    net: null, /* decoded weights of the current step */
    data: null, /* the step's inputs record */
    record: null, /* the chosen input's record */
    cls: 0,
    real: [], /* the chosen class capsule's real pose values */
    vector: [], /* what the sliders say now */
    dirty: false, /* moved away from the real capsule */
    mode: "fixed",
    k: 2,
    /* the weights (about 1.4 MB for MNIST) load when the reader asks, not with the page:
     * the page is usable before they arrive; once started, every step change loads its own */
    started: false,
    waiting: null /* the selection to load when the reader presses Start */
  };

  /* ---------------------------------------------------------------- loading scripts */

  var scripts = {}; /* src -> {done: bool, failed: bool, waiting: [callbacks]} */

  function loadScript(src, callback) {
    var entry = scripts[src];
    if (entry && entry.done) {
      callback(!entry.failed);
      return;
    }
    if (entry) {
      entry.waiting.push(callback);
      return;
    }
    entry = scripts[src] = {done: false, failed: false, waiting: [callback]};
    var script = document.createElement("script");
    script.src = src;
    script.async = true;
    function finish(ok) {
      entry.done = true;
      entry.failed = !ok;
      entry.waiting.splice(0).forEach(function (waiting) {
        waiting(ok);
      });
    }
    script.onload = function () { finish(true); };
    script.onerror = function () { finish(false); };
    document.head.appendChild(script);
  }

  function registry(kind, model, step) {
    var live = window.reportgenLive || {};
    var byModel = (live[kind] || {})[model] || {};
    return byModel[step] || null;
  }

  /* ---------------------------------------------------------------- quantised weights */

  var ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  var sixBits = null;

  /* character code -> its 6-bit value in the base64 alphabet (-1 for any other character) */
  function digitTable() {
    if (!sixBits) {
      sixBits = new Int8Array(128).fill(-1);
      for (var i = 0; i < ALPHABET.length; i++) {
        sixBits[ALPHABET.charCodeAt(i)] = i;
      }
    }
    return sixBits;
  }

  function base64Bytes(text) {
    var binary = window.atob(text);
    var bytes = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i++) {
      bytes[i] = binary.charCodeAt(i);
    }
    return bytes;
  }

  /* {manifest, weights, tables} -> {layers: [{inputs, units, activation, kernel, bias}], ...}:
   * kernel[i][j] = q[i][j] * scale[i], q stored as `digits` base64 characters per value
   * (reportgen/techniques/live_decoder/figures.py documents the format). */
  function decodeWeights(entry) {
    var manifest = entry.manifest;
    var digits = manifest.digits;
    var offset = Math.pow(2, manifest.bits - 1);
    var text = entry.weights;
    if (text.length !== manifest.values * digits) {
      throw new Error("live decoder: " + text.length + " weight characters, the manifest " +
        "says " + manifest.values * digits);
    }
    var tableBytes = base64Bytes(entry.tables);
    if (tableBytes.length !== 4 * manifest.tables) {
      throw new Error("live decoder: " + tableBytes.length + " table bytes, the manifest says " +
        4 * manifest.tables);
    }
    var view = new DataView(tableBytes.buffer);
    var table = new Float32Array(manifest.tables);
    for (var t = 0; t < table.length; t++) {
      table[t] = view.getFloat32(4 * t, true); /* little-endian */
    }
    var lookup = digitTable();
    return {
      manifest: manifest,
      classes: manifest.classes,
      dims: manifest.dims,
      shape: manifest.output_shape, /* [height, width, channels] */
      layers: manifest.layers.map(function (layer) {
        var inputs = layer.inputs;
        var units = layer.units;
        var kernel = new Float32Array(inputs * units);
        var position = layer.q_offset * digits;
        for (var i = 0; i < inputs; i++) {
          var scale = table[layer.scale_offset + i];
          for (var j = 0; j < units; j++) {
            var q = 0;
            for (var d = 0; d < digits; d++) {
              var value = lookup[text.charCodeAt(position++)];
              if (!(value >= 0)) {
                throw new Error("live decoder: a weight character outside the base64 alphabet");
              }
              q = q * 64 + value;
            }
            kernel[i * units + j] = (q - offset) * scale;
          }
        }
        return {
          inputs: inputs,
          units: units,
          activation: layer.activation,
          kernel: kernel,
          bias: table.subarray(layer.bias_offset, layer.bias_offset + units)
        };
      })
    };
  }

  /* ---------------------------------------------------------------- the forward pass */

  /* The decoder on one masked capsule: class `cls` holds `vector`, every other class is zero.
   * Returns the output (height * width * channels values in [0, 1], row-major). */
  function forward(net, cls, vector) {
    var x = null;
    for (var l = 0; l < net.layers.length; l++) {
      var layer = net.layers[l];
      var units = layer.units;
      var w = layer.kernel;
      var out = new Float64Array(units);
      var i, j, a, row;
      for (j = 0; j < units; j++) {
        out[j] = layer.bias[j];
      }
      if (l === 0) {
        /* The mask: only the chosen class's rows of the first kernel meet non-zero inputs. */
        for (i = 0; i < net.dims; i++) {
          a = vector[i];
          if (a === 0) {
            continue;
          }
          row = (cls * net.dims + i) * units;
          for (j = 0; j < units; j++) {
            out[j] += a * w[row + j];
          }
        }
      } else {
        for (i = 0; i < layer.inputs; i++) {
          a = x[i];
          if (a === 0) {
            continue; /* ReLU zeros add nothing */
          }
          row = i * units;
          for (j = 0; j < units; j++) {
            out[j] += a * w[row + j];
          }
        }
      }
      for (j = 0; j < units; j++) {
        if (layer.activation === "relu") {
          out[j] = out[j] > 0 ? out[j] : 0;
        } else if (layer.activation === "sigmoid") {
          out[j] = 1 / (1 + Math.exp(-out[j]));
        }
      }
      x = out;
    }
    return x;
  }

  /* ---------------------------------------------------------------- drawing */

  function toByte(value) {
    var v = value < 0 ? 0 : (value > 1 ? 1 : value);
    return Math.floor(v * 255 + 0.5);
  }

  /* Paint `count` = height*width*channels values (get(i) -> byte) onto a canvas. */
  function paint(canvas, shape, get) {
    var height = shape[0];
    var width = shape[1];
    var channels = shape[2];
    if (canvas.width !== width || canvas.height !== height) {
      canvas.width = width;
      canvas.height = height;
    }
    var scale = Math.max(1, Math.floor(DISPLAY / Math.max(width, height)));
    canvas.style.width = width * scale + "px";
    canvas.style.height = height * scale + "px";
    var context = canvas.getContext("2d");
    var image = context.createImageData(width, height);
    var pixels = image.data;
    for (var p = 0; p < width * height; p++) {
      var r, g, b;
      if (channels === 1) {
        r = g = b = get(p);
      } else {
        r = get(p * channels);
        g = get(p * channels + 1);
        b = get(p * channels + 2);
      }
      pixels[4 * p] = r;
      pixels[4 * p + 1] = g;
      pixels[4 * p + 2] = b;
      pixels[4 * p + 3] = 255;
    }
    context.putImageData(image, 0, 0);
  }

  function pythonBytes() {
    var net = state.net;
    var size = net.shape[0] * net.shape[1] * net.shape[2];
    if (!state.record.pythonBytes) {
      state.record.pythonBytes = base64Bytes(state.record.python);
    }
    return state.record.pythonBytes.subarray(state.cls * size, (state.cls + 1) * size);
  }

  var frame = null;

  function redrawSoon() {
    if (frame === null) {
      frame = window.requestAnimationFrame(function () {
        frame = null;
        redraw();
      });
    }
  }

  function redraw() {
    if (!state.net || !state.record) {
      return;
    }
    var output = forward(state.net, state.cls, state.vector);
    paint(ui.canvas, state.net.shape, function (i) { return toByte(output[i]); });
    var length = norm(state.vector);
    ui.length.value = String(Math.min(1, length));
    ui.length.setAttribute("aria-valuetext", length.toFixed(3));
    ui.lengthValue.textContent = length.toFixed(3);
    ui.current.textContent = "Current length |v| = " + length.toFixed(3) + " (real: " +
      norm(state.real).toFixed(3) + ")" + (length > 1 ? ": longer than a squashed capsule " +
      "can be" : "");
    if (state.dirty) {
      ui.agreement.textContent = "Sliders moved: the Python image still shows the real " +
        "capsule. Reset to compare the two.";
    } else {
      var python = pythonBytes();
      var worst = 0;
      for (var i = 0; i < output.length; i++) {
        worst = Math.max(worst, Math.abs(output[i] - python[i] / 255));
      }
      ui.agreement.textContent = "Browser and Python agree on the real capsule: largest " +
        "pixel difference " + worst.toFixed(4) + " (the Python image is stored as 8-bit, " +
        "so up to 0.002 is rounding)." + checkText();
    }
  }

  function checkText() {
    var check = state.net.manifest.check;
    if (!check) {
      return "";
    }
    return " Against the model's float32 decoder the " + state.net.manifest.bits +
      "-bit weights differ by at most " +
      check.max_abs_diff.toPrecision(2) + " per pixel (" + check.vectors +
      " capsule vectors, measured when the weights were exported).";
  }

  /* ---------------------------------------------------------------- sliders */

  function norm(vector) {
    var sum = 0;
    for (var i = 0; i < vector.length; i++) {
      sum += vector[i] * vector[i];
    }
    return Math.sqrt(sum);
  }

  function signed(value) {
    return (value >= 0 ? "+" : "\u2212") + Math.abs(value).toFixed(3);
  }

  function dimensionSliders() {
    return ui.sliders.querySelectorAll("input[type=range]");
  }

  /* One labelled range input per dimension (created once per dimension count). */
  function buildSliders(dims) {
    if (dimensionSliders().length === dims) {
      return;
    }
    var rows = [];
    for (var d = 0; d < dims; d++) {
      var row = document.createElement("div");
      row.className = "rg-ld-dim";
      var id = "rg-ld-dim-" + d;
      var label = document.createElement("label");
      label.setAttribute("for", id);
      label.textContent = "dim " + d;
      var input = document.createElement("input");
      input.type = "range";
      input.id = id;
      input.setAttribute("data-ld-dim", String(d));
      var output = document.createElement("output");
      output.setAttribute("for", id);
      input.addEventListener("input", onDimension);
      row.appendChild(label);
      row.appendChild(input);
      row.appendChild(output);
      rows.push(row);
    }
    ui.sliders.replaceChildren.apply(ui.sliders, rows);
  }

  function stdValues() {
    var std = state.data && state.data.std;
    return std && std.values ? std.values : null;
  }

  /* Each slider spans real ± 0.25, or real ± k σ of its dimension. */
  function setRanges() {
    var std = state.mode === "std" ? stdValues() : null;
    dimensionSliders().forEach(function (input, d) {
      var half = std ? Math.max(state.k * std[d], 1e-3) : FIXED_RANGE;
      var min = state.real[d] - half;
      input.min = String(min);
      input.max = String(state.real[d] + half);
      input.step = String(2 * half / TICKS);
      input.title = "dim " + d + ": " + signed(state.real[d] - half) + " \u2026 " +
        signed(state.real[d] + half) + " (real " + signed(state.real[d]) + ")";
    });
    showValues();
  }

  function showValues() {
    dimensionSliders().forEach(function (input, d) {
      input.value = String(state.vector[d]);
      input.setAttribute("aria-valuetext", signed(state.vector[d]));
      var output = input.parentNode.querySelector("output");
      output.textContent = signed(state.vector[d]);
      output.classList.toggle("rg-ld-moved", state.vector[d] !== state.real[d]);
    });
  }

  function onDimension(event) {
    var input = event.target;
    var d = Number(input.getAttribute("data-ld-dim"));
    state.vector[d] = Number(input.value);
    state.dirty = true;
    input.setAttribute("aria-valuetext", signed(state.vector[d]));
    var output = input.parentNode.querySelector("output");
    output.textContent = signed(state.vector[d]);
    output.classList.toggle("rg-ld-moved", state.vector[d] !== state.real[d]);
    redrawSoon();
  }

  /* The length slider rescales the vector, keeping its direction (the decoder_length technique). */
  function onLength() {
    var wanted = Number(ui.length.value);
    var current = norm(state.vector);
    var direction = current > 0 ? state.vector : state.real;
    var scale = norm(direction);
    if (scale === 0) {
      return; /* a zero capsule has no direction */
    }
    state.vector = direction.map(function (v) { return v * wanted / scale; });
    state.dirty = true;
    showValues();
    redrawSoon();
  }

  function resetVector() {
    state.vector = state.real.slice();
    state.dirty = false;
    setRanges();
    redraw();
  }

  /* ---------------------------------------------------------------- choices */

  function setStatus(text) {
    ui.status.textContent = text;
    ui.status.hidden = !text;
  }

  function fillClasses() {
    var names = state.model.class_names;
    var options = names.map(function (name, k) {
      var option = document.createElement("option");
      option.value = String(k);
      option.textContent = name + (k === state.record.predicted ? " (predicted)" : "") +
        ": |v| = " + norm(state.record.capsules[k]).toFixed(3);   /* the vector's own length:
           the record's scores are what the model reads out, a length or not */
      return option;
    });
    ui.classPicker.replaceChildren.apply(ui.classPicker, options);
    ui.classPicker.value = String(state.cls);
  }

  function chooseClass(cls) {
    state.cls = cls;
    state.real = state.record.capsules[cls].slice();
    resetVector();
    paint(ui.python, state.net.shape, (function (bytes) {
      return function (i) { return bytes[i]; };
    })(pythonBytes()));
  }

  function describeStd() {
    var std = state.data.std || {};
    var stdRadio = card.querySelector('[data-ld-range][value="std"]');
    stdRadio.disabled = !std.values;
    ui.k.disabled = !std.values;
    if (!std.values && state.mode === "std") {
      state.mode = "fixed";
      card.querySelector('[data-ld-range][value="fixed"]').checked = true;
    }
    ui.stdNote.textContent = std.note || "";
    ui.stdNote.classList.toggle("rg-ld-warning", std.source !== "evaluation");
  }

  /* Everything for (step, input) is loaded: show the predicted class's capsule. */
  function ready(request) {
    if (request !== state.request) {
      return;
    }
    var name = state.model.name;
    var weights = registry("weights", name, state.step);
    var data = registry("inputs", name, state.step);
    if (!weights || !data) {
      fail("The live decoder's files for step " + state.step + " did not load.");
      return;
    }
    if (!state.net || state.net.manifest.step !== state.step ||
        state.net.manifest.model !== name) {
      try {
        state.net = decodeWeights(weights);
      } catch (error) {
        fail(String(error.message || error));
        return;
      }
    }
    state.data = data;
    state.record = data.inputs[state.input] || null;
    if (!state.record) {
      fail("The class capsules of this input are not in the site at step " + state.step +
        " (the class capsules panel's JSON is missing: rebuild with a fresh cache).");
      return;
    }
    buildSliders(state.net.dims);
    describeStd();
    state.cls = state.record.predicted;
    fillClasses();
    chooseClass(state.cls);
    ui.app.hidden = false;
    setStatus("");
  }

  function fail(text) {
    ui.app.hidden = true;
    ui.start.hidden = true;
    setStatus(text);
  }

  function figureOf(record, kind) {
    var figures = record ? record.figures : [];
    for (var i = 0; i < figures.length; i++) {
      if (figures[i].kind === kind) {
        return figures[i];
      }
    }
    return null;
  }

  /* The page's choice changed (or is first known): load that step's scripts, then show. */
  function select(detail) {
    var model = (window.reportgenData || {})[slug];
    if (!model || !detail || detail.model !== slug) {
      return;
    }
    state.request += 1;
    var request = state.request;
    state.model = model;
    state.step = detail.step;
    state.input = detail.input;
    var step = model.steps[detail.step];
    var weights = figureOf(step && step.checkpoint.live_decoder, "js");
    if (!weights || !step.live) {
      // the weights ship only at the steps with dataset analyses: say which they are
      var shipped = Object.keys(model.steps).filter(function (name) {
        var record = model.steps[name];
        return record && record.live && figureOf(record.checkpoint.live_decoder, "js");
      });
      fail(shipped.length ? "The live decoder runs at the steps with dataset analyses (" +
        shipped.join(", ") + "), which keeps the site light; move the step slider to one of " +
        "them." : "");
      return;
    }
    if (!state.started && !registry("weights", model.name, detail.step)) {
      state.waiting = detail;
      ui.app.hidden = true;
      var size = weights.bytes ? " (" + (weights.bytes / 1e6).toFixed(1) + " MB)" : "";
      ui.start.textContent = "Start the live decoder: load step " + detail.step +
        "'s weights" + size;
      ui.start.hidden = false;
      setStatus("");
      return;
    }
    ui.start.hidden = true;
    if (!registry("weights", model.name, detail.step)) {
      setStatus("Loading the decoder's weights for step " + detail.step + "\u2026");
      ui.app.setAttribute("aria-busy", "true");
    }
    var pending = 2;
    var failed = false;
    function done(ok) {
      failed = failed || !ok;
      pending -= 1;
      if (pending === 0) {
        ui.app.removeAttribute("aria-busy");
        if (failed) {
          if (request === state.request) {
            fail("The live decoder's files for step " + detail.step + " could not be loaded.");
          }
        } else {
          ready(request);
        }
      }
    }
    loadScript(root + weights.src, done);
    loadScript(root + step.live, done);
  }

  /* ---------------------------------------------------------------- wiring */

  ui.classPicker.addEventListener("change", function () {
    chooseClass(Number(ui.classPicker.value));
  });
  ui.ranges.forEach(function (radio) {
    radio.addEventListener("change", function () {
      if (radio.checked) {
        state.mode = radio.value;
        setRanges();
      }
    });
  });
  ui.k.addEventListener("change", function () {
    state.k = Number(ui.k.value);
    if (state.mode === "std") {
      setRanges();
    }
  });
  ui.start.addEventListener("click", function () {
    state.started = true;
    select(state.waiting);
  });
  ui.length.addEventListener("input", onLength);
  ui.reset.addEventListener("click", resetVector);
  page.addEventListener("reportgen:selection", function (event) {
    select(event.detail);
  });
  setStatus(window.reportgenData && window.reportgenData[slug] ?
    "Loading the live decoder\u2026" : "The live decoder could not start (no model index).");
  if (window.reportgenSelection) {
    select(window.reportgenSelection); /* reportgen.js ran first */
  }
})();
