"""The grading screen in a real browser: a rater works with the keyboard only, and raters stay blind."""

import re
from types import SimpleNamespace

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from judgments.models import Claim, Judgment, JudgmentEdit
from tests.factory import PASSWORD, Role, add_member, make_project, make_round, make_user

from .conftest import fresh_page, log_in

pytestmark = pytest.mark.browser

# Eleven pairs: ten to grade and one to flag; one of the ten is put off and comes back last.
PAIRS = {"q1": ["d11", "d12", "d13", "d14"], "q2": ["d21", "d22", "d23", "d24"], "q3": ["d31", "d32", "d33"]}


@pytest.fixture
def team(transactional_db):
    lead = make_user("lena")
    project = make_project(lead)
    ravi, rita = make_user("ravi"), make_user("rita")
    add_member(project, ravi, Role.RATER)
    add_member(project, rita, Role.RATER)
    return SimpleNamespace(project=project, lead=lead, ravi=ravi, rita=rita)


@pytest.fixture
def second_page(browser):
    with fresh_page(browser) as page:
        yield page


class Screen:
    """One rater's grading screen, driven by keys only."""

    def __init__(self, page, live_server, round):
        self.page = page
        self.grader = page.locator("#grader")
        self.url = live_server.url + reverse("judgments:grade", args=[round.project.slug, round.uuid])

    def open(self, live_server, user) -> str:
        log_in(self.page, live_server, user.username, PASSWORD)
        expect(self.page.get_by_role("link", name="My work queue")).to_be_visible()
        self.page.goto(self.url)
        return self.item

    @property
    def item(self) -> str:
        return self.grader.get_attribute("data-item")

    def keys(self, *keys: str, note: str = "") -> str:
        """Press `keys` (after typing `note` into the explanation); returns the pair they were meant for."""
        shown = self.item
        if note:
            self.page.keyboard.press("e")
            expect(self.page.locator("#note")).to_be_focused()
            self.page.keyboard.type(note)
            self.page.keyboard.press("Escape")
            expect(self.page.locator("#note")).not_to_be_focused()
        for key in keys:
            self.page.keyboard.press(key)
        return shown

    def wait_past(self, shown: str) -> str:
        expect(self.grader).not_to_have_attribute("data-item", shown)
        # The next key must find the swap finished, or it would act on the pair that is leaving.
        self.page.wait_for_load_state("domcontentloaded")
        expect(self.grader).not_to_have_class(re.compile(r"htmx-"))
        return self.item

    def press(self, *keys: str, note: str = "") -> str:
        return self.wait_past(self.keys(*keys, note=note))

    def pressed_grade(self):
        return self.page.locator('#grade-form button[aria-pressed="true"]')


def test_a_rater_grades_flags_defers_returns_and_changes_a_grade_with_the_keyboard_only(team, live_server, page):
    round = make_round(team.project, team.lead, [team.ravi], PAIRS)
    screen = Screen(page, live_server, round)
    first = screen.open(live_server, team.ravi)
    verdicts: dict[str, tuple[int | None, str]] = {}

    page.keyboard.press("?")
    expect(page.get_by_role("dialog", name="Keyboard")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.get_by_role("dialog", name="Keyboard")).to_be_hidden()
    page.keyboard.press("g")
    expect(page.locator("#guidelines-panel")).to_be_visible()
    page.keyboard.press("g")
    expect(page.locator("#guidelines-panel")).to_be_hidden()
    assert screen.item == first

    verdicts[first] = (2, "")
    later = screen.press("2")
    assert later != first
    noted = screen.press("l")
    expect(screen.grader).to_contain_text("1 for later")
    assert Claim.objects.get(item__uuid=later, rater=team.ravi).kind == Claim.Kind.LATER

    verdicts[noted] = (3, "")
    flagged = screen.press("3", note="Only the case, not the phone")

    page.keyboard.press("u")
    expect(page.get_by_label("Login wall")).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(page.get_by_label("Broken page")).to_be_checked()
    verdicts[flagged] = (None, "broken")
    shown = screen.press("Enter")

    for grade in [0, 1, 2, 3, 0, 1, 2]:
        assert shown not in verdicts and shown != later
        verdicts[shown] = (grade, "")
        shown = screen.press(str(grade))
    assert shown == later, "the pair put off comes back once every other pair is judged"
    expect(screen.grader).not_to_contain_text("for later")
    verdicts[later] = (0, "")
    assert screen.press("0") == ""
    expect(page.get_by_role("heading", name="Nothing left for you in this round")).to_be_visible()

    assert screen.press("b") == later
    expect(screen.grader).to_contain_text("You judged this pair 0 Poor")
    expect(screen.pressed_grade()).to_have_attribute("data-grade", "0")
    changed = screen.press("b")
    assert verdicts[changed] == (2, "")
    expect(screen.pressed_grade()).to_have_attribute("data-grade", "2")
    verdicts[changed] = (1, "")
    assert screen.press("1") == ""

    judgments = Judgment.objects.filter(item__round=round)
    assert {str(j.item.uuid): (j.grade, j.unrateable) for j in judgments} == verdicts
    assert len(verdicts) == judgments.count() == round.items.count() == 11
    assert set(judgments.values_list("rater", flat=True)) == {team.ravi.pk}
    assert judgments.get(item__uuid=noted).note == "Only the case, not the phone"
    assert list(judgments.exclude(item__uuid=noted).exclude(note="").values_list("note", flat=True)) == []
    edits = JudgmentEdit.objects.filter(item__round=round)
    assert [(str(e.item.uuid), e.rater, e.editor, e.old_grade, e.new_grade) for e in edits] == \
        [(changed, team.ravi, team.ravi, 2, 1)]
    assert not Claim.objects.filter(item__round=round).exists()


def test_a_second_rater_in_a_parallel_browser_never_sees_the_first_raters_pairs_or_grades(
        team, live_server, page, second_page):
    round = make_round(team.project, team.lead, [team.ravi, team.rita], PAIRS, raters_per_pair=1, overlap_share=0)
    screens = {"ravi": Screen(page, live_server, round), "rita": Screen(second_page, live_server, round)}
    shown = {"ravi": screens["ravi"].open(live_server, team.ravi), "rita": screens["rita"].open(live_server, team.rita)}
    seen: dict[str, list[str]] = {"ravi": [], "rita": []}
    grades = iter([3, 0, 2, 1] * 3)

    def note(who: str, item: str) -> str:
        return f"{who} wrote this about {item[:8]}"

    while any(shown.values()):
        for who, item in shown.items():
            other = "rita" if who == "ravi" else "ravi"
            page_of = screens[who].page
            assert not any(note(other, theirs) in page_of.content() for theirs in seen[other])
            expect(page_of.locator('#grader [aria-pressed="true"]')).to_have_count(0)
            if item:
                assert item not in seen[other] and item != shown[other]
                expect(page_of.locator("#note")).to_have_value("")
        pressed = {who: screens[who].keys(str(next(grades)), note=note(who, item))
                   for who, item in shown.items() if item}
        for who, item in pressed.items():  # both verdicts are on their way before either answer is awaited
            seen[who].append(item)
            shown[who] = screens[who].wait_past(item)

    assert seen["ravi"] and seen["rita"]
    assert sorted(seen["ravi"] + seen["rita"]) == sorted(str(u) for u in round.items.values_list("uuid", flat=True))
    for who in ("ravi", "rita"):
        mine = Judgment.objects.filter(item__round=round, rater=getattr(team, who))
        assert {str(j.item.uuid): j.note for j in mine} == {item: note(who, item) for item in seen[who]}

    rita = screens["rita"]
    assert rita.press("b") == seen["rita"][-1]
    expect(second_page.locator("#note")).to_have_value(note("rita", seen["rita"][-1]))
    theirs = seen["ravi"][0]
    theirs_url = reverse("judgments:grade-item", args=[team.project.slug, round.uuid, theirs])
    response = second_page.goto(live_server.url + theirs_url)
    assert response.status == 404
    assert note("ravi", theirs) not in second_page.content()
    assert Judgment.objects.filter(item__round=round).count() == round.items.count()
    assert not JudgmentEdit.objects.exists()

