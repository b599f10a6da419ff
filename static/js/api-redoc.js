// Starts the vendored ReDoc on /redoc from a file, so the page keeps the site's `script-src 'self'` policy.
(function () {
  var root = document.getElementById("redoc");
  // ReDoc's search runs in a Web Worker made from a blob: URL, which `script-src 'self'` refuses: search is off
  Redoc.init(root.getAttribute("data-openapi-url"), { disableSearch: true }, root);
})();
