// Loaded in <head> without defer, so the class is there before the first paint: pages hide what only
// works with JavaScript (key hints, the Keys button) behind `html:not(.js)` and nothing jumps in later.
document.documentElement.classList.add("js");
