"""The grading screen as a rater sees it on a phone (390x844) and a laptop (1366x768): the grade buttons
in view on every pair, each pair from its top, the guidelines beside the pair, the note kept across
"back", exact counts, and what shows without JavaScript."""

import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from judgments.models import Claim, Document, Judgment
from tests.factory import PASSWORD, make_round

from . import test_grading
from .conftest import fresh_page, log_in
from .test_grading import Screen

pytestmark = pytest.mark.browser
team = test_grading.team  # the fixture: a lead and two raters on a project

PHONE, LAPTOP = {"width": 390, "height": 844}, {"width": 1366, "height": 768}
SIZES = pytest.mark.parametrize("size", [PHONE, LAPTOP], ids=["390x844", "1366x768"])
PAIRS = {"q1": ["d11", "d12", "d13", "d14"], "q2": ["d21", "d22", "d23", "d24"]}
# Long enough that every pair needs scrolling at both sizes, as real product pages and articles do.
LONG_TEXT = " ".join(["The jacket is waterproof to 20,000 mm, taped at every seam, and packs into its own pocket."] * 14)

LAYOUT = """() => {
  const box = element => { const r = element.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const panel = document.getElementById("guidelines-panel");
  return {
    buttons: [...document.querySelectorAll("#grade-form button")].map(box),
    heading: box(document.querySelector("#grader h1")),
    panel: panel && !panel.hidden ? box(panel) : null,
    width: innerWidth, height: innerHeight, scrollY: scrollY,
    overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
  };
}"""


def browsing(browser, size, javascript=True):
    """A page of its own at this size; a phone has a touch screen."""
    return fresh_page(browser, viewport=size, java_script_enabled=javascript, has_touch=size is PHONE)


@pytest.fixture
def round(team):
    round = make_round(team.project, team.lead, [team.ravi], PAIRS)
    for document in Document.objects.filter(project=team.project):
        document.fields = {**document.fields, "body": f"{document.doc_id}: {LONG_TEXT}"}
        document.save(update_fields=["fields"])
    return round


def layout(page) -> dict:
    return page.evaluate(LAYOUT)


def within(box, width, height) -> bool:
    left, top, right, bottom = box
    return left >= 0 and top >= 0 and right <= width + 0.5 and bottom <= height + 0.5


def overlaps(box, other) -> bool:
    return box[0] < other[2] and other[0] < box[2] and box[1] < other[3] and other[1] < box[3]


def assert_buttons_in_view(seen: dict) -> None:
    assert seen["buttons"], "no grade buttons"
    assert all(within(box, seen["width"], seen["height"]) for box in seen["buttons"]), seen["buttons"]
    assert seen["overflow"] <= 0, f"{seen['overflow']} px of sideways overflow"


def counts(screen) -> tuple[int, int]:
    return (int(screen.grader.locator("[data-judged]").get_attribute("data-judged")),
            int(screen.grader.locator("[data-remaining]").get_attribute("data-remaining")))


def verdict(screen, size, grade: int) -> str:
    """Grade the pair as a rater does at this size: a tap on a phone, a key on a laptop."""
    if size is PHONE:
        shown = screen.item
        screen.page.locator(f'#grade-form button[data-grade="{grade}"]').tap()
        return screen.wait_past(shown)
    return screen.press(str(grade))


def open_screen(page, live_server, round, user) -> Screen:
    screen = Screen(page, live_server, round)
    screen.open(live_server, user)
    expect(screen.grader.locator("h1.query")).to_be_visible()
    return screen


@SIZES
def test_the_grade_buttons_are_in_view_on_every_pair_and_each_pair_starts_at_the_top(browser, live_server, team, round, size):
    with browsing(browser, size) as page:
        screen = open_screen(page, live_server, round, team.ravi)
        menu = page.locator("body > header")
        one_word = menu.get_by_role("link", name="Projects").bounding_box()["height"]
        assert menu.get_by_role("link", name="My work queue").bounding_box()["height"] == one_word, "the menu item wraps"
        assert_buttons_in_view(layout(page))
        assert page.evaluate("document.documentElement.scrollHeight") > size["height"] + 200  # there is a page to scroll

        judged, remaining = counts(screen)
        for n, grade in enumerate([2, 0, 3, 1, 2, 0], start=1):
            page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
            assert_buttons_in_view(layout(page))
            verdict(screen, size, grade)
            seen = layout(page)
            assert seen["scrollY"] == 0 and within(seen["heading"], seen["width"], seen["height"])
            assert_buttons_in_view(seen)
            assert counts(screen) == (judged + n, remaining - n)
        assert Judgment.objects.filter(item__round=round).count() == 6


@SIZES
def test_the_guidelines_open_beside_the_pair_keep_the_buttons_in_place_and_stay_open(browser, live_server, team, round, size):
    with browsing(browser, size) as page:
        screen = open_screen(page, live_server, round, team.ravi)
        panel = page.locator("#guidelines-panel")
        closed = layout(page)
        if size is PHONE:
            page.get_by_role("link", name="Guidelines v1").click()
        else:
            page.keyboard.press("g")
        expect(panel).to_be_visible()
        expect(panel.get_by_role("heading", name="Rules")).to_be_visible()
        expect(page.locator("#guidelines-toggle")).to_have_attribute("aria-expanded", "true")
        opened = layout(page)
        assert_buttons_in_view(opened)
        assert not any(overlaps(box, opened["panel"]) for box in opened["buttons"]), "the panel covers grade buttons"
        assert [box[3] for box in opened["buttons"]][-1] == [box[3] for box in closed["buttons"]][-1], "the bar moved"

        verdict(screen, size, 1)
        expect(panel).to_be_visible()
        assert layout(page)["buttons"] == opened["buttons"], "the buttons moved on the next pair"
        page.reload()
        expect(panel).to_be_visible()  # the choice is remembered
        panel.get_by_role("button", name="Close").click()
        expect(panel).to_be_hidden()
        page.reload()
        expect(screen.grader.locator("h1.query")).to_be_visible()
        expect(panel).to_be_hidden()
        expect(page.locator("#guidelines-toggle")).to_have_attribute("aria-expanded", "false")


def test_a_note_started_on_a_pair_is_kept_across_back_and_saved_with_its_grade(browser, live_server, team, round):
    with browsing(browser, LAPTOP) as page:
        screen = open_screen(page, live_server, round, team.ravi)
        previous = screen.item
        started = screen.press("2")
        page.keyboard.press("e")
        page.keyboard.type("Half a thought about the")
        page.keyboard.press("Escape")

        assert screen.press("b") == previous
        expect(page.locator("#note")).to_have_value("")
        shown = screen.item
        screen.grader.get_by_role("link", name="go on to your next pair").click()
        assert screen.wait_past(shown) == started
        expect(page.locator("#note")).to_have_value("Half a thought about the")
        expect(page.locator("#note-count")).to_contain_text("not saved yet")

        page.keyboard.press("e")
        page.keyboard.press("End")
        page.keyboard.type(" seams")
        page.keyboard.press("Escape")
        following = screen.press("3")
        assert Judgment.objects.get(item__uuid=started).note == "Half a thought about the seams"
        assert page.evaluate(f"sessionStorage.getItem('verdict:note:{started}')") is None
        expect(page.locator("#note")).to_have_value("")
        assert following != started


def test_the_keys_help_shows_capital_letters_and_either_case_works(browser, live_server, team, round):
    with browsing(browser, LAPTOP) as page:
        screen = open_screen(page, live_server, round, team.ravi)
        page.keyboard.press("?")
        help = page.get_by_role("dialog", name="Keyboard")
        expect(help).to_be_visible()
        expect(help.get_by_role("row", name=re.compile("Judge later"))).to_contain_text("L")
        expect(help.locator("kbd").filter(has_text=re.compile("^[a-z]$"))).to_have_count(0)
        page.keyboard.press("Escape")
        expect(help).to_be_hidden()
        put_off = screen.item
        screen.press("Shift+L")
        assert Claim.objects.get(item__uuid=put_off, rater=team.ravi).kind == Claim.Kind.LATER
        page.keyboard.press("Shift+G")
        expect(page.locator("#guidelines-panel")).to_be_visible()
        page.keyboard.press("Escape")
        expect(page.locator("#guidelines-panel")).to_be_hidden()


@SIZES
def test_without_javascript_no_key_hints_show_and_a_refused_other_keeps_its_choice(browser, live_server, team, round, size):
    with browsing(browser, size, javascript=False) as page:
        log_in(page, live_server, team.ravi.username, PASSWORD)
        page.goto(live_server.url + reverse("judgments:grade", args=[round.project.slug, round.uuid]))
        grader = page.locator("#grader")
        first = grader.get_attribute("data-item")
        expect(page.locator("#keys-button")).to_be_hidden()
        for hint in grader.locator("kbd").all():
            expect(hint).to_be_hidden()
        assert_buttons_in_view(layout(page))
        guidelines = reverse("judgments:guidelines-version", args=[round.project.slug, 1])
        expect(page.locator("#guidelines-toggle")).to_have_attribute("href", guidelines)

        page.locator("#unrateable summary").click()
        page.get_by_role("radio", name="Other").check()
        page.get_by_role("button", name="Mark unrateable").click()
        expect(grader).to_have_attribute("data-item", first)
        expect(page.get_by_role("radio", name="Other")).to_be_checked()
        reason = page.get_by_role("textbox", name="What is wrong")
        expect(reason).to_be_focused()
        expect(reason).to_be_in_viewport()
        expect(page.locator("#unrateable-error")).to_have_text("Say what makes the pair unrateable.")
        reason.fill("A parked domain")
        page.get_by_role("button", name="Mark unrateable").click()
        expect(grader).not_to_have_attribute("data-item", first)
        judgment = Judgment.objects.get(item__uuid=first)
        assert (judgment.unrateable, judgment.unrateable_note) == ("other", "A parked domain")
