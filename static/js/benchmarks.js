// Live benchmark job page: follow the job's server-sent events and ask htmx to refresh the live block
// (progress bar, ETA, log tail, partial results and charts) as events arrive. The block also polls every
// few seconds on its own, so the page stays current where EventSource is unavailable.
(function () {
  "use strict";
  function follow() {
    var live = document.getElementById("job-live");
    if (!live || typeof window.EventSource === "undefined") { return; }
    var url = live.getAttribute("data-events");
    if (!url || live.getAttribute("data-final") === "true") { return; }
    var source = new EventSource(url);
    var pending = null;
    function refresh() {
      if (pending) { return; }
      pending = setTimeout(function () {
        pending = null;
        var current = document.getElementById("job-live");
        if (window.htmx && current) { window.htmx.trigger(current, "refresh"); }
      }, 300);
    }
    ["row", "progress", "log", "claimed", "requeued", "cancel_requested", "completed", "start"].forEach(function (name) {
      source.addEventListener(name, refresh);
    });
    source.addEventListener("end", function () { source.close(); refresh(); });
    source.onerror = function () { /* the browser reconnects with Last-Event-ID; polling covers the gap */ };
  }
  document.addEventListener("DOMContentLoaded", follow);

  // Launch form: the GPU the node should match follows the chosen node's reported GPU, and is "none" when the
  // device is the CPU (or the node has only a CPU). Delegated, as htmx replaces the form after a launch.
  function followDevice() {
    var node = document.getElementById("l-node");
    var device = document.getElementById("l-device");
    var gpu = document.getElementById("l-gpu");
    if (!node || !device || !gpu) { return; }
    var chosen = node.options[node.selectedIndex];
    var reported = chosen ? chosen.getAttribute("data-gpu") : "";
    var cpu = device.value === "cpu" || (chosen && chosen.getAttribute("data-cpu-only") === "1" && device.value !== "cuda");
    if (cpu) {
      gpu.value = "";
    } else if (reported) {
      gpu.value = reported;
    } else if (gpu.value === "") {
      gpu.value = gpu.getAttribute("data-default") || "";
    }
  }
  document.addEventListener("change", function (evt) {
    var id = evt.target && evt.target.id;
    if (id === "l-node" || id === "l-device") { followDevice(); }
  });
})();
