/* What tests/browser/test_layout.py runs in the browser on every page: one list of problems, each a sentence a
   person can act on. */
(maxGap) => {
  const problems = [];
  const shown = (el) => {
    const box = el.getBoundingClientRect();
    return box.width > 2 && box.height > 2 && el.checkVisibility({visibilityProperty: true, opacityProperty: true});
  };
  const said = (el) => (el.innerText || el.value || el.getAttribute("aria-label") || el.id || el.tagName)
    .trim().replace(/\s+/g, " ").slice(0, 60);
  const gap = (a, b) => Math.hypot(Math.max(b.left - a.right, a.left - b.right, 0), Math.max(b.top - a.bottom, a.top - b.bottom, 0));
  const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1 && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
  const sameLine = (a, b) => Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
  // A label's words: the whole label, or, when it wraps its control, its text without the control.
  const textBox = (label) => {
    if (!label.contains(label.control)) return label.getBoundingClientRect();
    const boxes = [];
    const walker = document.createTreeWalker(label, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      if (!walker.currentNode.textContent.trim()) continue;
      const range = document.createRange();
      range.selectNodeContents(walker.currentNode);
      boxes.push(...[...range.getClientRects()].filter((box) => box.width > 0));
    }
    if (!boxes.length) return null;
    return {left: Math.min(...boxes.map((b) => b.left)), right: Math.max(...boxes.map((b) => b.right)),
            top: Math.min(...boxes.map((b) => b.top)), bottom: Math.max(...boxes.map((b) => b.bottom))};
  };

  const sideways = document.scrollingElement.scrollWidth - document.documentElement.clientWidth;
  if (sideways > 0) problems.push(`the page scrolls sideways by ${sideways}px`);
  // What sticks out of the page's column, unless a box of its own scrolls or clips it on purpose.
  const loose = (el, column) => {
    for (let parent = el.parentElement; parent && parent !== column; parent = parent.parentElement) {
      const style = getComputedStyle(parent);
      if (style.overflowX !== "visible" || style.position === "fixed") return false;
    }
    return true;
  };
  const solid = "select, input, textarea, img, svg, video, canvas, iframe, pre";
  for (const column of document.querySelectorAll("body > header, body > main, body > footer")) {
    const edge = column.getBoundingClientRect().right - parseFloat(getComputedStyle(column).paddingRight);
    // Leaves and controls, by their content box: Pico lets the menu's last link (its list's negative margin, its
    // own padding) reach into the column's margin.
    const right = (el) => el.getBoundingClientRect().right - parseFloat(getComputedStyle(el).paddingRight);
    const leaves = [...column.querySelectorAll("*")].filter((el) => !el.childElementCount || el.matches(solid));
    for (const el of leaves.filter((el) => right(el) > edge + 1 && shown(el) && loose(el, column)).slice(0, 5))
      problems.push(`${el.tagName.toLowerCase()} "${said(el)}" sticks out of the page's column by ${Math.round(right(el) - edge)}px`);
  }

  const labels = [...document.querySelectorAll("label")].filter((label) => label.control && shown(label) && shown(label.control));
  const boxes = new Map(labels.map((label) => [label, textBox(label)]));
  for (const label of labels) {
    const control = label.control, own = boxes.get(label), box = control.getBoundingClientRect();
    if (!own) continue;
    const name = `label "${said(label)}"`;
    const tickable = control.type === "checkbox" || control.type === "radio";
    if (overlap(own, box)) problems.push(`${name} overlaps its ${control.type || control.tagName.toLowerCase()}`);
    else if (gap(own, box) > maxGap) problems.push(`${name} is ${Math.round(gap(own, box))}px from its input`);
    else if (tickable && !(own.left >= box.right - 1 && sameLine(own, box))) problems.push(`${name} is not beside its box, on its right`);
    else if (!tickable && !(own.bottom <= box.top + 1 || (own.right <= box.left + 1 && sameLine(own, box))))
      problems.push(`${name} is neither above nor left of its input`);
    for (const [other, otherBox] of boxes) {
      if (other.control === control || !otherBox) continue;
      if (overlap(otherBox, box)) problems.push(`the input of ${name} overlaps label "${said(other)}"`);
      else if (gap(otherBox, box) + 1 < gap(own, box)) problems.push(`the input of ${name} is nearer to label "${said(other)}"`);
    }
  }

  const clippable = "label, legend, button, [role=button], summary, h1, h2, h3, h4, h5, h6, th, td, dt, dd";
  for (const el of document.querySelectorAll(clippable)) {
    if (!shown(el) || el.scrollWidth <= el.clientWidth + 1) continue;
    if (["auto", "scroll"].includes(getComputedStyle(el).overflowX)) continue;  // meant to scroll
    problems.push(`${el.tagName.toLowerCase()} "${said(el)}" is cut: its text needs ${el.scrollWidth}px, it has ${el.clientWidth}px`);
  }
  const ruler = document.createElement("canvas").getContext("2d");
  for (const select of document.querySelectorAll("select:not([multiple])")) {
    if (!shown(select)) continue;
    const style = getComputedStyle(select);
    ruler.font = style.font;
    const room = select.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const widest = [...select.options].reduce((a, o) => ruler.measureText(o.text).width > ruler.measureText(a).width ? o.text : a, "");
    // A select as wide as its whole form (or the page) has no more room to give.
    const column = (select.closest("form") || document.querySelector("main")).getBoundingClientRect().width;
    if (ruler.measureText(widest).width > room + 1 && select.getBoundingClientRect().width < column - 2)
      problems.push(`select "${said(select.labels[0] || select)}" cuts its option "${widest.slice(0, 60)}"`);
  }
  return problems;
}
