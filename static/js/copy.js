// Copy buttons: <button data-copy="ID" aria-describedby="STATUS"> copies the value of the field ID to the
// clipboard and says so in STATUS. Where the clipboard is refused (an insecure page, a browser setting), the
// field's text is selected and STATUS says to copy it by hand.
(function () {
  "use strict";

  function say(button, text) {
    const status = document.getElementById(button.getAttribute("aria-describedby"));
    if (status) { status.textContent = text; }
  }

  function byHand(button, field) {
    field.focus();
    field.select();
    button.textContent = "Copy";
    say(button, "The clipboard is not available here: select the text (it is selected now) and copy it, " +
        "with Ctrl+C (⌘C on a Mac) or the menu.");
  }

  document.addEventListener("click", function (event) {
    const button = event.target.closest("button[data-copy]");
    if (!button) { return; }
    const field = document.getElementById(button.dataset.copy);
    if (!field) { return; }
    if (!navigator.clipboard || !navigator.clipboard.writeText) { byHand(button, field); return; }
    navigator.clipboard.writeText(field.value).then(function () {
      button.textContent = "Copied";
      say(button, "Copied to the clipboard.");
    }, function () { byHand(button, field); });
  });
}());
