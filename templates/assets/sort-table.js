/*
 * sort-table.js: tables marked data-rg-sortable sort by a column when its heading's button is
 * clicked (again: the other way). Each cell's data-rg-value is what it sorts by: numbers for
 * columns whose heading says data-rg-kind="number", text otherwise; empty values (not
 * recorded) go last either way. The heading says its order in aria-sort.
 */
(function () {
  "use strict";

  function sortBy(table, column, kind, descending) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    function value(row) {
      var cell = row.cells[column];
      var raw = cell ? cell.getAttribute("data-rg-value") || "" : "";
      return kind === "number" ? (raw === "" ? null : Number(raw)) : (raw || null);
    }
    rows.sort(function (a, b) {
      var x = value(a);
      var y = value(b);
      if (x === null || y === null) {
        return (x === null) - (y === null);
      }
      var order = kind === "number" ? x - y : String(x).localeCompare(String(y));
      return descending ? -order : order;
    });
    rows.forEach(function (row) {
      body.appendChild(row);
    });
  }

  document.querySelectorAll("table[data-rg-sortable]").forEach(function (table) {
    var headings = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(headings, function (heading, column) {
      var button = heading.querySelector("[data-rg-sort]");
      if (!button) {
        return;
      }
      button.addEventListener("click", function () {
        var descending = heading.getAttribute("aria-sort") === "ascending";
        Array.prototype.forEach.call(headings, function (other) {
          other.removeAttribute("aria-sort");
        });
        heading.setAttribute("aria-sort", descending ? "descending" : "ascending");
        sortBy(table, column, heading.getAttribute("data-rg-kind"), descending);
      });
    });
  });
})();
