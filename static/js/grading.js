// The grading screen's keyboard: digits grade, u unrateable, l later, b back, e explanation,
// g guidelines, ? help. The forms and links work without this file; it only presses them.
(function () {
  "use strict";

  function grader() { return document.getElementById("grader"); }

  function busy() {
    // While a verdict is on its way, keys wait: a fast second key must not land on the old pair.
    const element = grader();
    return element && (element.classList.contains("htmx-request") || element.querySelector(".htmx-request"));
  }

  function click(selector) {
    const element = grader() && grader().querySelector(selector);
    if (element) { element.click(); return true; }
    return false;
  }

  function breakPrompt() {
    const prompt = document.getElementById("break-prompt");
    return prompt && !prompt.hidden ? prompt : null;
  }

  function closeBreak() {
    const prompt = breakPrompt();
    if (prompt) { prompt.hidden = true; }
  }

  function toggleHelp() {
    const help = document.getElementById("keys-help");
    if (help.open) { help.close(); } else { help.showModal(); }
  }

  document.addEventListener("click", function (event) {
    if (event.target.closest("#break-done")) { closeBreak(); }
    if (event.target.closest("#keys-button")) { toggleHelp(); }
    if (event.target.closest("#keys-close")) { document.getElementById("keys-help").close(); }
  });

  document.addEventListener("keydown", function (event) {
    if (!grader() || event.ctrlKey || event.metaKey || event.altKey) { return; }
    const target = event.target;
    if (target.matches("textarea, input[type=text]")) {
      if (event.key === "Escape") { target.blur(); event.preventDefault(); }
      return;
    }
    if (document.getElementById("keys-help").open) { return; }  // the dialog handles Esc itself
    if (breakPrompt()) {
      if (event.key === "Enter" || event.key === "Escape" || event.key === " ") { closeBreak(); event.preventDefault(); }
      return;
    }
    if (target.matches("input[type=radio]")) {  // choosing an unrateable reason: arrows, then Enter
      if (event.key === "Escape") { document.getElementById("unrateable").open = false; target.blur(); }
      return;
    }
    if (busy()) { event.preventDefault(); return; }
    const key = event.key;
    let handled = true;
    if (/^[0-9]$/.test(key)) {
      handled = click('button[data-grade="' + key + '"]');
    } else if (key === "u") {
      const panel = document.getElementById("unrateable");
      if (panel) {
        panel.open = true;
        const choice = panel.querySelector("input[type=radio]:checked") || panel.querySelector("input[type=radio]");
        if (choice) { choice.focus(); }
      }
    } else if (key === "l") {
      handled = click("#later");
    } else if (key === "b") {
      handled = click("#back");
    } else if (key === "e") {
      const note = document.getElementById("note");
      if (note) { note.focus(); }
    } else if (key === "g") {
      const guidelines = document.getElementById("guidelines");
      if (guidelines) { guidelines.open = !guidelines.open; }
    } else if (key === "?") {
      toggleHelp();
    } else {
      handled = false;
    }
    if (handled) { event.preventDefault(); }
  });

  // How much of the explanation's limit is used (the box itself stops at the limit; a refused note
  // comes back longer, for the rater to shorten).
  function countNote() {
    const note = document.getElementById("note");
    const count = document.getElementById("note-count");
    if (!note || !count || !note.value) { return; }
    count.textContent = note.value.length.toLocaleString("en") + " of " + note.maxLength.toLocaleString("en") + " characters";
  }

  document.addEventListener("input", function (event) {
    if (event.target.id === "note") { countNote(); }
  });

  // The swapped-in pair replaced whatever had the focus, so keys work at once; only the break
  // prompt takes the focus, so that Enter dismisses it.
  document.addEventListener("htmx:afterSwap", function () {
    const focus = document.getElementById("break-done");
    if (focus) { focus.focus(); }
    countNote();
  });
  countNote();
}());
