"""The grading screens fit the screen and say what happened (issue #28, item 13), in a real browser: the explanation's
hint sits under its box, resizing the box then grading breaks no Content-Security-Policy rule, the keys dialog's
Close button is on screen, the answer grade bar leaves the cited document readable at 1366x768 and speaks to phone
users in words that fit a finger, and without JavaScript the next page says the grade was saved."""

import json
import io

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from judgments.models import Judgment
from judgments.ops.imports import import_corpus
from tests.factory import PASSWORD, make_answer_round, make_round

from . import test_grading
from .conftest import fresh_page, log_in
from .test_content_security_policy import Watch

pytestmark = pytest.mark.browser
team = test_grading.team  # the fixture: a lead and two raters on a project

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
LAPTOP = {"viewport": {"width": 1366, "height": 768}}
SIZES = pytest.mark.parametrize("size", [PHONE, LAPTOP], ids=["390x844", "1366x768"])
KINDS = pytest.mark.parametrize("kind", ["documents", "answers"])

# Long enough to run past the first screen at 1366x768 under the two-step bar.
LONG_BODY = " ".join(f"Sentence {n} of the cited page, which the rater reads to the end before grading."
                     for n in range(40))


def long_cited_corpus(project) -> None:
    """d1-d3 with long bodies, before make_answer_round (which then keeps them) cites them."""
    corpus = "".join(json.dumps({"doc_id": f"d{n}", "title": f"Title of d{n}", "body": LONG_BODY}) + "\n"
                     for n in range(1, 4))
    import_corpus(project, io.BytesIO(corpus.encode()), "docs.jsonl")


def a_round(team, kind: str):
    if kind == "answers":
        long_cited_corpus(team.project)
        return make_answer_round(team.project, team.lead, [team.ravi])
    return make_round(team.project, team.lead, [team.ravi])


def open_screen(page, live_server, team, round) -> None:
    log_in(page, live_server, team.ravi.username, PASSWORD)
    expect(page.get_by_role("link", name="My work queue")).to_be_visible()
    page.goto(live_server.url + reverse("judgments:grade", args=[team.project.slug, round.uuid]))
    expect(page.locator("#grade-form")).to_be_visible()


def box(locator) -> dict:
    found = locator.bounding_box()
    assert found is not None, f"{locator} is not rendered"
    return found


@SIZES
@KINDS
def test_the_explanation_hint_sits_below_its_box(team, live_server, browser, size, kind):
    round = a_round(team, kind)
    with fresh_page(browser, **size) as page:
        open_screen(page, live_server, team, round)
        note, hint = box(page.locator("#note")), box(page.locator("#note-count"))
        assert hint["y"] >= note["y"] + note["height"], f"the hint {hint} overlaps the box {note}"


@KINDS
def test_resizing_the_explanation_then_grading_breaks_no_policy(team, live_server, browser, kind):
    round = a_round(team, kind)
    with fresh_page(browser, **LAPTOP) as page:
        watch = Watch(page)
        open_screen(page, live_server, team, round)
        first = page.locator("#grader").get_attribute("data-item")
        # What a drag of the resize handle does: the browser sets the box's size through its style (CSSOM, which
        # the policy allows); htmx must not copy that style onto the next pair's box as an attribute.
        page.locator("#note").evaluate("note => { note.style.height = '14rem'; note.style.width = '30rem'; }")
        page.locator("#note").fill("Resized, then graded")
        page.locator("#note").press("Escape")
        page.keyboard.press("2")
        if kind == "answers":
            page.keyboard.press("1")
        expect(page.locator("#grader")).not_to_have_attribute("data-item", first)
        expect(page.locator("#grading-status")).to_contain_text("Saved")
        page.wait_for_timeout(200)  # a violation is reported after the swap settles
        assert Judgment.objects.get(item__uuid=first, rater=team.ravi).note == "Resized, then graded"
        assert watch.problems == [], watch.problems


@SIZES
@KINDS
def test_the_keys_dialogs_close_button_is_on_screen(team, live_server, browser, size, kind):
    round = a_round(team, kind)
    with fresh_page(browser, **size) as page:
        open_screen(page, live_server, team, round)
        page.locator("#keys-button").click()
        dialog = page.get_by_role("dialog", name="Keyboard")
        expect(dialog).to_be_visible()
        close = page.locator("#keys-close")
        shown, view = box(close), size["viewport"]
        assert 0 <= shown["y"] and shown["y"] + shown["height"] <= view["height"], \
            f"Close at {shown}, the screen is {view}"
        # Nothing covers it either: the point at its centre is the button.
        covered = close.evaluate("""b => { const r = b.getBoundingClientRect();
            return !b.contains(document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2)); }""")
        assert not covered
        # Every key is still there to read: the list scrolls inside the dialog.
        last = dialog.locator("tr").last
        last.scroll_into_view_if_needed()
        expect(last).to_be_in_viewport()
        close.click()
        expect(dialog).to_be_hidden()


@KINDS
def test_the_grade_bar_leaves_the_document_readable_at_1366x768(team, live_server, browser, kind):
    round = a_round(team, kind)
    with fresh_page(browser, **LAPTOP) as page:
        open_screen(page, live_server, team, round)
        bar = page.locator("#grade-form")
        document = page.locator(".document-card.cited" if kind == "answers" else ".document-card").first
        last_line = document.locator(".document > *").last
        # On arrival some of the document shows above the bar.
        assert box(document)["y"] + 48 <= box(bar)["y"], "the document starts under the grade bar"
        # Scrolled to its end the way the browser brings a thing into view (keyboard, find, focus), its last block
        # ends above the bar, not under it (a block taller than the room above the bar starts above the window).
        last_line.evaluate("line => line.scrollIntoView({block: 'end'})")
        page.wait_for_timeout(100)
        line, covering = box(last_line), box(bar)
        assert line["y"] + line["height"] <= covering["y"], f"the last line {line} is under the bar {covering}"


def test_phone_users_are_told_to_choose_not_to_type(team, live_server, browser):
    round = a_round(team, "answers")
    with fresh_page(browser, **PHONE) as page:
        open_screen(page, live_server, team, round)
        step = page.locator("#grade-step")
        expect(step).to_be_visible()
        expect(step).not_to_contain_text("type")
        expect(step).to_contain_text("Step 1 of 2: choose the answer's grade")
        page.locator("label").filter(has_text="Partly right").tap()
        expect(step).to_contain_text("Step 2 of 2")
        expect(step).not_to_contain_text("ype")
        expect(step).not_to_contain_text("Backspace")
        for hint in page.locator("#grade-form .key-hint").all():
            expect(hint).to_be_hidden()


def test_the_keyboard_words_stay_on_a_laptop(team, live_server, browser):
    round = a_round(team, "answers")
    with fresh_page(browser, **LAPTOP) as page:
        open_screen(page, live_server, team, round)
        step = page.locator("#grade-step")
        expect(step).to_contain_text("Step 1 of 2: choose the answer's grade (press its digit).")
        page.keyboard.press("1")
        expect(step).to_contain_text("Backspace")
        expect(page.locator("#grade-form .key-hint").first).to_be_visible()


@KINDS
def test_without_javascript_the_next_pair_says_the_grade_was_saved(team, live_server, browser, kind):
    round = a_round(team, kind)
    with fresh_page(browser, **LAPTOP, java_script_enabled=False) as page:
        open_screen(page, live_server, team, round)
        first = page.locator("#grader").get_attribute("data-item")
        if kind == "answers":
            page.get_by_label("2 Right").check()
            page.get_by_label("1 Partly supported").check()
            page.get_by_role("button", name="Save both grades").click()
        else:
            page.get_by_role("button", name="2 Good").click()
        expect(page.locator("#grader")).not_to_have_attribute("data-item", first)
        judgment = Judgment.objects.get(item__uuid=first, rater=team.ravi)
        title = judgment.item.document.title(team.project.display_template())
        words = "2 Right, faithfulness 1 Partly supported" if kind == "answers" else "2 Good"
        expect(page.locator("#messages")).to_contain_text(f"Saved: {words} for “{title}”")
        # Once: the next page after that does not say it again.
        page.reload()
        expect(page.locator("#messages")).not_to_contain_text("Saved")
