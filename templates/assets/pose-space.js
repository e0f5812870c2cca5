/*
 * pose-space.js: the pose-space chart (reportgen/techniques/pose_space) drawn live.
 *
 * For the chosen step, the panel's "js" figure (window.reportgenData[slug].steps[step]
 * .dataset[panel id]) registers window.reportgenPoseSpace[model][step] = {spec}: a
 * Vega-Lite spec whose rows hold each evaluation image's coordinates, classes and thumbnail.
 * It is drawn with the site's vega-embed bundle (assets/vendor/vega-embed.js, loaded here when
 * the page has no other chart) in place of the card's PNG, the paper drawing of the same
 * spec; vega-tooltip shows the tooltip entry named "image" as the picture. Both scripts are
 * inserted with plain <script src> elements, which work from file:// where fetch() does not,
 * and stay in the page once loaded. A point whose image is one of the model's inputs (the
 * same `digest` as the input in the model index) opens that input's page when clicked. It follows the step slider through reportgen.js's
 * "reportgen:selection" event.
 *
 * The reader's own digit: the draw panel (assets/draw-panel.js, on the model's layer pages,
 * built at the last step only) stores the latest drawn digit's point (its class poses laid end
 * to end, as the chart's points are) in localStorage under site, model and step. At that step
 * this script projects it with the step's stored mean and axes (`projection` of the step's
 * script: float32, (point - mean) . components^T, reportgen/techniques/pose_space/numbers.py
 * `project`) and draws it as a black diamond labelled "your digit" with its predicted class, a
 * layer over the evaluation images fed through a named Vega dataset ("drawn"), so a new drawing
 * changes one row instead of drawing the chart again: on load, and on the "storage" event when
 * the reader draws on a page open beside this one. At other steps the note says where to draw.
 * Plain DOM; text set with textContent only.
 */
(function () {
  "use strict";

  var box = document.querySelector("[data-rg-pose-space]");
  var card = box ? box.closest("[data-rg-panel]") : null;
  var page = card ? card.closest("[data-rg-page]") : null;
  if (!box || !card || !page) {
    return;
  }
  var root = page.getAttribute("data-rg-root") || "";
  var slug = page.getAttribute("data-rg-model") || "";
  var target = box.querySelector("[data-ps-chart]");
  var status = card.querySelector("[data-ps-status]");
  var picture = card.querySelector('[data-rg="link"]');
  if (picture && picture.parentNode === card) {
    card.insertBefore(box, picture.nextSibling); /* the live chart where the picture was */
  }
  var shown = null; /* {step, view, projection} */
  var request = 0;
  var drawnNote = box.querySelector("[data-ps-drawn-note]");
  var api = window.reportgenPoseChart = {view: null, drawn: null, ms: null, fromStroke: null};

  function setStatus(text) {
    status.textContent = text;
    status.hidden = !text;
  }

  var scripts = {}; /* src -> {done, ok, waiting} */
  function loadScript(src, callback) {
    var entry = scripts[src];
    if (entry && entry.done) {
      callback(entry.ok);
      return;
    }
    if (entry) {
      entry.waiting.push(callback);
      return;
    }
    entry = scripts[src] = {done: false, ok: false, waiting: [callback]};
    var script = document.createElement("script");
    script.src = src;
    script.async = true;
    function finish(ok) {
      entry.done = true;
      entry.ok = ok;
      entry.waiting.splice(0).forEach(function (waiting) { waiting(ok); });
    }
    script.onload = function () { finish(true); };
    script.onerror = function () { finish(false); };
    document.head.appendChild(script);
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

  /* Without a live chart the card shows its PNG (reportgen.js keeps it in step). */
  function showPicture(text) {
    box.hidden = true;
    if (picture) {
      picture.style.display = "";
    }
    if (shown && shown.view) {
      shown.view.finalize();
    }
    shown = null;
    api.view = null;
    setDrawnNote([]);
    setStatus(text);
  }

  /* Rows whose image is one of the model's inputs (the same pixel digest, set by the build on
   * both) link to that input on the model's first page. */
  function link(model, spec) {
    var page = box.getAttribute("data-ps-input-page");
    var byDigest = {};
    (model.inputs || []).forEach(function (input) {
      if (input.digest) {
        byDigest[input.digest] = input.key;
      }
    });
    if (!page) {
      return 0;
    }
    var linked = 0;
    spec.data.values.forEach(function (row) {
      var key = byDigest[row.digest];
      if (key !== undefined) {
        row.href = page + "?input=" + encodeURIComponent(key);
        linked += 1;
      }
    });
    return linked;
  }

  /* ---------------------------------------------------------------- the reader's digit */

  function drawnKey(model, step) { /* as assets/draw-panel.js's */
    return "reportgen-drawn|" + new URL(root || "./", window.location.href).href + "|" +
      model + "|" + step;
  }

  function floatsOf(base64) {
    var binary = window.atob(base64);
    var bytes = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i++) {
      bytes[i] = binary.charCodeAt(i);
    }
    return new Float32Array(bytes.buffer);
  }

  /* the step's stored mean (D) and axes (2 x D) */
  function projectionOf(record) {
    if (!record || !record.projection) {
      return null;
    }
    return {dimensions: record.projection.dimensions, mean: floatsOf(record.projection.mean),
            components: floatsOf(record.projection.components)};
  }

  /* (point - mean) . components^T in float64, as numbers.project */
  function project(point, projection) {
    var d = projection.dimensions;
    var out = [0, 0];
    for (var k = 0; k < 2; k++) {
      var sum = 0;
      for (var j = 0; j < d; j++) {
        sum += (point[j] - projection.mean[j]) * projection.components[k * d + j];
      }
      out[k] = sum;
    }
    return out;
  }

  /* the chart: the evaluation images as the paper draws them, and over them the "drawn"
   * dataset (empty until the reader draws) as a diamond and its label */
  function layered(spec) {
    var x = JSON.parse(JSON.stringify(spec.encoding.x));  /* the same axes, scales shared */
    var y = JSON.parse(JSON.stringify(spec.encoding.y));
    var drawnEncoding = {
      x: x, y: y,
      tooltip: [{field: "what", title: "point"}, {field: "predicted", title: "predicted"},
                {field: "pc1", title: "PC1", format: ".4~g"},
                {field: "pc2", title: "PC2", format: ".4~g"}]
    };
    return {
      $schema: spec.$schema, width: spec.width, height: spec.height, config: spec.config,
      layer: [
        {data: spec.data, mark: spec.mark, encoding: spec.encoding, params: spec.params},
        {data: {name: "drawn"},
         mark: {type: "point", shape: "diamond", filled: true, size: 260, color: "#111",
                stroke: "#fff", strokeWidth: 1.5, opacity: 1},
         encoding: drawnEncoding},
        {data: {name: "drawn"},
         mark: {type: "text", align: "left", dx: 11, dy: -9, fontWeight: "bold",
                fontSize: 12, color: "#111"},
         encoding: {x: x, y: y, text: {field: "label"}}}
      ]
    };
  }

  function readDrawn(model, step) {
    try {
      var text = window.localStorage.getItem(drawnKey(model, step));
      return text ? JSON.parse(text) : null;
    } catch (error) {
      return null;
    }
  }

  function drawPageLink() {
    var href = box.getAttribute("data-ps-draw-page");
    if (!href) {
      return document.createTextNode("this model's layer pages");
    }
    var a = document.createElement("a");
    a.href = href;
    a.textContent = "this model's layer pages";
    return a;
  }

  function setDrawnNote(parts) {
    if (!drawnNote) {
      return;
    }
    drawnNote.textContent = "";
    parts.forEach(function (part) {
      drawnNote.appendChild(typeof part === "string" ? document.createTextNode(part) : part);
    });
    drawnNote.hidden = !parts.length;
  }

  /* the step the draw panel is built at (the last built), or null */
  function drawStep(model) {
    var names = Object.keys(model.steps).filter(function (name) {
      var record = model.steps[name];
      return record && figureOf((record.checkpoint || {}).draw_panel, "js");
    });
    return names.length ? names[names.length - 1] : null;
  }

  /* the reader's latest digit of this step on the chart (or the note saying where to draw) */
  function showDrawn(record) {
    var model = (window.reportgenData || {})[slug];
    if (!shown || !shown.view || !model) {
      return;
    }
    var started = performance.now();
    var at = drawStep(model);
    var rows = [];
    if (!at) {
      setDrawnNote([]);
    } else if (at !== shown.step) {
      setDrawnNote(["Your own digit appears here at step " + at + ", the step the draw " +
        "panel is built for: move the step slider there and draw it in the panel on ",
        drawPageLink(), "."]);
    } else if (!shown.projection) {
      setDrawnNote([]);
    } else {
      record = record === undefined ? readDrawn(model.name, shown.step) : record;
      if (record && record.point && record.point.length === shown.projection.dimensions) {
        var xy = project(record.point, shown.projection);
        rows = [{pc1: xy[0], pc2: xy[1], what: "your digit", predicted: record.predicted,
                 label: "your digit (" + record.predicted + ")"}];
        setDrawnNote(["\u25c6 Your digit, drawn in the draw panel on ", drawPageLink(),
          ": predicted " + record.predicted + ", at PC1 " + xy[0].toPrecision(4) +
          ", PC2 " + xy[1].toPrecision(4) + " (projected on this step's axes). It follows " +
          "your drawing while that page is open beside this one."]);
      } else {
        setDrawnNote(["Draw a digit in the draw panel on ", drawPageLink(),
          " (step " + at + "): it appears here as \u25c6 your digit, with its predicted class."]);
      }
    }
    api.drawn = rows[0] || null;
    var view = shown.view;
    view.data("drawn", rows);
    view.runAsync().then(function () {
      api.ms = performance.now() - started;
      api.fromStroke = rows.length && record.strokeAt ? Date.now() - record.strokeAt : null;
      box.setAttribute("data-ps-drawn", rows.length ? "1" : "0");
      box.setAttribute("data-ps-drawn-runs",
        String(Number(box.getAttribute("data-ps-drawn-runs") || 0) + 1));
    });
  }

  window.addEventListener("storage", function (event) {
    var model = (window.reportgenData || {})[slug];
    if (shown && model && event.key === drawnKey(model.name, shown.step)) {
      showDrawn(event.newValue ? JSON.parse(event.newValue) : null);
    }
  });
  window.addEventListener("reportgen:drawn", function (event) {
    var model = (window.reportgenData || {})[slug];
    if (shown && model && event.detail.key === drawnKey(model.name, shown.step)) {
      showDrawn(event.detail.record);
    }
  });

  /* ---------------------------------------------------------------- the chart */

  function draw(step, spec, mine, projection) {
    window.vegaEmbed(target, layered(spec), {actions: false, renderer: "svg"})
      .then(function (result) {
        if (mine !== request) {
          result.view.finalize();
          return;
        }
        if (shown && shown.view) {
          shown.view.finalize();
        }
        shown = {step: step, view: result.view, projection: projection};
        api.view = result.view;
        box.hidden = false;
        box.setAttribute("data-ps-step", step);
        if (picture) {
          picture.style.display = "none"; /* the same chart, live below */
        }
        var linked = Number(box.getAttribute("data-ps-linked") || 0);
        setStatus("Hover a point for its image and values; wheel and drag zoom and pan." +
          (linked === 1 ? " Click the point whose image is one of this model's inputs to " +
            "open it." : linked ? " Click one of the " + linked + " points whose image is one " +
            "of this model's inputs to open it." : ""));
        showDrawn();
      })
      .catch(function (error) {
        showPicture("The live chart could not be drawn: " + error.message);
      });
  }

  function select(detail) {
    var model = (window.reportgenData || {})[slug];
    if (!model || !detail || detail.model !== slug) {
      return;
    }
    request += 1;
    var mine = request;
    var step = model.steps[detail.step];
    var id = card.getAttribute("data-rg-panel");
    var record = step ? (step.dataset || {})[id] || step.checkpoint[id] : null;
    var file = figureOf(record, "js");
    if (!file) {
      showPicture(""); /* the card says why (not computed at this step, not applicable) */
      return;
    }
    if (shown && shown.step === detail.step) {
      return;
    }
    var needed = [root + file.src];
    if (typeof window.vegaEmbed !== "function") {
      if (!box.getAttribute("data-ps-vega")) {
        showPicture("");
        return;
      }
      needed.unshift(box.getAttribute("data-ps-vega"));
    }
    setStatus("Loading the chart of step " + detail.step + "\u2026");
    var pending = needed.length;
    var failed = false;
    needed.forEach(function (src) {
      loadScript(src, function (ok) {
        failed = failed || !ok;
        pending -= 1;
        if (pending || mine !== request) {
          return;
        }
        var registry = ((window.reportgenPoseSpace || {})[model.name] || {})[detail.step];
        if (failed || !registry || typeof window.vegaEmbed !== "function") {
          showPicture("The live chart's files for step " + detail.step +
            " could not be loaded; the picture above is the same chart.");
          return;
        }
        var linked = link(model, registry.spec);
        box.setAttribute("data-ps-linked", String(linked));
        draw(detail.step, registry.spec, mine, projectionOf(registry));
      });
    });
  }

  page.addEventListener("reportgen:selection", function (event) {
    select(event.detail);
  });
  if (window.reportgenSelection) {
    select(window.reportgenSelection); /* reportgen.js ran first */
  }
})();
