// Behaviour every page may use. The Content-Security-Policy allows no inline script or on* attribute,
// so pages mark elements with data- attributes and this file wires them up.
(function () {
  "use strict";

  // <select data-submit-on-change>: choosing an option submits its form (a <noscript> button does without).
  document.addEventListener("change", function (event) {
    if (event.target.matches("select[data-submit-on-change]")) { event.target.form.requestSubmit(); }
  });

  // htmx swaps no error answer, so a refused or failed request would change nothing on the screen: show
  // the error page's own message (the role and what it does not allow, what was not found) in the
  // page's message area instead.
  document.addEventListener("htmx:responseError", function (event) {
    var area = document.getElementById("messages");
    if (!area) { return; }
    var answer = new DOMParser().parseFromString(event.detail.xhr.responseText || "", "text/html");
    var said = answer.querySelector("main [role=alert]");
    var message = document.createElement("p");
    message.className = "message message-error";
    message.textContent = said ? said.textContent.trim() : "The server could not answer (" + event.detail.xhr.status + "). Try again.";
    area.appendChild(message);
    message.scrollIntoView({block: "nearest"});
  });

  // A table wider than its box scrolls sideways in it (verdict.css, phones): such a box gets a place in the tab
  // order, so that a keyboard can scroll it too; one that fits again leaves it.
  function reachScrollingTables() {
    document.querySelectorAll("main table, .table-scroll").forEach(function (box) {
      if (box.scrollWidth > box.clientWidth + 1) {
        if (!box.hasAttribute("tabindex")) { box.tabIndex = 0; box.dataset.scrollFocus = ""; }
      } else if (box.hasAttribute("data-scroll-focus")) {
        box.removeAttribute("tabindex");
        box.removeAttribute("data-scroll-focus");
      }
    });
  }
  document.addEventListener("DOMContentLoaded", reachScrollingTables);
  document.addEventListener("htmx:afterSettle", reachScrollingTables);
  window.addEventListener("resize", reachScrollingTables);
}());
