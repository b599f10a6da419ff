// Dark mode: follows the system unless the user picked a theme with the toggle (kept in localStorage).
(function () {
  var root = document.documentElement;
  var saved = null;
  try { saved = localStorage.getItem("clusterplan-theme"); } catch (e) { saved = null; }
  if (saved === "dark" || saved === "light") { root.setAttribute("data-theme", saved); }
  function effective() {
    var t = root.getAttribute("data-theme");
    if (t === "dark" || t === "light") { return t; }
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }
  window.clusterplanTheme = effective;
  document.addEventListener("DOMContentLoaded", function () {
    var btn = document.getElementById("theme-toggle");
    if (!btn) { return; }
    btn.setAttribute("aria-pressed", effective() === "dark" ? "true" : "false");
    btn.addEventListener("click", function () {
      var next = effective() === "dark" ? "light" : "dark";
      root.setAttribute("data-theme", next);
      try { localStorage.setItem("clusterplan-theme", next); } catch (e) { /* private mode */ }
      btn.setAttribute("aria-pressed", next === "dark" ? "true" : "false");
      document.dispatchEvent(new CustomEvent("clusterplan:theme", { detail: next }));
    });
  });
})();
