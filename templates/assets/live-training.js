/*
 * live-training.js: a model overview follows its training run while `reportgen serve` serves
 * the site (reportgen/commands/live_training.py). Every few seconds it asks
 * ROOT/_live/NAME.json for what the model folder holds now (only when the server's cookie says
 * it answers: reportgen-live); when the folder has saved steps the
 * build did not see, the note under the curves says which (the newest with its validation
 * accuracy and time) and the curves are drawn from the run's history. From file:// (or a host
 * without the answer, as GitHub Pages) the first request fails and the page stays as built.
 * Plain DOM; text set with textContent only.
 */
(function () {
  "use strict";

  var POLL_MS = 2000;
  var note = document.querySelector("[data-rg-live-training]");
  /* only under `reportgen serve` with a models folder (its cookie): no other server is asked */
  if (!note || !/^https?:$/.test(window.location.protocol) || !window.fetch ||
      !/(^|;\s*)reportgen-live=1(;|$)/.test(document.cookie)) {
    return;
  }
  var page = document.querySelector("[data-rg-root]");
  var root = page ? page.getAttribute("data-rg-root") : "";
  var built = parseInt(note.getAttribute("data-rg-live-records"), 10) || 0;
  var url = root + "_live/" + encodeURIComponent(note.getAttribute("data-rg-live-model")) +
    ".json?classes=" + encodeURIComponent(note.getAttribute("data-rg-live-classes")) +
    "&labels=" + encodeURIComponent(note.getAttribute("data-rg-live-labels"));
  var shown = built;

  function percent(value) {
    return typeof value === "number" ? (100 * value).toFixed(2) + "%" : "not measured";
  }

  function time(iso) {
    var date = iso ? new Date(iso) : null;
    return date && !isNaN(date) ? date.toLocaleTimeString() : "unknown time";
  }

  function show(record) {
    if (record.error) {
      note.hidden = false;
      note.textContent = "The run's history cannot be read now: " + record.error;
      return;
    }
    if (typeof record.records !== "number" || record.records <= built) {
      return;                           /* nothing the build did not see */
    }
    var added = record.records - built;
    var latest = record.latest || {};
    note.hidden = false;
    note.setAttribute("data-rg-live-step", latest.step || "");
    note.textContent = "Training run in progress or newer than this site: " + added +
      " saved step" + (added === 1 ? "" : "s") + " since the build; the newest, " +
      latest.step + " (saved " + time(record.saved_at) + "), has validation accuracy " +
      percent(latest.val_accuracy) + ". The curves follow the run; `reportgen build` adds " +
      "the new steps' analyses.";
    if (record.records !== shown && window.reportgenCharts && window.reportgenCharts.replaceSpecs) {
      var group = note.previousElementSibling;
      while (group && !group.hasAttribute("data-rg-charts")) {
        group = group.previousElementSibling;
      }
      if (group) {
        window.reportgenCharts.replaceSpecs(group, (record.charts || []).map(function (c) {
          return c.spec;
        }));
      }
    }
    shown = record.records;
  }

  function poll() {
    window.fetch(url, {cache: "no-store"})
      .then(function (response) {
        if (response.status === 404) {
          return null;                  /* not served by `reportgen serve`: stay as built */
        }
        return response.ok ? response.json() : {};
      })
      .then(function (record) {
        if (record === null) {
          return;
        }
        show(record);
        window.setTimeout(poll, POLL_MS);
      })
      .catch(function () {              /* the server stopped or restarts: ask again later */
        window.setTimeout(poll, 5 * POLL_MS);
      });
  }
  poll();
})();
