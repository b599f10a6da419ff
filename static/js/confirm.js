// A form with data-confirm="question" asks before it submits (deleting a plan and all its revisions, revoking a
// token): Cancel submits nothing. No inline handlers: the CSP allows only script files from this origin.
(function () {
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement)) { return; }
    var question = form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);
})();
