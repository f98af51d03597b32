"""axe-core (pinned in package.json, installed by `make test` into node_modules/) run in the page, in the light and
the dark theme: WCAG 2.0 and 2.1 A and AA plus axe's best practices. The browser suite checks every page it opens
(tests/browser/conftest.py) and fails on a violation of impact serious or critical."""

import os
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest
from django.conf import settings

AXE = settings.BASE_DIR / "node_modules" / "axe-core" / "axe.min.js"
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]
THEMES = ("dark", "light")  # the app follows prefers-color-scheme; light last, as a new browser context starts
SERIOUS = {"serious", "critical"}
# Rules of lesser impact that fail anywhere all the same: issue 20 found them, and they stay fixed.
ALWAYS_FAILING = {"empty-table-header", "aria-allowed-role", "chart-text-alternative"}
# Drawn and styled by others: Django's admin, and the API's Swagger UI (django-ninja's vendored copy).
NOT_OURS = ("/admin/", "/api/docs")

RUN = r"""async tags => {
  const results = await axe.run(document, {runOnly: {type: "tag", values: tags}, resultTypes: ["violations"]});
  const found = results.violations.map(rule => ({
    rule: rule.id, impact: rule.impact, help: rule.help,
    targets: rule.nodes.map(node => node.target.join(" ") + (rule.id === "color-contrast" ?
      " (" + node.any.map(check => check.message).join("; ") + ")" : "")),
  }));
  // Our own rule: a chart (an SVG image) names itself (<title>) and describes its values (<desc>, or the element its
  // aria-describedby names), since the marks' own titles are hidden inside an image.
  const text = element => (element && element.textContent || "").trim();
  const bare = [...document.querySelectorAll("svg[role=img]")].filter(chart => {
    const described = (chart.getAttribute("aria-describedby") || "").split(/\s+/).map(id => document.getElementById(id));
    return !text(chart.querySelector(":scope > title")) || !described.some(text);
  });
  if (bare.length) {
    found.push({rule: "chart-text-alternative", impact: "serious", help: "A chart needs a <title> and a description of its values",
                targets: bare.map(chart => chart.id || chart.getAttribute("aria-labelledby") || chart.outerHTML.slice(0, 80))});
  }
  return found;
}"""


@dataclass(frozen=True)
class Violation:
    rule: str
    impact: str
    help: str
    target: str
    page: str
    theme: str

    def __str__(self) -> str:
        return f"{self.impact} {self.rule} on {self.page} ({self.theme} theme): {self.target}: {self.help}"


def axe_source() -> str:
    """The axe-core script; a missing install skips the browser suite's checks (CI must have it)."""
    if not AXE.exists():
        message = f"{AXE} is missing: run `make test` (or `npm ci --ignore-scripts`) to install axe-core"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI must run the accessibility checks)")
        pytest.skip(message)
    return AXE.read_text()


def is_ours(page) -> bool:
    """An HTML page of the app (not a file download shown as text, a blank page or the Django admin)."""
    url = urlsplit(page.url)
    return url.scheme.startswith("http") and not url.path.startswith(NOT_OURS) and \
        page.evaluate("() => document.contentType") == "text/html"


def audit(page, label: str = "") -> list[Violation]:
    """Every violation axe finds on the page as it is now, in both themes; the page is left in the light theme."""
    if not is_ours(page):
        return []
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.evaluate(axe_source())  # through the debugging protocol, which the page's CSP does not govern
    where = label or urlsplit(page.url).path + (f"?{urlsplit(page.url).query}" if urlsplit(page.url).query else "")
    found = []
    for theme in THEMES:
        # Reduced motion ends Pico's colour transitions at once, so contrast is measured on the theme's own colours.
        page.emulate_media(color_scheme=theme, reduced_motion="reduce")
        found += [Violation(rule["rule"], rule["impact"], rule["help"], target, where, theme)
                  for rule in page.evaluate(RUN, TAGS) for target in rule["targets"]]
    page.emulate_media(reduced_motion="no-preference")
    return found


def failing(violations: list[Violation]) -> list[Violation]:
    """The violations that fail the suite: serious and critical ones, and those of the rules that always fail."""
    return [violation for violation in violations if violation.impact in SERIOUS or violation.rule in ALWAYS_FAILING]


def report(violations: list[Violation]) -> str:
    return f"{len(violations)} accessibility violations (axe-core):\n" + "\n".join(sorted(map(str, set(violations))))
