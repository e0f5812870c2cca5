/*
 * draw-panel.js: the model page's draw panel. Readable on purpose; onnxruntime-web is the one
 * library, and it is loaded only when the reader presses Start.
 *
 * The reader draws a digit (pointer: mouse, pen or finger; keyboard: arrow keys move the pen,
 * Space lifts or lowers it) or drops / chooses an image file. The drawing is centred as MNIST's
 * digits were (LeCun et al. 1998: bounding box scaled to a 20x20 field by area averaging,
 * centre of mass at the centre of 28x28; `centreInk` below mirrors reportgen/techniques/
 * draw_panel/centring.py step for step), and the network runs on it in the page:
 * class scores with the prediction beside chance, the routing weights into the predicted class
 * per primary capsule type, and the reconstruction where there is a decoder.
 *
 * What it loads, with plain <script src> elements (browsers block fetch() of local files
 * when the site is opened from file://):
 * - the runtime, assets/vendor/onnxruntime-web.js (reportgen/techniques/draw_panel/runtime.py):
 *   window.reportgenOrt = {version, module: the ES-module bundle's text, wasm: gzip + base64};
 *   the module is imported from a blob: URL and the WebAssembly binary handed over directly,
 *   so the runtime fetches nothing;
 * - the step's network, the draw_panel panel's "js" figure (from the model index,
 *   window.reportgenData[slug].steps[step].checkpoint.draw_panel), which registers
 *   window.reportgenDraw[model][step] = {manifest, onnx: base64}.
 * On load, the manifest's check images are run and the page shows its largest difference
 * from Keras's outputs on them.
 *
 * The reader's digit in the pose-space chart: where the manifest names the output that is an
 * image's point in that chart (`pose_point`: the class poses, or the scores of class capsules
 * without a pose), each run stores it in localStorage under the site, model and step
 * (`drawnKey`; removed for a blank pad), and assets/pose-space.js, on the model's analyses
 * page, projects it on that step's axes when it loads and, through the "storage" event,
 * whenever the reader draws on a page open beside it. Chosen over a second draw panel on the
 * analyses page: one copy of the panel and its runtime, nothing added to the site, and it
 * works from file:// without a request. A page holding both also gets the
 * "reportgen:drawn" event (the storage event reaches only other pages).
 *
 * window.reportgenDrawPanel exposes `centreInk` and the last result, for the browser tests.
 */
(function () {
  "use strict";

  var PAD = 280; /* drawing canvas, in canvas pixels (10 per input pixel for 28x28) */
  var PEN = 22; /* stroke width on the pad: a 2.2-pixel stroke at 28x28, as MNIST's pens */
  var KEY_STEP = 14; /* pad pixels per arrow key press */

  var card = document.querySelector("[data-rg-draw-panel]");
  var page = card ? card.closest("[data-rg-page]") : null;
  if (!card || !page) {
    return;
  }
  var root = page.getAttribute("data-rg-root") || "";
  var slug = page.getAttribute("data-rg-model") || "";
  var runtimeUrl = card.getAttribute("data-dp-runtime") || "";

  function el(name) {
    return card.querySelector("[data-dp-" + name + "]");
  }

  var ui = {
    app: el("app"), start: el("start"), status: el("status"), pad: el("pad"),
    input: el("input"), clear: el("clear"), file: el("file"), scores: el("scores"),
    prediction: el("prediction"), routing: el("routing"), routingNote: el("routing-note"),
    reconstruction: el("reconstruction"), reconstructionBox: el("reconstruction-box"),
    timing: el("timing"), agreement: el("agreement")
  };

  var state = {
    started: false, waiting: null, request: 0,
    step: null, net: null, manifest: null, session: null,
    running: false, again: false, drawing: false,
    pen: {x: PAD / 2, y: PAD / 2, down: false}, strokeEnd: 0
  };
  var api = window.reportgenDrawPanel = {centreInk: centreInk, last: null, ready: false};

  /* localStorage key of the latest drawn digit of a model and step of this site (the site's
   * root as an absolute URL: two sites opened from file:// share one storage); the same in
   * assets/pose-space.js */
  function drawnKey(model, step) {
    return "reportgen-drawn|" + new URL(root || "./", window.location.href).href + "|" +
      model + "|" + step;
  }

  /* the drawn digit's point in the pose-space chart, for the analyses page (see the top) */
  function publishPoint(out, input, best) {
    var manifest = state.manifest;
    var name = manifest.pose_point;
    if (!name || !out[name]) {
      return;
    }
    var key = drawnKey(manifest.model, manifest.step);
    var blank = !input.some(function (v) { return v > 0; });
    var record = blank ? null : {
      model: manifest.model, step: manifest.step, of: name,
      point: Array.prototype.slice.call(out[name].data),
      predicted: String(manifest.classes[best]),
      strokeAt: Date.now() - (performance.now() - (state.strokeEnd || performance.now()))
    };
    try {
      if (record) {
        window.localStorage.setItem(key, JSON.stringify(record));
      } else {
        window.localStorage.removeItem(key);
      }
    } catch (error) {
      /* storage refused (a private window): the chart simply shows no drawn point */
    }
    window.dispatchEvent(new CustomEvent("reportgen:drawn", {detail: {key: key, record: record}}));
  }

  /* ---------------------------------------------------------------- loading */

  var scripts = {};

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
      entry.waiting.splice(0).forEach(function (waiting) { waiting(ok); });
    }
    script.onload = function () { finish(true); };
    script.onerror = function () { finish(false); };
    document.head.appendChild(script);
  }

  function loaded(src) {
    return new Promise(function (resolve, reject) {
      loadScript(src, function (ok) {
        if (ok) { resolve(); } else { reject(new Error("could not load " + src)); }
      });
    });
  }

  function bytesOf(base64) {
    var binary = window.atob(base64);
    var bytes = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i++) {
      bytes[i] = binary.charCodeAt(i);
    }
    return bytes;
  }

  function floatsOf(base64) {
    var bytes = bytesOf(base64);
    return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  }

  var ortPromise = null;
  var ortVersion = "";

  /* onnxruntime-web from window.reportgenOrt: nothing is fetched */
  function runtime() {
    if (!ortPromise) {
      ortPromise = loaded(runtimeUrl).then(function () {
        var bundle = window.reportgenOrt;
        if (!bundle) {
          throw new Error("the runtime script did not define window.reportgenOrt");
        }
        var url = URL.createObjectURL(new Blob([bundle.module], {type: "text/javascript"}));
        var inflated = new Response(new Blob([bytesOf(bundle.wasm)]).stream()
          .pipeThrough(new DecompressionStream("gzip"))).arrayBuffer();
        return Promise.all([import(url), inflated]).then(function (parts) {
          var ort = parts[0];
          ort.env.wasm.wasmBinary = parts[1];
          ort.env.wasm.numThreads = 1; /* no worker: a file:// page is not cross-origin isolated */
          ort.env.wasm.proxy = false;
          ortVersion = bundle.version;
          return ort;
        });
      });
    }
    return ortPromise;
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

  function setStatus(text) {
    ui.status.textContent = text;
    ui.status.hidden = !text;
  }

  function fail(text) {
    ui.app.hidden = true;
    ui.start.hidden = true;
    setStatus(text);
  }

  /* ---------------------------------------------------------------- the drawing */

  var pad = ui.pad.getContext("2d", {willReadFrequently: true});

  function clearPad() {
    pad.fillStyle = "#000";
    pad.fillRect(0, 0, PAD, PAD);
  }

  function stroke(x0, y0, x1, y1) {
    pad.strokeStyle = "#fff";
    pad.lineWidth = PEN;
    pad.lineCap = "round";
    pad.lineJoin = "round";
    pad.beginPath();
    pad.moveTo(x0, y0);
    pad.lineTo(x1, y1);
    pad.stroke();
  }

  /* the pad's ink: (PAD*PAD) values in [0, 1], the red channel (the pad is grey) */
  function ink() {
    var data = pad.getImageData(0, 0, PAD, PAD).data;
    var out = new Float64Array(PAD * PAD);
    for (var i = 0; i < out.length; i++) {
      out[i] = data[4 * i] / 255;
    }
    return out;
  }

  /* how much of source pixel p (covering [p, p+1)) falls in each of `cells` cells dividing
   * [start, start + length): (cells x pixels), as a fraction of a cell (centring.area_weights) */
  function areaWeights(start, length, cells, pixels) {
    var w = new Float64Array(cells * pixels);
    for (var i = 0; i < cells; i++) {
      var lo = start + length * i / cells;
      var hi = start + length * (i + 1) / cells;
      var first = Math.max(0, Math.floor(lo));
      var last = Math.min(pixels - 1, Math.ceil(hi) - 1);
      for (var p = first; p <= last; p++) {
        var overlap = Math.min(hi, p + 1) - Math.max(lo, p);
        if (overlap > 0) {
          w[i * pixels + p] = overlap * (cells / length);
        }
      }
    }
    return w;
  }

  function boxSize(size) {
    return Math.max(1, Math.floor(size * 20 / 28 + 0.5));
  }

  /* MNIST's centring of (h x w) ink into (size x size) (centring.centre_drawing) */
  function centreInk(values, h, w, size) {
    var out = new Float64Array(size * size);
    var top = h, bottom = -1, left = w, right = -1;
    for (var y = 0; y < h; y++) {
      for (var x = 0; x < w; x++) {
        if (values[y * w + x] > 0) {
          if (y < top) { top = y; }
          if (y > bottom) { bottom = y; }
          if (x < left) { left = x; }
          if (x > right) { right = x; }
        }
      }
    }
    if (bottom < 0) {
      return out;
    }
    bottom += 1;
    right += 1;
    var side = Math.max(bottom - top, right - left);
    var box = boxSize(size);
    var wy = areaWeights((top + bottom) / 2 - side / 2, side, box, h);
    var wx = areaWeights((left + right) / 2 - side / 2, side, box, w);
    /* field = wy @ ink @ wx^T, over the rows and columns a cell touches */
    var rowsDone = new Float64Array(box * w);
    for (var i = 0; i < box; i++) {
      for (var p = 0; p < h; p++) {
        var a = wy[i * h + p];
        if (a !== 0) {
          for (var q = 0; q < w; q++) {
            rowsDone[i * w + q] += a * values[p * w + q];
          }
        }
      }
    }
    var field = new Float64Array(box * box);
    var mass = 0, my = 0, mx = 0;
    for (var r = 0; r < box; r++) {
      for (var c = 0; c < box; c++) {
        var sum = 0;
        for (var k = 0; k < w; k++) {
          var b = wx[c * w + k];
          if (b !== 0) {
            sum += rowsDone[r * w + k] * b;
          }
        }
        field[r * box + c] = sum;
        mass += sum;
        my += sum * r;
        mx += sum * c;
      }
    }
    var oy = Math.min(Math.max(Math.floor((size - 1) / 2 - my / mass + 0.5), 0), size - box);
    var ox = Math.min(Math.max(Math.floor((size - 1) / 2 - mx / mass + 0.5), 0), size - box);
    for (var rr = 0; rr < box; rr++) {
      for (var cc = 0; cc < box; cc++) {
        out[(oy + rr) * size + ox + cc] = Math.min(1, Math.max(0, field[rr * box + cc]));
      }
    }
    return out;
  }

  /* ---------------------------------------------------------------- drawing helpers */

  function drawGrey(canvas, values, h, w, scale) {
    canvas.width = w;
    canvas.height = h;
    canvas.style.width = (w * scale) + "px";
    canvas.style.height = (h * scale) + "px";
    var ctx = canvas.getContext("2d");
    var image = ctx.createImageData(w, h);
    for (var i = 0; i < h * w; i++) {
      var v = Math.round(255 * Math.min(1, Math.max(0, values[i])));
      image.data[4 * i] = image.data[4 * i + 1] = image.data[4 * i + 2] = v;
      image.data[4 * i + 3] = 255;
    }
    ctx.putImageData(image, 0, 0);
  }

  function argmax(values) {
    var best = 0;
    for (var i = 1; i < values.length; i++) {
      if (values[i] > values[best]) {
        best = i;
      }
    }
    return best;
  }

  function showScores(scores, manifest) {
    var best = argmax(scores);
    var top = Math.max.apply(null, Array.prototype.slice.call(scores).concat([1e-12]));
    var rows = [];
    for (var i = 0; i < scores.length; i++) {
      rows.push("<li" + (i === best ? " class=\"rg-dp-best\"" : "") + "><span>" +
        escapeText(manifest.classes[i]) + "</span><span class=\"rg-dp-bar\" style=\"width:" +
        (100 * Math.max(0, scores[i]) / top).toFixed(1) + "%\"></span><span>" +
        scores[i].toFixed(3) + "</span></li>");
    }
    ui.scores.innerHTML = rows.join("");
    ui.prediction.textContent = "Prediction: " + manifest.classes[best] + " (" +
      manifest.outputs.scores.kind + " " + scores[best].toFixed(3) + "). A uniform guess is " +
      "right " + (100 * manifest.chance).toFixed(0) + "% of the time (chance: 1 in " +
      manifest.classes.length + ").";
    return best;
  }

  function escapeText(text) {
    var span = document.createElement("span");
    span.textContent = String(text);
    return span.innerHTML;
  }

  function showRouting(routing, manifest, best) {
    var info = manifest.outputs.routing;
    if (!info || !routing) {
      ui.routing.innerHTML = "";
      ui.routingNote.textContent = "This model has no routing weights into its class " +
        "capsules (a CNN, or class capsules reached without routing).";
      return;
    }
    var classes = manifest.classes.length;
    var types = info.types, gh = info.grid[0], gw = info.grid[1];
    var top = 0;
    var maps = [];
    for (var t = 0; t < types; t++) {
      var map = new Float64Array(gh * gw);
      for (var cell = 0; cell < gh * gw; cell++) {
        var v = routing[(cell * types + t) * classes + best];
        map[cell] = v;
        top = Math.max(top, v);
      }
      maps.push(map);
    }
    ui.routing.innerHTML = "";
    maps.forEach(function (map, t) {
      var scaled = map.map(function (v) { return top > 0 ? v / top : 0; });
      var figure = document.createElement("figure");
      var canvas = document.createElement("canvas");
      canvas.className = "rg-dp-map";
      drawGrey(canvas, scaled, gh, gw, Math.max(2, Math.floor(48 / Math.max(gh, gw))));
      var caption = document.createElement("figcaption");
      caption.textContent = "type " + t;
      figure.appendChild(canvas);
      figure.appendChild(caption);
      ui.routing.appendChild(figure);
    });
    ui.routingNote.textContent = "Routing weights into the capsule of class " +
      manifest.classes[best] + " from each primary capsule of layer " + info.layer +
      " (one map per type, " + gh + "x" + gw + " grid; white = " + top.toFixed(3) +
      ", the largest).";
  }

  /* ---------------------------------------------------------------- running */

  function tensorOf(ort, values, shape) {
    var h = shape[0], w = shape[1], c = shape[2];
    var data = new Float32Array(h * w * c);
    for (var i = 0; i < h * w; i++) {
      for (var k = 0; k < c; k++) {
        data[i * c + k] = values[i];
      }
    }
    return new ort.Tensor("float32", data, [1, h, w, c]);
  }

  function run() {
    if (!state.session) {
      return;
    }
    if (state.running) {
      state.again = true;
      return;
    }
    state.running = true;
    var manifest = state.manifest;
    var shape = manifest.input;
    var started = state.strokeEnd || performance.now();
    var input = centreInk(ink(), PAD, PAD, shape[0]);
    drawGrey(ui.input, input, shape[0], shape[1], 4);
    runtime().then(function (ort) {
      return state.session.run({image: tensorOf(ort, input, shape)});
    }).then(function (out) {
      var scores = out.scores.data;
      var best = showScores(scores, manifest);
      showRouting(out.routing ? out.routing.data : null, manifest, best);
      if (out.reconstruction) {
        var r = manifest.outputs.reconstruction.shape;
        var grey = new Float64Array(r[0] * r[1]);
        for (var i = 0; i < grey.length; i++) {
          grey[i] = out.reconstruction.data[i * r[2]];
        }
        drawGrey(ui.reconstruction, grey, r[0], r[1], 4);
      }
      publishPoint(out, input, best);
      var ms = performance.now() - started;
      ui.timing.textContent = "Updated " + ms.toFixed(0) + " ms after the last stroke.";
      api.last = {input: Array.prototype.slice.call(input),
                  scores: Array.prototype.slice.call(scores),
                  routing: out.routing ? Array.prototype.slice.call(out.routing.data) : null,
                  reconstruction: out.reconstruction ?
                    Array.prototype.slice.call(out.reconstruction.data) : null,
                  poses: out.poses ? Array.prototype.slice.call(out.poses.data) : null,
                  ms: ms, runs: (api.last ? api.last.runs : 0) + 1};
      card.setAttribute("data-dp-runs", String(api.last.runs));
    }).catch(function (error) {
      setStatus("The network could not run in this browser: " + error.message);
    }).then(function () {
      state.running = false;
      if (state.again) {
        state.again = false;
        run();
      }
    });
  }

  /* the manifest's check images through the page's network, against Keras's outputs */
  function check(ort, session, manifest) {
    var shape = manifest.input;
    var size = shape[0] * shape[1] * shape[2];
    var inputs = floatsOf(manifest.check.inputs);
    var worst = 0;
    var chain = Promise.resolve();
    for (var n = 0; n < manifest.check.count; n++) {
      (function (n) {
        chain = chain.then(function () {
          var image = new ort.Tensor("float32", inputs.slice(n * size, (n + 1) * size),
            [1, shape[0], shape[1], shape[2]]);
          return session.run({image: image}).then(function (out) {
            Object.keys(manifest.check.outputs).forEach(function (name) {
              var want = floatsOf(manifest.check.outputs[name]);
              var got = out[name].data;
              var per = got.length;
              for (var i = 0; i < per; i++) {
                worst = Math.max(worst, Math.abs(got[i] - want[n * per + i]));
              }
            });
          });
        });
      })(n);
    }
    return chain.then(function () { return worst; });
  }

  function ready(request, record, step) {
    var manifest = record.manifest;
    setStatus("Starting the network of step " + step + "\u2026");
    runtime().then(function (ort) {
      return ort.InferenceSession.create(bytesOf(record.onnx), {executionProviders: ["wasm"]})
        .then(function (session) {
          return check(ort, session, manifest).then(function (worst) {
            if (request !== state.request) {
              return;
            }
            state.session = session;
            state.manifest = manifest;
            ui.agreement.textContent = "onnxruntime-web " + ortVersion + " in this " +
              "page against Keras on " + manifest.check.count + " check images: largest " +
              "difference " + worst.toExponential(1) + " (float32).";
            card.setAttribute("data-dp-check", String(worst));
            ui.reconstructionBox.hidden = !manifest.outputs.reconstruction;
            ui.app.hidden = false;
            setStatus("");
            api.ready = true;
            run();
          });
        });
    }).catch(function (error) {
      if (request === state.request) {
        fail("The draw panel could not start: " + error.message);
      }
    });
  }

  function select(detail) {
    var model = (window.reportgenData || {})[slug];
    if (!model || !detail || detail.model !== slug) {
      return;
    }
    state.request += 1;
    var request = state.request;
    var step = model.steps[detail.step];
    var figure = figureOf(step && step.checkpoint.draw_panel, "js");
    if (!figure) {
      var shipped = Object.keys(model.steps).filter(function (name) {
        var record = model.steps[name];
        return record && figureOf(record.checkpoint.draw_panel, "js");
      });
      fail(shipped.length ? "The network travels with the steps with dataset analyses (" +
        shipped.join(", ") + "); move the step slider to one of them." : "");
      return;
    }
    if (!runtimeUrl) {
      fail(card.getAttribute("data-dp-missing") || "The in-browser runtime is missing.");
      return;
    }
    if (state.step === detail.step && state.session) {
      return;
    }
    if (!state.started) {
      state.waiting = detail;
      ui.app.hidden = true;
      ui.start.textContent = "Start: load the network of step " + detail.step + " (" +
        ((figure.bytes || 0) / 1e6).toFixed(1) + " MB) and the runtime";
      ui.start.hidden = false;
      setStatus("");
      return;
    }
    ui.start.hidden = true;
    state.step = detail.step;
    state.session = null;
    setStatus("Loading the network of step " + detail.step + "\u2026");
    var loadedRecord = function () {
      var registry = (window.reportgenDraw || {})[model.name] || {};
      return registry[detail.step];
    };
    loaded(root + figure.src).then(function () {
      var record = loadedRecord();
      if (!record) {
        throw new Error("the network's script did not register step " + detail.step);
      }
      ready(request, record, detail.step);
    }).catch(function (error) {
      if (request === state.request) {
        fail("The draw panel could not start: " + error.message);
      }
    });
  }

  /* ---------------------------------------------------------------- input events */

  function padPoint(event) {
    var box = ui.pad.getBoundingClientRect();
    return {x: (event.clientX - box.left) * PAD / box.width,
            y: (event.clientY - box.top) * PAD / box.height};
  }

  var last = null;
  var frame = 0;

  function soon() {
    if (!frame) {
      frame = window.requestAnimationFrame(function () {
        frame = 0;
        run();
      });
    }
  }

  ui.pad.addEventListener("pointerdown", function (event) {
    event.preventDefault();
    ui.pad.setPointerCapture(event.pointerId);
    last = padPoint(event);
    stroke(last.x, last.y, last.x, last.y);
    state.strokeEnd = performance.now();
    soon();
  });
  ui.pad.addEventListener("pointermove", function (event) {
    if (!last) {
      return;
    }
    var point = padPoint(event);
    stroke(last.x, last.y, point.x, point.y);
    last = point;
    state.strokeEnd = performance.now();
    soon();
  });
  function endStroke() {
    if (last) {
      last = null;
      state.strokeEnd = performance.now();
      soon();
    }
  }
  ui.pad.addEventListener("pointerup", endStroke);
  ui.pad.addEventListener("pointercancel", endStroke);

  /* keyboard: arrows move the pen (drawing while it is down), Space lowers or lifts it */
  ui.pad.addEventListener("keydown", function (event) {
    var pen = state.pen;
    var moves = {ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1]};
    if (event.key === " ") {
      pen.down = !pen.down;
      if (pen.down) {
        stroke(pen.x, pen.y, pen.x, pen.y);
      }
    } else if (moves[event.key]) {
      var x = Math.min(PAD, Math.max(0, pen.x + moves[event.key][0] * KEY_STEP));
      var y = Math.min(PAD, Math.max(0, pen.y + moves[event.key][1] * KEY_STEP));
      if (pen.down) {
        stroke(pen.x, pen.y, x, y);
      }
      pen.x = x;
      pen.y = y;
    } else {
      return;
    }
    event.preventDefault();
    ui.pad.setAttribute("aria-label", "Drawing pad: pen at " + Math.round(pen.x / 10) + ", " +
      Math.round(pen.y / 10) + (pen.down ? ", drawing" : ", lifted") +
      ". Arrow keys move it, Space lowers or lifts it.");
    state.strokeEnd = performance.now();
    soon();
  });

  ui.clear.addEventListener("click", function () {
    clearPad();
    state.strokeEnd = performance.now();
    run();
  });

  /* an image file: drawn to fit the pad; dark-on-light images are inverted (the border's mean) */
  function useFile(file) {
    if (!file) {
      return;
    }
    var url = URL.createObjectURL(file);
    var image = new Image();
    image.onload = function () {
      clearPad();
      var scale = Math.min(PAD / image.width, PAD / image.height);
      var w = image.width * scale, h = image.height * scale;
      pad.drawImage(image, (PAD - w) / 2, (PAD - h) / 2, w, h);
      var data = pad.getImageData(0, 0, PAD, PAD);
      var border = 0, count = 0;
      for (var i = 0; i < PAD; i++) {
        [[i, 0], [i, PAD - 1], [0, i], [PAD - 1, i]].forEach(function (p) {
          var k = 4 * (p[1] * PAD + p[0]);
          border += (data.data[k] + data.data[k + 1] + data.data[k + 2]) / 3;
          count += 1;
        });
      }
      var invert = border / count > 127;
      for (var j = 0; j < PAD * PAD; j++) {
        var g = (data.data[4 * j] + data.data[4 * j + 1] + data.data[4 * j + 2]) / 3;
        g = invert ? 255 - g : g;
        /* the darkest tenth of the range is background: a photo's paper is never black */
        g = g < 26 ? 0 : g;
        data.data[4 * j] = data.data[4 * j + 1] = data.data[4 * j + 2] = g;
        data.data[4 * j + 3] = 255;
      }
      pad.putImageData(data, 0, 0);
      URL.revokeObjectURL(url);
      state.strokeEnd = performance.now();
      run();
    };
    image.onerror = function () {
      setStatus("That file is not an image this browser can read.");
    };
    image.src = url;
  }

  ui.file.addEventListener("change", function () { useFile(ui.file.files[0]); });
  ui.pad.addEventListener("dragover", function (event) { event.preventDefault(); });
  ui.pad.addEventListener("drop", function (event) {
    event.preventDefault();
    useFile(event.dataTransfer.files[0]);
  });

  ui.start.addEventListener("click", function () {
    state.started = true;
    select(state.waiting);
  });
  page.addEventListener("reportgen:selection", function (event) {
    select(event.detail);
  });

  ui.pad.width = PAD;
  ui.pad.height = PAD;
  clearPad();
  setStatus(window.reportgenData && window.reportgenData[slug] ? "" :
    "The draw panel could not start (no model index).");
  if (window.reportgenSelection) {
    select(window.reportgenSelection);
  }
})();
