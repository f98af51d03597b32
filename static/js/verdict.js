// Behaviour every page may use. The Content-Security-Policy allows no inline script or on* attribute,
// so pages mark elements with data- attributes and this file wires them up.
(function () {
  "use strict";

  // <select data-submit-on-change>: choosing an option submits its form (a <noscript> button does without).
  document.addEventListener("change", function (event) {
    if (event.target.matches("select[data-submit-on-change]")) { event.target.form.requestSubmit(); }
  });
}());
