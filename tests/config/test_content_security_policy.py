"""Content-Security-Policy: every page forbids inline script, inline style and eval, so the templates use none."""

import json
import re
from pathlib import Path

from django.urls import reverse

ROOT = Path(__file__).resolve().parents[2]
POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: https: http:; "
          "object-src 'none'; base-uri 'self'; frame-ancestors 'none'; form-action 'self'")
# What the policy would block in a template: inline script, inline style, event-handler attributes,
# javascript: URLs and htmx's hx-on (which evaluates its attribute as script). A JSON data block
# (<script type="application/json">, Swagger UI's settings) is data no browser runs: the policy allows it.
INLINE = {
    "inline <script>": re.compile(r"<script(?![^>]*\b(?:src=|type=\"application/json\"))[^>]*>", re.IGNORECASE),
    "<style> block": re.compile(r"<style\b", re.IGNORECASE),
    "style attribute": re.compile(r"\sstyle\s*=", re.IGNORECASE),
    "on* handler": re.compile(r"\son[a-z]+\s*=", re.IGNORECASE),
    "javascript: URL": re.compile(r"javascript:", re.IGNORECASE),
    "hx-on attribute": re.compile(r"\s(?:data-)?hx-on", re.IGNORECASE),
}


def test_no_template_has_inline_script_style_or_handlers():
    found = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        text = re.sub(r"{#.*?#}", "", path.read_text())  # comments may name what they avoid
        for line_number, line in enumerate(text.splitlines(), start=1):
            found += [f"{path.relative_to(ROOT)}:{line_number}: {what}" for what, pattern in INLINE.items() if pattern.search(line)]
    assert not found, "\n".join(found)


def test_every_page_sends_the_policy(people):
    response = people.client("lead").get(reverse("judgments:project", args=[people.project.slug]))
    assert response["Content-Security-Policy"] == POLICY
    login = people.client("outsider").get(reverse("login"))
    assert login["Content-Security-Policy"] == POLICY


def test_htmx_is_told_not_to_inject_styles_nor_to_eval(people):
    page = people.client("lead").get(reverse("judgments:projects")).content.decode()
    config = json.loads(re.search(r"""<meta name="htmx-config" content='([^']*)'>""", page).group(1))
    # attributesToSettle leaves out "style": settling would copy a resized box's style onto its swapped-in copy, an
    # inline style the policy refuses
    assert config == {"includeIndicatorStyles": False, "allowEval": False, "allowScriptTags": False,
                      "attributesToSettle": ["class", "width", "height"]}
    assert page.index('name="htmx-config"') < page.index("htmx-2.min.js")
    css = (ROOT / "static" / "css" / "verdict.css").read_text()
    assert ".htmx-request .htmx-indicator" in css
