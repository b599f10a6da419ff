// CSRF for cookie sessions (double submit): copy the page's token into the X-CSRF-Token header of every
// htmx request, and into a hidden csrf_token field of same-origin POST forms that lack one.
// The token comes from <meta name="csrf-token" content="…"> or, failing that, the cp_csrf cookie.
(function () {
  function token() {
    var meta = document.querySelector('meta[name="csrf-token"]');
    if (meta && meta.content) { return meta.content; }
    var match = document.cookie.match(/(?:^|;\s*)cp_csrf=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }
  document.addEventListener("htmx:configRequest", function (event) {
    var value = token();
    if (value) { event.detail.headers["X-CSRF-Token"] = value; }
  });
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement) || (form.method || "").toLowerCase() !== "post") { return; }
    var value = token();
    if (!value || form.querySelector('input[name="csrf_token"]')) { return; }
    var input = document.createElement("input");
    input.type = "hidden";
    input.name = "csrf_token";
    input.value = value;
    form.appendChild(input);
  }, true);
})();
