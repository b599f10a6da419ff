// Plan builder behaviour that HTML alone cannot do: read an uploaded config.json into the paste box
// (which triggers the live update), and keep the derived GPU count current while typing.
(function () {
  "use strict";

  function fire(el) { el.dispatchEvent(new Event("input", { bubbles: true })); }

  document.addEventListener("change", function (evt) {
    var input = evt.target;
    if (!input || input.type !== "file" || !input.getAttribute("data-fills")) { return; }
    var target = document.getElementById(input.getAttribute("data-fills"));
    var file = input.files && input.files[0];
    if (!target || !file) { return; }
    var reader = new FileReader();
    reader.onload = function () {
      target.value = String(reader.result || "");
      var details = target.closest("details");
      if (details) { details.open = true; }
      fire(target);
    };
    reader.readAsText(file);
  });

  document.addEventListener("input", function (evt) {
    var form = document.getElementById("plan-form");
    if (!form || !evt.target || !form.contains(evt.target)) { return; }
    var nodes = parseInt(form.elements.nodes && form.elements.nodes.value, 10);
    var per = parseInt(form.elements.gpus_per_node && form.elements.gpus_per_node.value, 10);
    var out = document.querySelector("#gpu-count output");
    if (out && nodes > 0 && per > 0) { out.textContent = String(nodes * per); }
  });

  // Mark the results busy while a new estimate is on its way (screen readers announce the update after).
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var results = document.getElementById("results");
    if (results && evt.detail && evt.detail.elt && evt.detail.elt.id === "plan-form") { results.setAttribute("aria-busy", "true"); }
  });
  document.addEventListener("htmx:afterSettle", function () {
    var results = document.getElementById("results");
    if (results) { results.removeAttribute("aria-busy"); }
  });
})();
