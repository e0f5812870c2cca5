/*
 * reportgen.js: the training-step slider and the input / technique pickers.
 *
 * Every model page includes its model's index (models/SLUG/data.js, which sets
 * window.reportgenData[SLUG]) with a plain <script> tag, so this works from file:// as well as
 * over HTTP; the chosen input's panels at every step are added by that input's script
 * (models/SLUG/inputs/KEY.js), inserted the same way when the input is first shown. When the user moves the slider or picks an input, the figures on the page are
 * swapped IN PLACE: img src, size, caption and download links come from the index; only the
 * images of the current choice are ever in the DOM.
 *
 * The choice {step, input, panel} persists across pages and models: it is written to the URL
 * query (?step=3-100&input=test-12, so a link can be shared) and to localStorage (so the next
 * page opens with it). A step a model does not have falls back to its nearest earlier step;
 * an input it does not have falls back to its first input.
 *
 * Without JavaScript the pages show the latest step and the first input (server-rendered).
 * Plain DOM, no framework; text is always set with textContent (never innerHTML).
 *
 * Which pages exist and what they do comes from the site's page table
 * (window.reportgenSite.pages, written by reportgen/pages/page_table.py into site-data.js): a
 * page's kind (its data-rg-page) says whether it reads one model's index and whether it
 * publishes its choice. Only how each kind is drawn lives here (RENDERERS).
 *
 * A page that publishes tells other scripts (the Decoder page's live decoder, live-decoder.js)
 * what it shows after every change: window.reportgenSelection = {model, step, input} and a
 * "reportgen:selection" event (detail: the same object) dispatched on the page element.
 */
(function () {
  "use strict";

  var STORAGE_KEY = "reportgen.selection.v1";
  var QUERY_KEYS = ["step", "input", "panel"];
  var MIN_DISPLAY = 160; /* images narrower than this are upscaled (pixelated) */
  var PICTURES = ["png", "svg", "jpg", "jpeg", "gif", "webp"]; /* what an <img> can show */
  var CARD_WIDTHS = [240, 900]; /* a card's preferred width: its image's, within these */

  var page = document.querySelector("[data-rg-page]");
  if (!page) {
    return;
  }
  var kind = page.getAttribute("data-rg-page");
  var root = page.getAttribute("data-rg-root") || "";
  var allData = window.reportgenData || {};
  var table = (window.reportgenSite || {}).pages || {kinds: {}, labels: {}};
  var spec = table.kinds[kind];
  if (!spec) {
    return; /* the page table did not load: keep the server-rendered default view */
  }

  /* ---------------------------------------------------------------- selection state */

  function readStored() {
    try {
      var value = JSON.parse(window.localStorage.getItem(STORAGE_KEY) || "{}");
      return value && typeof value === "object" ? value : {};
    } catch (error) {
      return {}; /* storage disabled or corrupt: start from the defaults */
    }
  }

  function writeStored(selection) {
    try {
      window.localStorage.setItem(STORAGE_KEY, JSON.stringify(selection));
    } catch (error) {
      /* storage disabled (private mode, file:// policy): the URL query still carries it */
    }
  }

  function readQuery() {
    var result = {};
    var params = new URLSearchParams(window.location.search);
    QUERY_KEYS.forEach(function (key) {
      if (params.has(key)) {
        result[key] = params.get(key);
      }
    });
    return result;
  }

  function writeQuery(selection) {
    try {
      var url = new URL(window.location.href);
      QUERY_KEYS.forEach(function (key) {
        if (selection[key]) {
          url.searchParams.set(key, selection[key]);
        } else {
          url.searchParams.delete(key);
        }
      });
      if (url.href !== window.location.href) {
        window.history.replaceState(window.history.state, "", url.href);
      }
    } catch (error) {
      /* some browsers refuse replaceState on file:// URLs: localStorage still works */
    }
  }

  var defaults = {
    step: page.getAttribute("data-rg-default-step") || "",
    input: page.getAttribute("data-rg-default-input") || "",
    panel: page.getAttribute("data-rg-default-panel") || ""
  };
  var stored = readStored();
  var query = readQuery();
  var selection = {
    step: query.step || stored.step || defaults.step,
    input: query.input || stored.input || defaults.input,
    panel: query.panel || stored.panel || defaults.panel
  };

  /* ---------------------------------------------------------------- index lookups */

  /* "EPOCH-BATCH" -> [epoch, batch] for ordering; other names sort last. */
  function stepKey(name) {
    var match = /^(\d+)-(\d+)$/.exec(name || "");
    return match ? [Number(match[1]), Number(match[2])] : [Infinity, Infinity];
  }

  function compareSteps(a, b) {
    var ka = stepKey(a);
    var kb = stepKey(b);
    return ka[0] - kb[0] || ka[1] - kb[1];
  }

  /* The model's step for a wanted step name: itself, else the nearest earlier one, else the
   * model's first step (the wanted one is earlier than all of them). */
  function resolveStep(model, wanted) {
    var names = model.step_names;
    if (!names.length) {
      return null;
    }
    if (names.indexOf(wanted) >= 0) {
      return wanted;
    }
    if (!wanted) {
      return names[names.length - 1];
    }
    var best = null;
    names.forEach(function (name) {
      if (compareSteps(name, wanted) <= 0) {
        best = name;
      }
    });
    return best || names[0];
  }

  function findInput(model, key) {
    for (var i = 0; i < model.inputs.length; i++) {
      if (model.inputs[i].key === key) {
        return model.inputs[i];
      }
    }
    return null;
  }

  function resolveInput(model, wanted) {
    var input = findInput(model, wanted) || model.inputs[0];
    return input ? input.key : null;
  }

  /* The index record of one panel (by id) at (step, input); checkpoint panels ignore input. */
  function lookup(model, stepName, inputKey, panelId) {
    var step = model.steps[stepName];
    if (!step) {
      return null;
    }
    var forInput = (inputKey && step.inputs[inputKey]) || {};
    return forInput[panelId] || step.checkpoint[panelId] || null;
  }

  function modelHasPanel(model, panelId) {
    return model.panels.some(function (panel) {
      return panel.id === panelId;
    });
  }

  /* ---------------------------------------------------------------- DOM updates */

  function hook(element, name) {
    return element.querySelector('[data-rg="' + name + '"]');
  }

  function setText(element, text) {
    if (element && element.textContent !== text) {
      element.textContent = text;
    }
  }

  /* The rest of a card's caption, behind "more" (hidden when there is none). */
  function setMore(card, more) {
    var details = hook(card, "caption-more");
    if (details) {
      details.hidden = !more;
      setText(hook(card, "caption-more-text"), more || "");
    }
  }

  function setImage(img, src, width, height, alt) {
    if (!img) {
      return;
    }
    if (!src) {
      img.hidden = true;
      img.removeAttribute("src");
      return;
    }
    if (width && height) {
      img.setAttribute("width", String(width));
      img.setAttribute("height", String(height));
    } else {
      img.removeAttribute("width");
      img.removeAttribute("height");
    }
    img.classList.toggle("rg-upscale", Boolean(width) && width < MIN_DISPLAY);
    if (alt !== undefined) {
      img.alt = alt;
    }
    if (img.getAttribute("src") !== src) {
      img.setAttribute("src", src);
    }
    img.hidden = false;
  }

  /* The figure a card shows: the first one an <img> can display (PNG first), if any. */
  function pictureOf(record) {
    var figures = record ? record.figures : [];
    for (var i = 0; i < figures.length; i++) {
      if (PICTURES.indexOf(figures[i].kind) >= 0) {
        return figures[i];
      }
    }
    return null;
  }

  /* A record's files grouped by figure ("label": "" = the panel's own figure or its numbers),
   * groups with a picture first: [{label, figures, picture}]. */
  function figureGroups(record) {
    var order = [];
    var byLabel = {};
    (record ? record.figures : []).forEach(function (figure) {
      var label = figure.label || "";
      if (!byLabel[label]) {
        byLabel[label] = [];
        order.push(label);
      }
      byLabel[label].push(figure);
    });
    var groups = order.map(function (label) {
      var figures = byLabel[label];
      var png = figures.filter(function (f) { return f.kind === "png"; })[0];
      return {label: label, figures: figures, picture: png || pictureOf({figures: figures})};
    });
    return groups.filter(function (g) { return g.picture; })
      .concat(groups.filter(function (g) { return !g.picture; }));
  }

  function humane(label) {
    return label.replace(/[_-]+/g, " ").trim();
  }

  function downloadLink(figure) {
    var anchor = document.createElement("a");
    anchor.href = root + figure.src;
    anchor.setAttribute("download", "");
    anchor.textContent = figure.kind.toUpperCase();
    return anchor;
  }

  /* Downloads: flat (PNG SVG ...) for one figure, grouped by figure when there are several. */
  function fillDownloads(downloads, record, groups) {
    if (!downloads) {
      return;
    }
    var nodes;
    if (groups.length > 1) {
      nodes = groups.map(function (group) {
        var span = document.createElement("span");
        span.className = "rg-download-group";
        var label = document.createElement("span");
        label.className = "rg-download-label";
        label.textContent = group.picture ? humane(group.label) || "figure" : "numbers";
        span.appendChild(label);
        group.figures.forEach(function (figure) {
          span.appendChild(downloadLink(figure));
        });
        return span;
      });
    } else {
      nodes = record.figures.map(downloadLink);
    }
    downloads.replaceChildren.apply(downloads, nodes);
  }

  /* The other figures of a panel of several (dataset analyses), below the first one. */
  function fillExtras(card, groups, shown, title) {
    var more = hook(card, "more");
    if (!more) {
      return;
    }
    var extras = groups.filter(function (g) { return g.picture && g.picture !== shown; });
    more.hidden = extras.length === 0;
    setText(hook(card, "more-summary"), extras.length + " more figure" +
      (extras.length === 1 ? "" : "s"));
    var holder = hook(card, "more-figures");
    if (holder) {
      holder.replaceChildren.apply(holder, extras.map(function (group) {
        var figure = document.createElement("figure");
        figure.className = "rg-more-figure";
        var link = document.createElement("a");
        link.href = root + group.picture.src;
        link.setAttribute("data-rg-enlarge", "");
        link.title = "Enlarge";
        var img = document.createElement("img");
        img.loading = "lazy";
        img.alt = title + ": " + humane(group.label);
        setImage(img, root + group.picture.src, group.picture.width, group.picture.height);
        img.classList.remove("rg-upscale");
        var caption = document.createElement("figcaption");
        caption.textContent = humane(group.label);
        link.appendChild(img);
        figure.appendChild(link);
        figure.appendChild(caption);
        return figure;
      }));
    }
  }

  /* Fill one panel card (figure[data-rg-panel]) from an index record, or mark it missing:
   * "Not applicable to this model: <reason>" when `notApplicable` gives one, else the card's own
   * note. A record without a picture (e.g. the live decoder's weights) fills text and
   * downloads. `meta` (the index's panel entry, on pages whose picker changes the technique
   * of a card): its title and missing note replace the previous technique's when the card
   * has no result. */
  function updatePanel(card, record, notApplicable, meta) {
    var img = hook(card, "img");
    var link = hook(card, "link");
    var downloads = hook(card, "downloads");
    var available = Boolean(record && record.figures.length);
    var groups = available ? figureGroups(record) : [];
    var shown = available ? pictureOf(record) : null;
    card.classList.toggle("rg-unavailable", !available);
    var missing = hook(card, "missing");
    if (meta) {
      if (missing) {
        missing.setAttribute("data-rg-missing", meta.missing || table.labels.not_computed);
      }
      if (!available) {
        setText(hook(card, "title"), meta.title);
      }
    }
    if (missing) {
      missing.hidden = available;
      if (missing.hasAttribute("data-rg-missing")) {
        setText(missing, notApplicable ? table.labels.not_applicable + ": " + notApplicable
          : record && record.failed ? table.labels.failed + ": " + record.failed
          : missing.getAttribute("data-rg-missing"));
      }
    }
    if (!available) {
      setImage(img, null);
      if (link) {
        link.removeAttribute("href");
      }
      setText(hook(card, "caption"), "");
      setMore(card, "");
      if (downloads) {
        downloads.replaceChildren();
      }
      fillExtras(card, [], null, "");
      return;
    }
    if (shown) {
      var src = root + shown.src;
      setImage(img, src, shown.width, shown.height, record.title);
      if (shown.width) {
        var basis = Math.min(Math.max(shown.width, CARD_WIDTHS[0]), CARD_WIDTHS[1]);
        card.style.setProperty("--rg-basis", basis + "px");
      }
      if (link) {
        link.setAttribute("href", src);
      }
    } else {
      setImage(img, null);
      if (link) {
        link.removeAttribute("href");
      }
    }
    setText(hook(card, "title"), record.title);
    setText(hook(card, "caption"), record.caption);
    setMore(card, record.more);
    fillDownloads(downloads, record, groups);
    fillExtras(card, groups, shown, record.title);
  }

  /* "predicted 7 (length 0.93) ✓" as DOM nodes (class names are user data: textContent
     only); `score` names the predicted class's score, as the page printed it. */
  function predictionNodes(prediction, score) {
    if (!prediction) {
      return [document.createTextNode("no prediction")];
    }
    var name = document.createElement("b");
    name.textContent = prediction.predicted;
    var nodes = [document.createTextNode("predicted "), name,
      document.createTextNode(" (" + (score || "score") + " " +
        prediction.confidence.toFixed(2) + ")")];
    if (prediction.correct === true || prediction.correct === false) {
      var mark = document.createElement("span");
      mark.className = prediction.correct ? "rg-ok" : "rg-bad";
      mark.title = prediction.correct ? "correct" : "misclassified";
      mark.textContent = prediction.correct ? "\u2713" : "\u2717 misclassified";
      nodes.push(document.createTextNode(" "), mark);
    }
    return nodes;
  }

  function updateInputCard(card, model, stepName, inputKey) {
    var input = findInput(model, inputKey);
    if (!card || !input) {
      return;
    }
    setImage(hook(card, "img"), root + input.image.src, input.image.width, input.image.height,
      input.label);
    var link = hook(card, "link");
    if (link) {
      link.setAttribute("href", root + input.image.src);
    }
    setText(hook(card, "input-label"), input.label);
    setText(hook(card, "true-class"), input.true_class === null ? "unknown" : input.true_class);
    var step = model.steps[stepName];
    var target = hook(card, "prediction");
    if (target) {
      target.replaceChildren.apply(target,
        predictionNodes(step ? step.predictions[inputKey] : null,
          target.getAttribute("data-rg-score-word")));
    }
  }

  function setSelectionText(values) {
    var sentence = page.querySelector("[data-rg-selection]");
    if (!sentence) {
      return;
    }
    Object.keys(values).forEach(function (name) {
      setText(hook(sentence, name), values[name]);
    });
  }

  /* Filmstrip / compare grids: cards as wide as the shown image (240 ... 480 px). */
  function setCardWidth(records) {
    var strip = page.querySelector("[data-rg-strip]");
    var first = records.map(pictureOf).filter(function (f) { return f && f.width; })[0];
    if (strip && first) {
      var width = Math.min(Math.max(first.width, 240), 480);
      strip.style.setProperty("--rg-card-min", width + "px");
    }
  }

  /* The index's entry of a panel id in the first of `models` that has it (its title,
   * technique, missing note), or a stand-in named by the id. */
  function panelMeta(panelId, models) {
    for (var i = 0; i < models.length; i++) {
      var panels = models[i].panels;
      for (var j = 0; j < panels.length; j++) {
        if (panels[j].id === panelId) {
          return panels[j];
        }
      }
    }
    return {id: panelId, title: panelId, technique: panelId, missing: ""};
  }

  /* ---------------------------------------------------------------- controls */

  var controls = page.querySelector("[data-rg-controls]");
  var slider = page.querySelector("[data-rg-step-slider]");
  var sliderSteps = slider ? JSON.parse(slider.getAttribute("data-rg-steps") || "[]") : [];
  var inputPicker = page.querySelector("[data-rg-input-picker]");
  var panelPicker = page.querySelector("[data-rg-panel-picker]");

  function syncControls(stepName, inputKey, panelId) {
    if (slider) {
      var index = sliderSteps.indexOf(stepName);
      if (index < 0) {
        index = sliderSteps.length - 1;
      }
      if (String(slider.value) !== String(index)) {
        slider.value = String(index);
      }
      setText(page.querySelector("[data-rg-step-value]"), sliderSteps[index] || "");
    }
    if (inputPicker && inputKey && inputPicker.value !== inputKey) {
      inputPicker.value = inputKey;
    }
    if (panelPicker && panelId && panelPicker.value !== panelId) {
      panelPicker.value = panelId;
    }
  }

  function choose(changes) {
    Object.keys(changes).forEach(function (key) {
      selection[key] = changes[key];
    });
    writeStored(selection);
    writeQuery(selection);
    render();
  }

  /* The first stop of the Tab key: a link to the step slider (it comes after the site's and
   * the model's navigation otherwise), shown while it has the focus. */
  function addSkipLink(target) {
    var link = document.createElement("a");
    link.className = "rg-skip";
    link.href = "#";
    link.textContent = "Skip to the training-step slider";
    link.addEventListener("click", function (event) {
      event.preventDefault();
      target.focus();
    });
    document.body.insertBefore(link, document.body.firstChild);
  }

  function bindControls() {
    if (controls) {
      controls.hidden = false;
    }
    if (slider) {
      addSkipLink(slider);
      slider.addEventListener("input", function () {
        choose({step: sliderSteps[Number(slider.value)]});
      });
      var prev = page.querySelector("[data-rg-step-prev]");
      var next = page.querySelector("[data-rg-step-next]");
      var move = function (delta) {
        var index = Math.min(sliderSteps.length - 1, Math.max(0, Number(slider.value) + delta));
        choose({step: sliderSteps[index]});
      };
      if (prev) {
        prev.addEventListener("click", function () { move(-1); });
      }
      if (next) {
        next.addEventListener("click", function () { move(1); });
      }
    }
    if (inputPicker) {
      inputPicker.addEventListener("change", function () {
        choose({input: inputPicker.value});
      });
    }
    if (panelPicker) {
      panelPicker.addEventListener("change", function () {
        choose({panel: panelPicker.value});
      });
    }
    var sharedScale = page.querySelector("[data-rg-shared-scale]");
    if (sharedScale) {
      sharedScale.addEventListener("change", function () { render(); });
    }
    /* A gallery thumbnail on the model page selects its input before opening the layer page. */
    page.querySelectorAll("[data-rg-thumb]").forEach(function (thumb) {
      thumb.addEventListener("click", function () {
        selection.input = thumb.getAttribute("data-rg-thumb");
        writeStored(selection);
      });
    });
  }

  /* The model picker beside a model's page links: the same page of another model (its
   * overview when it has no such page); the step and input follow through localStorage. */
  page.querySelectorAll("[data-rg-model-picker]").forEach(function (picker) {
    var label = picker.closest("[data-rg-model-picker-label]");
    if (label) {
      label.hidden = false;
    }
    picker.addEventListener("change", function () {
      writeStored(selection);
      window.location.href = picker.value;
    });
  });

  /* ---------------------------------------------------------------- pages */

  /* Blocks of one step (the model page's step sections, the untrained-step banners of every
   * model page): only the chosen step's are shown. */
  function showStepBlocks(stepName) {
    page.querySelectorAll("[data-rg-step]").forEach(function (block) {
      block.hidden = block.getAttribute("data-rg-step") !== stepName;
    });
  }

  function renderModelPage(model) {
    var stepName = resolveStep(model, selection.step);
    var inputKey = resolveInput(model, selection.input);
    syncControls(stepName, inputKey);
    setSelectionText({step: stepName || "none"});
    showStepBlocks(stepName);
    if (window.reportgenCharts && stepName) {
      window.reportgenCharts.markStep(stepName); /* the training curves' step line */
    }
    var step = model.steps[stepName];
    page.querySelectorAll("[data-rg-thumb]").forEach(function (thumb) {
      var key = thumb.getAttribute("data-rg-thumb");
      var prediction = step ? step.predictions[key] : null;
      var target = thumb.querySelector("[data-rg-prediction]");
      if (target) {
        target.replaceChildren.apply(target, predictionNodes(prediction,
          target.getAttribute("data-rg-score-word")));
      }
      thumb.classList.toggle("rg-wrong", Boolean(prediction) && prediction.correct === false);
      thumb.classList.toggle("rg-selected", key === inputKey);
    });
  }

  function renderLayerPage(model) {
    var stepName = resolveStep(model, selection.step);
    var inputKey = resolveInput(model, selection.input);
    syncControls(stepName, inputKey);
    var input = findInput(model, inputKey);
    setSelectionText({step: stepName || "none", input: input ? input.label : "none"});
    showStepBlocks(stepName);
    updateInputCard(page.querySelector("[data-rg-input-card]"), model, stepName, inputKey);
    page.querySelectorAll("[data-rg-panel]").forEach(function (card) {
      updatePanel(card, lookup(model, stepName, inputKey, card.getAttribute("data-rg-panel")));
    });
    return {step: stepName, input: inputKey};
  }

  /* Quantitative analyses: the chosen step's dataset-level panels; a step without them says so
   * (the trend plots below are static and not touched). */
  function renderAnalysesPage(model) {
    var stepName = resolveStep(model, selection.step);
    syncControls(stepName, null);
    setSelectionText({step: stepName || "none"});
    showStepBlocks(stepName);
    var step = model.steps[stepName];
    var records = (step && step.dataset) || {};
    var none = Object.keys(records).length === 0;
    var note = page.querySelector("[data-rg-no-analyses]");
    if (note) {
      note.hidden = !none;
    }
    var grid = page.querySelector("[data-rg-step-panels]");
    if (grid) {
      grid.hidden = none; /* one note for the step, not one per analysis */
    }
    page.querySelectorAll("[data-rg-step-panels] [data-rg-panel]").forEach(function (card) {
      updatePanel(card, records[card.getAttribute("data-rg-panel")] || null);
    });
    return {step: stepName, input: null};
  }

  function renderFilmstrip(model) {
    var inputKey = resolveInput(model, selection.input);
    var panelId = modelHasPanel(model, selection.panel) ? selection.panel : defaults.panel;
    var current = resolveStep(model, selection.step);
    syncControls(current, inputKey, panelId);
    var input = findInput(model, inputKey);
    var meta = panelMeta(panelId, [model]);
    setSelectionText({panel: meta.title, input: input ? input.label : "none"});
    /* One colour scale for every step (the frames drawn on the shared scale) unless the box
     * is unticked; one caption for the strip: the chosen step's. */
    var box = page.querySelector("[data-rg-shared-scale]");
    var useShared = !box || box.checked;
    var records = [];
    var caption = "";
    var more = "";
    var range = null;
    page.querySelectorAll("[data-rg-step-card]").forEach(function (item) {
      var stepName = item.getAttribute("data-rg-step-card");
      var card = item.querySelector("[data-rg-panel]");
      var record = lookup(model, stepName, inputKey, panelId);
      if (record && record.shared) {
        range = record.shared.range;
        if (useShared) {
          record = record.shared;
        }
      }
      records.push(record);
      card.setAttribute("data-rg-panel", panelId);
      card.setAttribute("data-rg-scale", record && record.range ? "shared" : "own");
      updatePanel(card, record, null, meta);
      item.classList.toggle("rg-current", stepName === current);
      if (record && (stepName === current || !caption)) {
        caption = record.caption;
        more = record.more;
      }
    });
    var toggle = page.querySelector("[data-rg-scale-toggle]");
    if (toggle) {
      toggle.hidden = !range;
      setText(toggle.querySelector("[data-rg-scale-range]"),
        range ? "(" + Number(range[0].toPrecision(3)) + " \u2026 " + Number(range[1].toPrecision(3)) +
          ")" : "");
    }
    setText(page.querySelector("[data-rg-strip-caption]"), caption);
    var stripMore = page.querySelector("[data-rg-strip-more]");
    if (stripMore) {
      setMore(stripMore, more); /* the details once, below the strip, like the caption */
    }
    setCardWidth(records);
  }

  function renderCompare() {
    var models = Array.prototype.map.call(page.querySelectorAll("[data-rg-model-card]"),
      function (item) { return allData[item.getAttribute("data-rg-model-card")]; })
      .filter(Boolean);
    if (!models.length) {
      return null;
    }
    var panelId = selection.panel;
    var known = models.some(function (model) { return modelHasPanel(model, panelId); });
    if (!known) {
      panelId = defaults.panel;
    }
    var inputKey = selection.input;
    var anyHasInput = models.some(function (model) { return findInput(model, inputKey); });
    if (!anyHasInput) {
      inputKey = defaults.input;
    }
    syncControls(selection.step || defaults.step, inputKey, panelId);
    var label = inputKey;
    models.forEach(function (model) {
      var input = findInput(model, inputKey);
      if (input && label === inputKey) {
        label = input.label;
      }
    });
    var meta = panelMeta(panelId, models);
    setSelectionText({panel: meta.title, input: label || "none"});
    var records = [];
    page.querySelectorAll("[data-rg-model-card]").forEach(function (item) {
      var model = allData[item.getAttribute("data-rg-model-card")];
      var card = item.querySelector("[data-rg-panel]");
      if (!model || !card) {
        return;
      }
      var stepName = resolveStep(model, selection.step || defaults.step);
      var hasInput = Boolean(findInput(model, inputKey));
      var record = hasInput ? lookup(model, stepName, inputKey, panelId) : null;
      records.push(record);
      card.setAttribute("data-rg-panel", panelId);
      var own = model.panels.some(function (p) { return p.id === panelId; });
      updatePanel(card, record, (model.not_applicable || {})[meta.technique],
        own ? panelMeta(panelId, [model]) : meta);
      setText(hook(card, "note"), stepName ? "step " + stepName : "no built step");
    });
    setCardWidth(records);
    return null;
  }

  /* Tell other scripts (live-decoder.js) what is shown now. */
  function publish(slug, shown) {
    var detail = {model: slug, step: shown.step, input: shown.input};
    window.reportgenSelection = detail;
    var event;
    try {
      event = new CustomEvent("reportgen:selection", {bubbles: true, detail: detail});
    } catch (error) {
      return; /* very old browsers: the global above is still set */
    }
    page.dispatchEvent(event);
  }

  /* How each kind of page of the table is drawn: (its model's index, or null) -> what is shown
   * ({step, input}) for the pages that publish it. */
  var RENDERERS = {
    model: renderModelPage,
    layer: renderLayerPage,
    analyses: renderAnalysesPage,
    filmstrip: renderFilmstrip,
    compare: renderCompare
  };

  var slug = page.getAttribute("data-rg-model");
  var model = spec.per_model ? allData[slug] : null;

  /* Each input's panels at every step come in a script of their own (models/SLUG/inputs/
   * KEY.js, listed in the index's input_scripts; reportgen/pages/input_scripts.py), loaded with
   * a plain <script src> when the input is first shown, so that data.js stays small however
   * many steps there are. */
  var inputScripts = {}; /* src -> "loading" | "done" */

  function neededInputScripts() {
    if (spec.chooses.indexOf("input") < 0) {
      return [];
    }
    var models = model ? [model] : Object.keys(allData).map(function (key) {
      return allData[key];
    });
    var sources = [];
    models.forEach(function (each) {
      var scripts = (each && each.input_scripts) || {};
      var keys = model ? [resolveInput(each, selection.input)] :
        [selection.input, defaults.input];
      keys.forEach(function (key) {
        var src = key ? scripts[key] : null;
        if (src && inputScripts[src] !== "done" && sources.indexOf(src) < 0) {
          sources.push(src);
        }
      });
    });
    return sources;
  }

  function loadInputScripts(sources, then) {
    var pending = sources.length;
    sources.forEach(function (src) {
      if (inputScripts[src] === "loading") {
        pending -= 1; /* its own load calls render() again */
        return;
      }
      inputScripts[src] = "loading";
      var script = document.createElement("script");
      script.src = root + src;
      script.onload = script.onerror = function () {
        inputScripts[src] = "done"; /* a missing script leaves its panels marked missing */
        pending -= 1;
        if (pending <= 0) {
          then();
        }
      };
      document.head.appendChild(script);
    });
    if (pending <= 0 && sources.every(function (src) { return inputScripts[src] === "done"; })) {
      then();
    }
  }

  /* While an input's script loads the page is marked data-rg-busy (the figures still show
   * the previous choice); the choice is drawn as soon as it has arrived. */
  function render() {
    var sources = neededInputScripts();
    if (sources.length) {
      page.setAttribute("data-rg-busy", "");
      loadInputScripts(sources, render);
      return;
    }
    page.removeAttribute("data-rg-busy");
    var shown = RENDERERS[kind](model);
    if (spec.publishes && shown) {
      publish(slug, shown);
    }
  }

  if (spec.per_model && !model) {
    return; /* the index did not load: keep the server-rendered default view */
  }
  if (!spec.chooses.length || !RENDERERS[kind]) {
    return; /* nothing to choose on this page */
  }
  bindControls();
  render();
  if (query.step || query.input || query.panel) {
    writeStored(selection); /* a shared link's choice becomes the remembered one */
  }
})();

/*
 * Click to enlarge: a figure's link (a[data-rg-enlarge]: panel images, their further figures,
 * the input) opens its image large in an overlay on the page instead of the bare file. Mosaics
 * are drawn one pixel per value, so the image is scaled by a whole factor with nearest-neighbour
 * sampling (image-rendering: pixelated) as far as the window allows; an image larger than the
 * window is shrunk to fit. Esc, a click anywhere or the close button closes it and gives the
 * focus back to the link; Tab stays inside the overlay. A plain <img>, so it works from file://;
 * a modified click (new tab, download) keeps the browser's own behaviour.
 */
(function () {
  "use strict";

  var overlay = null;
  var opener = null;

  function fit(img) {
    var width = img.naturalWidth;
    var height = img.naturalHeight;
    if (!width || !height) {
      return;
    }
    var room = Math.min(window.innerWidth * 0.94 / width, window.innerHeight * 0.86 / height);
    var scale = room >= 1 ? Math.floor(room) : room; /* whole factors keep pixels square */
    img.style.width = Math.max(1, Math.round(width * scale)) + "px";
    img.style.height = Math.max(1, Math.round(height * scale)) + "px";
    img.classList.toggle("rg-lightbox-shrunk", scale < 1);
    overlay.setAttribute("data-rg-scale", String(Math.round(scale * 100) / 100));
  }

  function focusables() {
    return overlay ? Array.prototype.slice.call(overlay.querySelectorAll("button, a[href]")) : [];
  }

  function close() {
    if (!overlay) {
      return;
    }
    overlay.remove();
    overlay = null;
    document.documentElement.classList.remove("rg-lightbox-open");
    document.removeEventListener("keydown", onKey, true);
    window.removeEventListener("resize", onResize);
    if (opener && opener.focus) {
      opener.focus();
    }
    opener = null;
  }

  function onKey(event) {
    if (event.key === "Escape") {
      event.preventDefault();
      close();
    } else if (event.key === "Tab") {
      var items = focusables();
      var at = items.indexOf(document.activeElement);
      var next = (at + (event.shiftKey ? items.length - 1 : 1)) % items.length;
      event.preventDefault();
      items[next < 0 ? 0 : next].focus();
    }
  }

  function onResize() {
    var img = overlay && overlay.querySelector("img");
    if (img) {
      fit(img);
    }
  }

  function open(link) {
    close();
    opener = link;
    var source = link.querySelector("img");
    var alt = (source && source.alt) || "figure";
    overlay = document.createElement("div");
    overlay.className = "rg-lightbox";
    overlay.setAttribute("role", "dialog");
    overlay.setAttribute("aria-modal", "true");
    overlay.setAttribute("aria-label", "Enlarged: " + alt);
    overlay.setAttribute("data-rg-lightbox", "");
    var button = document.createElement("button");
    button.type = "button";
    button.className = "rg-lightbox-close";
    button.setAttribute("aria-label", "Close the enlarged image");
    button.textContent = "\u00d7";
    var img = document.createElement("img");
    img.alt = alt;
    img.addEventListener("load", function () { fit(img); });
    img.src = link.getAttribute("href");
    var bar = document.createElement("p");
    bar.className = "rg-lightbox-bar";
    var file = document.createElement("a");
    file.href = link.getAttribute("href");
    file.textContent = "the image file";
    bar.appendChild(document.createTextNode("Esc or click to close \u00b7 "));
    bar.appendChild(file);
    overlay.appendChild(button);
    overlay.appendChild(img);
    overlay.appendChild(bar);
    overlay.addEventListener("click", function (event) {
      if (event.target !== file) {
        event.preventDefault();
        close();
      }
    });
    document.body.appendChild(overlay);
    document.documentElement.classList.add("rg-lightbox-open");
    document.addEventListener("keydown", onKey, true);
    window.addEventListener("resize", onResize);
    if (img.complete) {
      fit(img);
    }
    button.focus();
  }

  document.addEventListener("click", function (event) {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey ||
        event.shiftKey || event.altKey || !event.target.closest) {
      return;
    }
    var link = event.target.closest("a[data-rg-enlarge]");
    if (link && link.getAttribute("href") && !(overlay && overlay.contains(link))) {
      event.preventDefault();
      open(link);
    }
  });
})();
