// The grading screen's keyboard: digits grade, U unrateable, L later, B back, E explanation,
// G guidelines, ? help (letters in either case). After every swap, on this screen and on the one-page
// view of a query, the focus goes where the server's live region says. In answer rounds with a faithfulness scale the
// first digit grades the answer, the second its faithfulness and saves both; Backspace takes the
// first back. The forms and links work without this file; it
// presses them, keeps the guidelines panel open across pairs, and keeps a note the rater started.
(function () {
  "use strict";

  const GUIDELINES_OPEN = "verdict:guidelines-open";  // localStorage: the rater's choice, kept across visits
  const NOTE_DRAFT = "verdict:note:";  // sessionStorage, per pair: an explanation not sent yet

  function grader() { return document.getElementById("grader"); }

  function shownItem() { return grader() ? grader().dataset.item : ""; }

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

  // The two-step grade bar: which step the rater is at (1: the answer's grade, 2: its faithfulness).
  function twoStep() { return grader() && grader().querySelector("[data-two-step]"); }

  function setStep(step) {
    const bar = twoStep();
    if (!bar) { return; }
    bar.dataset.at = String(step);
    const chosen = bar.querySelector("input[name=grade]:checked");
    const label = chosen ? chosen.closest("label").textContent.trim().replace(/\s+/g, " ") : "";
    // A finger has no digit keys: the words fit what the rater holds.
    const touch = window.matchMedia("(pointer: coarse)").matches;
    document.getElementById("grade-step").textContent = step === 1
      ? "Step 1 of 2: choose the answer's grade" + (touch ? "." : " (press its digit).")
      : "Step 2 of 2: answer graded " + label + ". Now its faithfulness" +
        (touch ? ", then Save both grades." : ": its digit saves both (Backspace goes back).");
  }

  // The grade bar sticks to the foot of the screen; what the browser scrolls into view must stop above it,
  // however tall the bar's scale makes it (the stylesheet reads the height; CSSOM, so the policy allows it).
  let barWatch = null;
  function watchGradeBar() {
    if (barWatch) { barWatch.disconnect(); barWatch = null; }
    const bar = document.getElementById("grade-form");
    const root = document.documentElement.style;
    if (!bar || !window.ResizeObserver) { root.removeProperty("--grade-bar-height"); return; }
    barWatch = new ResizeObserver(function () { root.setProperty("--grade-bar-height", bar.offsetHeight + "px"); });
    barWatch.observe(bar);
  }

  function twoStepKey(bar, key) {
    if (/^[0-9]$/.test(key)) {
      const name = bar.dataset.at === "2" ? "faithfulness" : "grade";
      const input = bar.querySelector("input[data-" + name + '="' + key + '"]');
      if (!input) { return false; }
      input.checked = true;
      if (name === "grade") { setStep(2); } else { bar.closest("form").requestSubmit(); }
      return true;
    }
    if (key === "Backspace" && bar.dataset.at === "2") {
      const chosen = bar.querySelector("input[name=grade]:checked");
      if (chosen) { chosen.checked = false; }
      setStep(1);
      return true;
    }
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

  // Storage can be refused (private windows, full quota): the screen then simply forgets.
  function store(storage, key, value) {
    try {
      if (value === null) { storage.removeItem(key); } else { storage.setItem(key, value); }
    } catch (refused) { /* nothing to keep it in */ }
  }

  function stored(storage, key) {
    try { return storage.getItem(key); } catch (refused) { return null; }
  }

  // The guidelines panel lives outside the swapped pair, so it stays as the rater left it.
  function showGuidelines(open) {
    const panel = document.getElementById("guidelines-panel");
    if (!panel) { return; }
    panel.hidden = !open;
    store(localStorage, GUIDELINES_OPEN, open ? "1" : null);
    syncGuidelinesToggle();
  }

  function syncGuidelinesToggle() {
    const panel = document.getElementById("guidelines-panel");
    const toggle = document.getElementById("guidelines-toggle");
    if (panel && toggle) { toggle.setAttribute("aria-expanded", String(!panel.hidden)); }
  }

  function toggleGuidelines() {
    const panel = document.getElementById("guidelines-panel");
    if (panel) { showGuidelines(panel.hidden); }
  }

  document.addEventListener("click", function (event) {
    if (event.target.closest("#break-done")) { closeBreak(); }
    if (event.target.closest("#keys-button")) { toggleHelp(); }
    if (event.target.closest("#keys-close")) { document.getElementById("keys-help").close(); }
    if (event.target.closest("#guidelines-close")) { showGuidelines(false); }
    // Without this file, or with a modifier (a new tab), the link opens the guidelines' own page.
    if (event.target.closest("#guidelines-toggle") && !(event.ctrlKey || event.metaKey || event.shiftKey || event.button)) {
      event.preventDefault();
      toggleGuidelines();
    }
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
    if (target.matches("input[type=radio]") && target.closest("[data-two-step]")) {
      target.blur();  // a grade clicked with the mouse: digits go on working
    } else if (target.matches("input[type=radio]")) {  // choosing an unrateable reason: arrows, then Enter
      if (event.key === "Escape") { document.getElementById("unrateable").open = false; target.blur(); }
      return;
    }
    const panel = document.getElementById("guidelines-panel");
    if (event.key === "Escape" && panel && !panel.hidden) { showGuidelines(false); event.preventDefault(); return; }
    if (busy()) { event.preventDefault(); return; }
    const key = event.key.length === 1 ? event.key.toLowerCase() : event.key;
    let handled = true;
    const bar = twoStep();
    if (bar && (/^[0-9]$/.test(key) || key === "Backspace")) {
      handled = twoStepKey(bar, key);
    } else if (/^[0-9]$/.test(key)) {
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
      toggleGuidelines();
    } else if (key === "?") {
      toggleHelp();
    } else {
      handled = false;
    }
    if (handled) { event.preventDefault(); }
  });

  // How much of the explanation's limit is used (the box itself stops at the limit; a refused note
  // comes back longer, for the rater to shorten).
  function countNote(restored) {
    const note = document.getElementById("note");
    const count = document.getElementById("note-count");
    if (!note || !count || !note.value) { return; }
    count.textContent = note.value.length.toLocaleString("en") + " of " + note.maxLength.toLocaleString("en") + " characters" +
      (restored ? ": the note you started here, not saved yet" : "");
  }

  // A note typed but not sent (the rater went back, or put the pair off) is kept for its pair and put
  // back when the pair is shown again. It is dropped once a verdict on the pair is saved.
  function keepDraft(note) {
    const item = shownItem();
    if (item) { store(sessionStorage, NOTE_DRAFT + item, note.value === note.defaultValue ? null : note.value); }
  }

  function restoreDraft() {
    const note = document.getElementById("note");
    const draft = stored(sessionStorage, NOTE_DRAFT + shownItem());
    if (note && draft !== null && note.value === note.defaultValue && draft !== note.value) {
      note.value = draft;
      return true;
    }
    return false;
  }

  // "Other" needs its text: with this file the browser says so before anything is sent.
  function requireOtherText() {
    const text = document.getElementById("unrateable-note");
    const other = document.querySelector('#unrateable input[type=radio][value="other"]');
    if (text && other) { text.required = other.checked; }
  }

  document.addEventListener("input", function (event) {
    if (event.target.id === "note") { keepDraft(event.target); countNote(false); }
  });

  document.addEventListener("change", function (event) {
    if (event.target.matches('#unrateable input[type=radio]')) { requireOtherText(); }
  });

  let shownBefore = shownItem();

  // The swapped-in pair replaced whatever had the focus. The server's live region names what takes it
  // now (the new pair's grades, the break prompt so that Enter dismisses it, the reason a refused
  // verdict needs), so that Tab reaches the grades at once; the page does not scroll for it.
  document.addEventListener("htmx:afterSettle", function () {
    const marker = document.querySelector("#grading-status [data-focus]");
    if (!marker) { return; }
    const target = document.getElementById(marker.dataset.focus);
    marker.removeAttribute("data-focus");  // once: a later swap elsewhere on the page leaves the focus alone
    if (target) { target.focus({preventScroll: true}); }
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    if (!grader() || !event.target.closest || !event.target.closest("#grader")) { return; }
    const config = event.detail.requestConfig;
    const verdict = config && config.verb === "post" && !config.formData.has("later");
    if (verdict && shownItem() !== shownBefore) {
      store(sessionStorage, NOTE_DRAFT + shownBefore, null);  // saved with the verdict
    }
    shownBefore = shownItem();
    countNote(restoreDraft());
    syncGuidelinesToggle();
    requireOtherText();
    setStep(1);
    watchGradeBar();
  });

  // A grade chosen with the mouse moves the step on too.
  document.addEventListener("change", function (event) {
    if (event.target.matches("[data-two-step] input[name=grade]")) { setStep(2); }
  });

  if (stored(localStorage, GUIDELINES_OPEN) === "1") { showGuidelines(true); }
  countNote(restoreDraft());
  requireOtherText();
  setStep(1);
  watchGradeBar();
}());
