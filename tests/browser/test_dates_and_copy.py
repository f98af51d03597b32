"""Dates never break at their hyphens on a phone, and a new API token has a Copy button (issue #28, item 13),
in a real browser."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from api.models import ApiToken
from judgments.ops import grading
from tests.factory import PASSWORD, make_round

from . import test_grading
from .conftest import fresh_page, log_in

pytestmark = pytest.mark.browser
team = test_grading.team  # the fixture: a lead and two raters on a project

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
LAPTOP = {"viewport": {"width": 1366, "height": 768}}

# Every date written on the page (2026-11-28, with its time when it has one), and the lines each one is laid out on.
DATES_AND_THEIR_LINES = r"""() => {
  const found = [], walker = document.createTreeWalker(document.querySelector("main"), NodeFilter.SHOW_TEXT);
  const pattern = /\d{4}-\d{2}-\d{2}/g;
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const match of node.data.matchAll(pattern)) {
      const range = document.createRange();
      range.setStart(node, match.index);
      range.setEnd(node, match.index + match[0].length);
      const tops = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0).map(r => Math.round(r.top)));
      const where = node.parentElement.closest("td, p, li, small") || node.parentElement;
      found.push({date: match[0], lines: tops.size, text: where.textContent.trim().slice(0, 80)});
    }
  }
  return found;
}"""


def dates_on(page) -> list[dict]:
    return page.evaluate(DATES_AND_THEIR_LINES)


@pytest.fixture
def busy_team(team):
    """A lead with API tokens and a round two raters have graded in, so that the pages show dates."""
    round = make_round(team.project, team.lead, [team.ravi, team.rita])
    for rater in (team.ravi, team.rita):
        for grade in (1, 2):
            item = grading.next_item(round, rater)
            grading.record(item, rater, grading.Verdict(grade=grade))
    for name in ("ci", "nightly gate of the ranker repository"):
        ApiToken.issue(user=team.lead, project=team.project, name=name, scope="read",
                       expires_at=timezone.now() + timedelta(days=90))
    team.round = round
    return team


@pytest.mark.parametrize("size", [PHONE, LAPTOP], ids=["390", "1366"])
def test_no_date_breaks_across_lines(busy_team, live_server, browser, size):
    slug = busy_team.project.slug
    pages = {
        "API tokens": reverse("tokens:list"),
        "round": reverse("judgments:round", args=[slug, busy_team.round.uuid]),
        "corpus": reverse("judgments:corpus", args=[slug]),
        "runs": reverse("judgments:runs", args=[slug]),
        "guidelines": reverse("judgments:guidelines", args=[slug]),
    }
    with fresh_page(browser, **size) as page:
        log_in(page, live_server, busy_team.lead.username, PASSWORD)
        expect(page.get_by_role("link", name="My work queue")).to_be_visible()
        for name, url in pages.items():
            page.goto(live_server.url + url)
            found = dates_on(page)
            assert found, f"{name}: no date on the page"
            broken = [d for d in found if d["lines"] != 1]
            assert not broken, f"{name} at {size['viewport']['width']} px: dates broken across lines: {broken}"
            # Each is a <time>, machine-readable.
            assert page.locator("main time").count() >= len(found), name


def create_token(page, live_server) -> str:
    page.goto(live_server.url + reverse("tokens:list"))
    page.get_by_label("Name").fill("ci")
    page.get_by_role("button", name="Create token").click()
    secret = page.get_by_label("Copy it now")
    expect(secret).to_have_value(re.compile(r"^vrd_"))
    return secret.input_value()


@pytest.mark.parametrize("size", [PHONE, LAPTOP], ids=["390", "1366"])
def test_a_new_token_has_a_copy_button_that_copies_it_and_says_so(team, live_server, browser, size):
    with fresh_page(browser, **size, permissions=["clipboard-read", "clipboard-write"]) as page:
        log_in(page, live_server, team.lead.username, PASSWORD)
        secret = create_token(page, live_server)
        button = page.get_by_role("button", name="Copy", exact=True)
        field = page.locator("#token-secret")
        expect(button).to_be_visible()
        # Beside the token: on its line, to its right.
        shown, beside = field.bounding_box(), button.bounding_box()
        assert beside["x"] >= shown["x"] + shown["width"] and abs(beside["y"] - shown["y"]) < shown["height"]
        button.click()
        expect(page.get_by_role("button", name="Copied", exact=True)).to_be_visible()
        expect(page.locator("#token-copied")).to_have_text("Copied to the clipboard.")
        assert page.evaluate("navigator.clipboard.readText()") == secret
        page.screenshot(path=f"/tmp/shots-ui/tokens-copied-{size['viewport']['width']}.png", full_page=True)


def test_where_the_clipboard_is_refused_the_token_is_selected_and_the_page_says_to_copy_it(team, live_server, browser):
    with fresh_page(browser, **LAPTOP) as page:
        page.add_init_script("Object.defineProperty(navigator, 'clipboard', {value: undefined});")
        log_in(page, live_server, team.lead.username, PASSWORD)
        secret = create_token(page, live_server)
        page.get_by_role("button", name="Copy", exact=True).click()
        expect(page.locator("#token-copied")).to_contain_text("select the text (it is selected now) and copy it")
        selected = page.locator("#token-secret").evaluate("f => f.value.slice(f.selectionStart, f.selectionEnd)")
        assert selected == secret


def test_without_javascript_no_copy_button_promises_what_it_cannot_do(team, live_server, browser):
    with fresh_page(browser, **LAPTOP, java_script_enabled=False) as page:
        log_in(page, live_server, team.lead.username, PASSWORD)
        create_token(page, live_server)
        expect(page.get_by_role("button", name="Copy", exact=True)).to_be_hidden()
        expect(page.get_by_text("Copy it now")).to_be_visible()
