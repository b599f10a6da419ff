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

  // Errors at their fields. The browser's own checks (a negative node count, say) stop htmx from sending
  // anything, and the server names what it refuses in the results' problem list; either way each message goes
  // beside its input, under the input's own label, and while the inputs are invalid the last valid results stay
  // on the page, greyed, under a banner that says so.
  function labelText(input) {
    var label = document.querySelector('label[for="' + input.id + '"]');
    if (!label) { return input.name; }
    var copy = label.cloneNode(true);
    copy.querySelectorAll(".unit").forEach(function (unit) { unit.remove(); });
    return copy.textContent.trim();
  }

  function errorSlot(input) {
    var id = "e-" + input.name;
    var slot = document.getElementById(id);
    if (!slot) {
      slot = document.createElement("span");
      slot.id = id;
      slot.className = "field-error live-error";
      slot.setAttribute("role", "alert");
      input.insertAdjacentElement("afterend", slot);
    }
    var described = (input.getAttribute("aria-describedby") || "").split(" ").filter(Boolean);
    if (described.indexOf(id) < 0) { described.push(id); input.setAttribute("aria-describedby", described.join(" ")); }
    return slot;
  }

  function showFieldError(input, message) {
    errorSlot(input).textContent = labelText(input) + ": " + message;
    input.setAttribute("aria-invalid", "true");
    var field = input.closest(".field");
    if (field) { field.classList.add("has-error"); }
  }

  function clearFieldErrors(form) {
    form.querySelectorAll(".live-error").forEach(function (slot) {
      var input = form.querySelector('[name="' + slot.id.slice(2) + '"]');
      if (input && !input.closest(".field").querySelector(".field-error:not(.live-error)")) {
        input.removeAttribute("aria-invalid");
        input.closest(".field").classList.remove("has-error");
      }
      slot.remove();
    });
  }

  function inputFor(form, field) {
    return form.querySelector("#f-" + field) || form.querySelector('[name="' + field + '"]');
  }

  function setStale(results, stale) {
    var banner = document.getElementById("stale-banner");
    results.classList.toggle("stale", stale);
    if (stale && !banner) {
      banner = document.createElement("p");
      banner.id = "stale-banner";
      banner.className = "stale-banner";
      banner.setAttribute("role", "status");
      banner.textContent = "Inputs are invalid: last valid result shown.";
      results.insertAdjacentElement("afterbegin", banner);
    } else if (!stale && banner) {
      banner.remove();
    }
  }

  // Label the links of a problem list as their inputs are labelled, and put each message beside its input.
  function applyProblems(form, container) {
    var shown = 0;
    container.querySelectorAll("li[data-field]").forEach(function (item) {
      var input = inputFor(form, item.getAttribute("data-field"));
      if (!input) { return; }
      var link = item.querySelector("a");
      if (link) { link.textContent = labelText(input); }
      showFieldError(input, item.getAttribute("data-message"));
      shown += 1;
    });
    return shown;
  }

  document.addEventListener("htmx:validation:halted", function (evt) {
    var form = evt.target;
    var results = document.getElementById("results");
    if (!form || form.id !== "plan-form" || !results) { return; }
    clearFieldErrors(form);
    (evt.detail.errors || []).forEach(function (error) { showFieldError(error.elt, error.message); });
    setStale(results, true);
  });

  document.addEventListener("htmx:beforeSwap", function (evt) {
    var form = document.getElementById("plan-form");
    var results = document.getElementById("results");
    if (!form || !results || evt.detail.target !== results) { return; }
    var incoming = new DOMParser().parseFromString(evt.detail.serverResponse || "", "text/html");
    var problems = incoming.querySelector("#results .problems");
    clearFieldErrors(form);
    if (!problems) { return; }
    applyProblems(form, problems);
    if (results.querySelector(".headline")) {
      // keep the last valid results, greyed, and show what is wrong above them
      evt.detail.shouldSwap = false;
      setStale(results, true);
      // htmx pushes the address only with a swap: keep the address bar reproducing what was typed
      var sent = evt.detail.xhr && evt.detail.xhr.responseURL ? new URL(evt.detail.xhr.responseURL) : null;
      if (sent && sent.origin === window.location.origin) { history.pushState({}, "", sent.pathname + sent.search); }
      var banner = document.getElementById("stale-banner");
      var list = problems.querySelector("ul");
      banner.textContent = "Inputs are invalid: last valid result shown. ";
      if (list) { banner.appendChild(list); }
    }
  });

  document.addEventListener("htmx:afterSwap", function (evt) {
    var form = document.getElementById("plan-form");
    var results = document.getElementById("results");
    if (form && results && evt.detail.target && evt.detail.target.id === "results") {
      var problems = results.querySelector(".problems");
      if (problems) { applyProblems(form, problems); }
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("plan-form");
    var problems = document.querySelector("#results .problems");
    if (form && problems) { applyProblems(form, problems); }
  });

  // In planner mode the layout inputs the planner chooses are ignored: take them out of the tab order and the
  // accessibility tree (inert) while keeping their values in the form, so "By hand" gets them back. The server
  // names them on the form (data-planner-chooses, app/web/pages/_builder.py PLANNER_CHOOSES).
  function syncPlannerMode(form) {
    var planner = form.querySelector('input[name="mode"][value="planner"]');
    var on = !!(planner && planner.checked);
    (form.dataset.plannerChooses || "").split(" ").forEach(function (name) {
      var input = form.querySelector('#f-' + name);
      var field = input && input.closest(".field");
      if (!field) { return; }
      field.inert = on;
      field.classList.toggle("planner-chooses", on);
    });
  }

  document.addEventListener("change", function (evt) {
    var form = document.getElementById("plan-form");
    if (form && evt.target && evt.target.name === "mode" && form.contains(evt.target)) { syncPlannerMode(form); }
  });

  function syncOnLoad() {
    var form = document.getElementById("plan-form");
    if (form) { syncPlannerMode(form); }
  }
  document.addEventListener("DOMContentLoaded", syncOnLoad);
  document.addEventListener("htmx:historyRestore", syncOnLoad);

  // The deferred panels (scaling curve, cluster sizes) load after the results in their own requests: each new
  // placeholder keeps the height its panel had before the update, so the page below does not jump while it loads
  // (CSSOM style, which the CSP allows; the stylesheet's min-height covers the first load).
  var panelHeights = {};
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var results = document.getElementById("results");
    if (!results || evt.detail.target !== results) { return; }
    panelHeights = {};
    results.querySelectorAll("section.panel[id]").forEach(function (panel) {
      panelHeights[panel.id] = panel.getBoundingClientRect().height;
    });
  });
  document.addEventListener("htmx:afterSwap", function (evt) {
    if (!evt.detail.target || evt.detail.target.id !== "results") { return; }
    Object.keys(panelHeights).forEach(function (id) {
      var panel = document.getElementById(id);
      if (panel && panel.getAttribute("hx-trigger") === "load" && panelHeights[id] > 0) {
        panel.style.minHeight = panelHeights[id] + "px";
      }
    });
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

  // "Nearest that fit" links (planner mode, no layout fits) set their field in the form and update the results
  // in place; without scripts they are ordinary links to the same view.
  document.addEventListener("click", function (evt) {
    var link = evt.target && evt.target.closest ? evt.target.closest("a[data-sets]") : null;
    var form = document.getElementById("plan-form");
    if (!link || !form) { return; }
    var field = form.elements[link.getAttribute("data-sets")];
    if (!field) { return; }
    evt.preventDefault();
    field.value = link.getAttribute("data-value");
    field.focus();
    // the event the field's update listens for: a select updates on change, a typed field on input
    field.dispatchEvent(new Event(field.tagName === "SELECT" ? "change" : "input", { bubbles: true }));
  });
})();
