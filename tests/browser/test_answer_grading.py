"""Answer rounds in a real browser: a rater grades answers and their faithfulness with the keyboard only."""

import re
from types import SimpleNamespace

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from judgments.models import Judgment
from tests.factory import PASSWORD, Role, add_member, make_answer_round, make_project, make_user

from .conftest import log_in

pytestmark = pytest.mark.browser


@pytest.fixture
def team(transactional_db):
    lead = make_user("lena")
    project = make_project(lead)
    ravi = make_user("ravi")
    add_member(project, ravi, Role.RATER)
    return SimpleNamespace(project=project, lead=lead, ravi=ravi)


def test_a_rater_grades_answers_and_faithfulness_with_the_keyboard_only(team, live_server, page):
    round = make_answer_round(team.project, team.lead, [team.ravi])
    log_in(page, live_server, team.ravi.username, PASSWORD)
    expect(page.get_by_role("link", name="My work queue")).to_be_visible()
    page.goto(live_server.url + reverse("judgments:grade", args=[team.project.slug, round.uuid]))
    grader, step = page.locator("#grader"), page.locator("#grade-step")

    def shown() -> str:
        return grader.get_attribute("data-item")

    def wait_past(item: str) -> str:
        expect(grader).not_to_have_attribute("data-item", item)
        page.wait_for_load_state("domcontentloaded")
        expect(grader).not_to_have_class(re.compile(r"htmx-"))
        return shown()

    page.keyboard.press("?")
    help = page.get_by_role("dialog", name="Keyboard")
    expect(help).to_contain_text("Second digit")
    expect(help).to_contain_text("Backspace")
    page.keyboard.press("Escape")
    expect(help).to_be_hidden()

    expected = {}
    first = shown()
    expect(grader).to_contain_text("The answer")
    expect(step).to_contain_text("Step 1 of 2")
    page.keyboard.press("0")  # a slip: take it back
    expect(step).to_contain_text("Step 2 of 2: answer graded 0 Wrong")
    expect(page.locator('input[name=grade][value="0"]')).to_be_checked()
    page.keyboard.press("Backspace")
    expect(step).to_contain_text("Step 1 of 2")
    expect(page.locator('input[name=grade]:checked')).to_have_count(0)
    assert not Judgment.objects.exists()
    page.keyboard.press("2")
    expect(step).to_contain_text("Step 2 of 2: answer graded 2 Right")
    page.keyboard.press("1")
    expected[first] = (2, 1)
    item = wait_past(first)
    expect(step).to_contain_text("Step 1 of 2")  # every answer starts at the first step

    for grade, faithfulness in [(1, 0), (0, 2), (2, 2)]:
        assert item and item not in expected
        expected[item] = (grade, faithfulness)
        page.keyboard.press(str(grade))
        expect(step).to_contain_text("Step 2 of 2")
        page.keyboard.press(str(faithfulness))
        item = wait_past(item)
    assert item == ""
    expect(page.get_by_role("heading", name="Nothing left for you in this round")).to_be_visible()

    page.keyboard.press("b")  # back to the last answer, to change it: the steps start again
    item = wait_past("")
    expect(grader).to_contain_text("You judged this pair 2 Right, faithfulness 2 Fully supported")
    page.keyboard.press("1")
    page.keyboard.press("0")
    expected[item] = (1, 0)
    wait_past(item)

    got = {str(j.item.uuid): (j.grade, j.faithfulness) for j in Judgment.objects.filter(item__round=round).select_related("item")}
    assert got == expected and len(got) == 4
