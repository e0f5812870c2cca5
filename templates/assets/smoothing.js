/*
 * smoothing.js: the live charts' smoothing (charts.js), a time-weighted exponential moving
 * average over the x axis (training images seen), debiased.
 *
 * A run's saved steps are unevenly spaced by design (`--steps every:N`, a step at each epoch's
 * end, `last`), so a mean or an EMA over saved steps lets a burst of close steps weigh more
 * than a long stretch with few. Here each earlier value's weight halves every `halfLife` of x:
 *
 *   s_i = sum_k w_ik y_k / sum_k w_ik,   w_ik = 0.5 ^ ((x_i - x_k) / halfLife),  k <= i
 *
 * computed in one pass (W&B's time-weighted EMA: the sum and the debias weight decay together
 * by 0.5 ^ (dx / halfLife); on evenly spaced steps it is TensorBoard's debiased EMA with the
 * weight 0.5 ^ (dx / halfLife)). A value that is not a finite number is shown as it is and
 * skipped by the average, as TensorBoard does.
 */
(function (root) {
  "use strict";

  function twema(xs, ys, halfLife) {
    var out = [];
    var sum = 0;
    var weight = 0;
    var lastX = null;
    for (var i = 0; i < ys.length; i++) {
      var y = ys[i];
      if (typeof y !== "number" || !isFinite(y) || !(halfLife > 0)) {
        out.push(y);
        continue;
      }
      var decay = lastX === null ? 1 : Math.pow(0.5, (xs[i] - lastX) / halfLife);
      sum = sum * decay + y;
      weight = weight * decay + 1;
      lastX = xs[i];
      out.push(sum / weight);
    }
    return out;
  }

  /* Rows {series, x, value} of a chart: `field` of each set to its series' smoothed value, the
     half-life a `fraction` of the chart's whole x range (every series alike). */
  function smoothRows(rows, fraction, field) {
    var xs = rows.map(function (r) { return r.x; });
    var range = Math.max.apply(null, xs) - Math.min.apply(null, xs);
    var bySeries = {};
    rows.forEach(function (r) {
      (bySeries[r.series] = bySeries[r.series] || []).push(r);
    });
    Object.keys(bySeries).forEach(function (name) {
      var series = bySeries[name].slice().sort(function (a, b) { return a.x - b.x; });
      var smoothed = twema(series.map(function (r) { return r.x; }),
                           series.map(function (r) { return r.value; }),
                           fraction * (range > 0 ? range : 1));
      series.forEach(function (r, i) { r[field] = smoothed[i]; });
    });
    return rows;
  }

  var api = {twema: twema, smoothRows: smoothRows};
  if (typeof module === "object" && module.exports) {
    module.exports = api;
  } else {
    root.reportgenSmoothing = api;
  }
})(this);
