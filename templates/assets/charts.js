/*
 * charts.js: the pages' live charts (reportgen/pages/charts.py). Each [data-rg-chart] holds its
 * Vega-Lite spec as JSON; vega-embed (assets/vendor/vega-embed.js, loaded just before this
 * script, no network) draws it as SVG. The controls of a chart group act on all its charts:
 * smoothing draws each series as its time-weighted EMA over training images seen (smoothing.js:
 * a half-life that is a share of the chart's x range, so unevenly spaced steps weigh by the
 * images between them), the log scale switches every y scale to "log" (values <= 0 left out);
 * "Reset zoom" draws the charts again (wheel and drag zoom and pan; double-click resets too).
 *
 * The model overview's charts mark the chosen training step: reportgen.js calls
 * window.reportgenCharts.markStep(step) whenever the slider moves (before or after the charts
 * are drawn). Plain DOM; text set with textContent only.
 */
(function () {
  "use strict";

  var chosenStep = null;
  var charts = [];

  /* The tooltips' texts, shown as they are (the spec's formatType "plain"). */
  function plain(value) {
    return value === null || value === undefined ? "—" : String(value);
  }

  function setLog(node) {
    if (!node || typeof node !== "object") {
      return;
    }
    var y = node.encoding && node.encoding.y;
    if (y && y.scale) {
      y.scale.type = "log";
      delete y.scale.zero;
    }
    (node.layer || []).forEach(setLog);
  }

  function variant(base, smoothing, log) {
    var spec = JSON.parse(JSON.stringify(base));
    if (smoothing > 0 && window.reportgenSmoothing && spec.data && spec.data.values) {
      window.reportgenSmoothing.smoothRows(spec.data.values, smoothing, "smoothed");
      (spec.transform || []).forEach(function (step) {
        (step.window || []).forEach(function (op) {
          if (op.as === "shown") {
            op.field = "smoothed"; /* the line and the pointer read the smoothed value */
          }
        });
      });
    }
    if (log) {
      spec.transform = (spec.transform || []).concat(
        [{filter: "datum.shown > 0 && datum.value > 0"}]);
      setLog(spec);
    }
    return spec;
  }

  function mark(chart) {
    if (chart.view && chosenStep !== null && chart.hasChosen) {
      chart.view.signal("chosen", chosenStep).runAsync();
    }
  }

  function draw(chart) {
    var spec = variant(chart.base, chart.group.smoothing, chart.group.log);
    if (chart.view) {
      chart.view.finalize();
      chart.view = null;
    }
    window.vegaEmbed(chart.target, spec, {actions: false, renderer: "svg",
                                          expressionFunctions: {plain: plain}})
      .then(function (result) {
        chart.view = result.view;
        mark(chart);
      })
      .catch(function (error) {
        chart.target.textContent = "This chart could not be drawn: " + error.message;
      });
  }

  function setUp(groupElement) {
    var group = {smoothing: 0, log: false, charts: []};
    groupElement.querySelectorAll("[data-rg-chart]").forEach(function (element) {
      var specElement = element.querySelector("[data-rg-spec]");
      var base;
      try {
        base = JSON.parse(specElement.textContent);
      } catch (error) {
        return;
      }
      var chart = {base: base, group: group, target: element.querySelector("[data-rg-vega]"),
                   hasChosen: (base.params || []).some(function (p) {
                     return p.name === "chosen";
                   }),
                   view: null};
      var note = element.querySelector("[data-rg-nojs]");
      if (note) {
        note.hidden = true;
      }
      group.charts.push(chart);
      charts.push(chart);
      draw(chart);
    });
    var controls = groupElement.querySelector("[data-rg-chart-controls]");
    if (!controls || !group.charts.length) {
      return;
    }
    controls.hidden = false;
    var redraw = function () {
      group.charts.forEach(draw);
    };
    var smoothing = controls.querySelector("[data-rg-smoothing]");
    smoothing.addEventListener("change", function () {
      group.smoothing = Math.max(0, parseFloat(smoothing.value) || 0);
      redraw();
    });
    var log = controls.querySelector("[data-rg-log-scale]");
    log.addEventListener("change", function () {
      group.log = log.checked;
      redraw();
    });
    controls.querySelector("[data-rg-zoom-reset]").addEventListener("click", redraw);
  }

  if (typeof window.vegaEmbed !== "function") {
    return; /* the bundle did not load: the captions say where the numbers are */
  }
  document.querySelectorAll("[data-rg-charts]").forEach(setUp);
  window.reportgenCharts = {
    markStep: function (step) {
      chosenStep = step;
      charts.forEach(mark);
    },
    /* Draw the charts inside `element` (a [data-rg-charts] group) from new specs, in order
     * (live-training.js: a run's curves as it trains); the group's smoothing, log scale and
     * chosen step apply to them as to the built ones. */
    replaceSpecs: function (element, specs) {
      charts.forEach(function (chart) {
        var index = chart.group.charts.indexOf(chart);
        if (element.contains(chart.target) && index < specs.length) {
          chart.base = specs[index];
          draw(chart);
        }
      });
    }
  };
})();
