// Starts the vendored Swagger UI on /docs from a file, so the page keeps the site's `script-src 'self'` policy.
(function () {
  var root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.getAttribute("data-openapi-url"),
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null, // the default posts the document to validator.swagger.io: nothing leaves the site
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
})();
