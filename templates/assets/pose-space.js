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
 * "reportgen:selection" event. Plain DOM; text set with textContent only.
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
  var shown = null; /* {step, view} */
  var request = 0;

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

  function draw(step, spec, mine) {
    window.vegaEmbed(target, spec, {actions: false, renderer: "svg"})
      .then(function (result) {
        if (mine !== request) {
          result.view.finalize();
          return;
        }
        if (shown && shown.view) {
          shown.view.finalize();
        }
        shown = {step: step, view: result.view};
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
        draw(detail.step, registry.spec, mine);
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
