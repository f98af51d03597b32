"""axe-core on the screens raters use all day: the one-pair grading screen (with its guidelines panel and its keys
dialog open) and the bulk page of a query, in both themes, show no violation at all, of any impact. Every other page
is held to no serious or critical one by the browser suite as a whole (conftest.fresh_page, test_layout.py)."""

import pytest
from django.urls import reverse

from tests.factory import PASSWORD, make_round

from . import test_grading
from .axe import audit, report
from .conftest import fresh_page, log_in

pytestmark = pytest.mark.browser
team = test_grading.team  # the fixture: a lead and two raters on a project

PAIRS = {"q1": ["d11", "d12", "d13"], "q2": ["d21", "d22"]}
SIZES = pytest.mark.parametrize("viewport", [{"width": 1366, "height": 768}, {"width": 390, "height": 844}],
                                ids=["laptop", "phone"])


@SIZES
def test_the_grading_screen_has_no_axe_violation_of_any_impact_in_either_theme(team, live_server, browser, viewport):
    round = make_round(team.project, team.lead, [team.ravi], PAIRS)
    with fresh_page(browser, viewport=viewport) as page:
        log_in(page, live_server, team.ravi.username, PASSWORD)
        page.goto(live_server.url + reverse("judgments:grade", args=[team.project.slug, round.uuid]))
        found = audit(page, "the grading screen")
        page.keyboard.press("1")  # a grade: the next pair, as a rater sees it thousands of times a day
        page.wait_for_function("() => !document.querySelector('.htmx-request')")
        found += audit(page, "the grading screen after a grade")
        page.locator("#guidelines-toggle").click()
        found += audit(page, "the grading screen, guidelines open")
        page.keyboard.press("Escape")
        page.locator("#keys-button").click()
        found += audit(page, "the grading screen, keys dialog open")
    assert not found, report(found)


@SIZES
def test_the_bulk_page_of_a_query_has_no_axe_violation_of_any_impact_in_either_theme(team, live_server, browser, viewport):
    round = make_round(team.project, team.lead, [team.ravi], PAIRS)
    with fresh_page(browser, viewport=viewport) as page:
        log_in(page, live_server, team.ravi.username, PASSWORD)
        page.goto(live_server.url + reverse("judgments:grade-bulk", args=[team.project.slug, round.uuid, "q1"]))
        found = audit(page, "the bulk page")
    assert not found, report(found)
