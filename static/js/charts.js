// Draws every chart on the page from its <script type="application/json"> data block (no inline script:
// the CSP allows only script files from this origin). Re-draws after htmx swaps and when the theme changes.
(function () {
  "use strict";

  function cssVar(name, fallback) {
    var v = getComputedStyle(document.documentElement).getPropertyValue(name);
    return v && v.trim() ? v.trim() : fallback;
  }

  function themed(layout) {
    var dark = typeof window.clusterplanTheme === "function" && window.clusterplanTheme() === "dark";
    var fg = cssVar("--fg", dark ? "#e6edf3" : "#1b1f24");
    var grid = cssVar("--border", dark ? "#30363d" : "#d0d7de");
    var out = Object.assign({}, layout);
    out.paper_bgcolor = "rgba(0,0,0,0)";
    out.plot_bgcolor = "rgba(0,0,0,0)";
    out.font = Object.assign({ family: "system-ui, sans-serif", size: 12 }, out.font || {}, { color: fg });
    out.margin = out.margin || { l: 60, r: 20, t: 20, b: 50 };
    // 14 distinct colours, so a stacked memory bar of up to 14 parts never repeats one (it had 8: the 9th part
    // took the 1st part's blue)
    out.colorway = dark
      ? ["#58a6ff", "#f0883e", "#3fb950", "#d2a8ff", "#ff7b72", "#e3b341", "#39c5cf", "#f778ba",
         "#a5d6ff", "#7ee787", "#ffa198", "#bc8cff", "#d29922", "#8b949e"]
      : ["#0b5cad", "#c4581b", "#1a7f37", "#8250df", "#b42318", "#9a6700", "#1b7c83", "#bf3989",
         "#54aeff", "#4ac26b", "#ff8182", "#c297ff", "#d4a72c", "#57606a"];
    Object.keys(out).forEach(function (key) {
      if (/^[xy]axis\d*$/.test(key)) {
        out[key] = Object.assign({}, out[key], { gridcolor: grid, zerolinecolor: grid, linecolor: grid, color: fg });
      }
    });
    if (out.shapes) {
      out.shapes = out.shapes.map(function (s) {
        return Object.assign({}, s, { line: Object.assign({}, s.line || {}, { color: fg }) });
      });
    }
    if (out.annotations) {
      out.annotations = out.annotations.map(function (a) {
        return Object.assign({}, a, { font: Object.assign({}, a.font || {}, { color: fg }) });
      });
    }
    return out;
  }

  // A legend below the plot (orientation "h") never breaks an entry's text: on a narrow chart a long name (a cloud
  // option's label) runs past the chart's edge. Each name longer than the chart's width allows is broken between
  // words into lines (the traces' hovers name them in full); LEGEND_CHAR_PX is a 12 px character, generously, and
  // LEGEND_INSET_PX the plot's left margin, the entry's line sample and padding.
  var LEGEND_CHAR_PX = 7;
  var LEGEND_INSET_PX = 110;

  function legendBelow(layout) {
    return !!layout.legend && layout.legend.orientation === "h" && layout.legend.y < 0 && layout.showlegend !== false;
  }

  function brokenNames(data, width) {
    var chars = Math.max(16, Math.floor((width - LEGEND_INSET_PX) / LEGEND_CHAR_PX));
    return data.map(function (trace) {
      var name = trace.name;
      if (typeof name !== "string" || name.length <= chars || name.indexOf("<br>") >= 0) { return trace; }
      var lines = [];
      name.split(" ").forEach(function (word) {
        var last = lines.length - 1;
        if (last >= 0 && (lines[last] + " " + word).length <= chars) { lines[last] += " " + word; }
        else { lines.push(word); }
      });
      return Object.assign({}, trace, { name: lines.join("<br>") });
    });
  }

  // Such a legend also takes its room from the chart's height: where its entries stack one or two to a row, Plotly
  // squeezes the plot and gives the legend a scrollbar (it may take half the chart's height). The chart grows
  // instead, so that every entry shows and the plot keeps MIN_PLOT_PX (what a wide screen gives these charts).
  var MIN_PLOT_PX = 200;

  // Such a legend sits a share of the plot's height below it (the figure's legend.y, -0.22): on a plot of about
  // 200 px that is less than the x axis's tick labels and title take, and the legend's first row covered the axis
  // title ("Message size (bytes)"). The legend goes LEGEND_GAP_PX below the lowest x axis label or title instead;
  // a few moves at most per drawing (a move changes the plot's height, and with it the share).
  var LEGEND_GAP_PX = 6;
  var MAX_LEGEND_MOVES = 6;

  function xAxisBottom(el, full) {
    var bottom = -Infinity;
    var ids = (full._subplots && full._subplots.xaxis) || ["x"];
    ids.forEach(function (id) {
      var found = el.querySelectorAll("." + id + "title, ." + id + "tick text");
      for (var i = 0; i < found.length; i++) {
        var box = found[i].getBoundingClientRect();
        if (box.height > 0) { bottom = Math.max(bottom, box.bottom); }
      }
    });
    return bottom;
  }

  function clearAxisTitle(el, full) {
    // not a chart that an htmx swap or a history restore took out of the page: measured, it has no boxes, and a
    // relayout of it fails inside Plotly (its text measuring node went with the old page)
    if (!el.isConnected || !el.clientWidth) { return false; }
    var drawn = el.querySelector(".legend");
    var h = full._size && full._size.h;
    if (!drawn || !(h > 0) || (el._legendMoves || 0) >= MAX_LEGEND_MOVES) { return false; }
    var axes = xAxisBottom(el, full);
    if (!isFinite(axes)) { return false; }
    var move = axes + LEGEND_GAP_PX - drawn.getBoundingClientRect().top;  // > 0: down, < 0: up
    if (Math.abs(move) <= 1) { return false; }
    el._legendMoves = (el._legendMoves || 0) + 1;
    // the legend pushes the bottom margin: the plot loses about what the legend moves down, and y is its share
    var y = (full.legend.y * h - move) / Math.max(h - move, MIN_PLOT_PX / 2);
    // after the drawing that measured it has finished, only if no new drawing has started since, and by the Plotly
    // that drew the chart: a history restore runs the page's scripts again, and a second Plotly, which has drawn
    // nothing yet, fails to measure a legend's text
    var drawing = el._drawing;
    window.setTimeout(function () {
      if (el._drawing === drawing && el.isConnected) { el._plotly.relayout(el, { "legend.y": y }); }
    }, 0);
    return true;  // the relayout draws again, and this runs again after it
  }

  function fitLegendBelow(el) {
    var full = el._fullLayout;
    if (!full || !full.showlegend || !legendBelow(full) || !full.legend._height) { return; }
    if (clearAxisTitle(el, full)) { return; }
    var legend = full.legend;
    var hidden = Math.max(0, legend._height - legend._effHeight, 2 * legend._height - full.height);
    // the height this drawing needs, from the height Plotly drew it at: asked again before the resize is done, the
    // answer is the same
    var height = full.height + Math.ceil(Math.max(hidden, MIN_PLOT_PX - full._size.h));
    if (height > el.clientHeight + 1) {
      el.style.height = height + "px";
      window.Plotly.Plots.resize(el);
    }
  }

  function draw(el) {
    if (typeof window.Plotly === "undefined") { return; }
    var source = document.getElementById(el.getAttribute("data-figure"));
    if (!source) { return; }
    var figure;
    try { figure = JSON.parse(source.textContent); } catch (e) { return; }
    el.style.height = "";  // the stylesheet's height, grown again below only if this drawing's legend needs it
    el._legendMoves = 0;  // this drawing's legend starts where the figure puts it (clearAxisTitle)
    el._drawing = (el._drawing || 0) + 1;
    el._plotly = window.Plotly;
    var layout = figure.layout || {};
    var data = legendBelow(layout) ? brokenNames(figure.data || [], el.clientWidth) : figure.data || [];
    window.Plotly.react(el, data, themed(layout), {
      responsive: true,
      displaylogo: false,
      modeBarButtonsToRemove: ["select2d", "lasso2d"],
    });
    if (!el.hasAttribute("data-fits-legend") && el.on) {
      el.setAttribute("data-fits-legend", "");
      el.on("plotly_afterplot", function () { fitLegendBelow(el); });  // after every drawing and resize
    }
    fitLegendBelow(el);
    el.setAttribute("data-drawn", "true");
  }

  function drawAll(root) {
    var scope = root && root.querySelectorAll ? root : document;
    var charts = scope.querySelectorAll(".chart[data-figure]");
    for (var i = 0; i < charts.length; i++) { draw(charts[i]); }
    if (scope !== document && scope.matches && scope.matches(".chart[data-figure]")) { draw(scope); }
  }

  window.clusterplanCharts = { drawAll: drawAll };
  document.addEventListener("DOMContentLoaded", function () { drawAll(document); });
  document.addEventListener("htmx:afterSettle", function (evt) {
    drawAll(evt.target || document);
    var fresh = document.querySelectorAll(".chart[data-figure]:not([data-drawn])");
    for (var i = 0; i < fresh.length; i++) { draw(fresh[i]); }
  });
  // Back and forward fetch the page from the server (htmx keeps no history snapshots: historyCacheSize 0 in
  // base.html), and a restore swaps it in without a settle event.
  document.addEventListener("htmx:historyRestore", function () { drawAll(document); });
  document.addEventListener("clusterplan:theme", function () { drawAll(document); });
  if (window.matchMedia) {
    var mq = window.matchMedia("(prefers-color-scheme: dark)");
    if (mq.addEventListener) { mq.addEventListener("change", function () { drawAll(document); }); }
  }
})();
