"""The comparison page and the answer metric report and leaderboard, read in chromium at 1366 and 390 px: a
comparison over 4 queries says "not enough evidence" (not "no") and why, one over the demo's 40 graded
queries gives yes / no; the report over 17 graded answers names no metric and the leaderboard keeps f1, the
demo's report names acc; the demo's pool form opens on the launch queries the runs answer. With SHOTS=<folder> set, each page is also saved there as a screenshot."""

import os
from pathlib import Path

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from evaluation import evaluations
from judgments.demo import ANSWER_ROUND, DEMO_PASSWORD, DEMO_PROJECT, QUERY_SET, ROUND
from judgments.models import Project
from tests.evaluation.test_answer_leaderboard_ranking import evaluate as evaluate_answers
from tests.evaluation.test_answer_leaderboard_ranking import graded  # noqa: F401
from tests.evaluation.test_evaluations import evaluated, setup  # noqa: F401
from tests.factory import PASSWORD

from .conftest import fresh_page, log_in

pytestmark = pytest.mark.browser
WIDTHS = {"wide": {"width": 1366, "height": 900}, "phone": {"width": 390, "height": 844}}


def shoot(page, name: str) -> None:
    if folder := os.environ.get("SHOTS"):
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=f"{folder}/{name}.png", full_page=True)


def no_sideways_scroll(page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), "the page scrolls sideways"


@pytest.mark.parametrize("width", WIDTHS)
def test_a_comparison_over_four_queries_says_not_enough_evidence_and_why(browser, live_server, people, setup, width):  # noqa: F811
    round, run_a, run_b, _folder = setup
    evaluation = evaluated(people, round, [run_a, run_b])
    with fresh_page(browser, viewport=WIDTHS[width]) as page:
        log_in(page, live_server, people.lead.username, PASSWORD)
        page.goto(live_server.url + reverse("evaluation:comparison", args=[round.project.slug, evaluation.uuid]))
        expect(page.get_by_role("cell", name="not enough evidence").first).to_be_visible()
        expect(page.get_by_role("cell", name="no", exact=True)).to_have_count(0)
        expect(page.get_by_text("at least 8 differing queries needed").first).to_be_visible()
        expect(page.get_by_text("The tests pair the two runs query by query over 4 queries")).to_be_visible()
        no_sideways_scroll(page)
        shoot(page, f"comparison-4-queries-{width}")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_demo_comparison_and_answer_metric_report_and_leaderboard(browser, live_server, demo, width):
    project = Project.objects.get(slug=DEMO_PROJECT["slug"])
    runs = list(project.runs.order_by("name"))
    evaluation = evaluations.run_evaluation(evaluations.create_evaluation(
        project.rounds.get(name=ROUND), runs, measures=["nDCG@10", "AP", "P@5", "RR"], queue=False))
    answer_round = project.rounds.get(name=ANSWER_ROUND)
    with fresh_page(browser, viewport=WIDTHS[width]) as page:
        log_in(page, live_server, "lead", DEMO_PASSWORD)
        page.goto(live_server.url + reverse("evaluation:comparison", args=[project.slug, evaluation.uuid]))
        expect(page.get_by_role("cell", name="yes", exact=True).first).to_be_visible()
        no_sideways_scroll(page)
        shoot(page, f"comparison-demo-{width}")
        answers = project.answer_evaluations.latest("created_at")
        page.goto(live_server.url + reverse("evaluation:answer-comparison", args=[project.slug, answers.uuid]))
        expect(page.locator("#tests-cover-1")).to_be_visible()
        no_sideways_scroll(page)
        shoot(page, f"answer-comparison-demo-{width}")
        page.goto(live_server.url + reverse("judgments:round-answer-metrics", args=[project.slug, answer_round.uuid]))
        expect(page.get_by_role("heading", name="Verdict: pass")).to_be_visible()
        no_sideways_scroll(page)
        shoot(page, f"answer-metrics-demo-{width}")
        page.goto(live_server.url + reverse("evaluation:answer-leaderboard", args=[project.slug]) + f"?query_set={answer_round.pool.query_set.uuid}")
        expect(page.get_by_text("Ranked by acc: the metric that agrees best with your raters")).to_be_visible()
        no_sideways_scroll(page)
        shoot(page, f"answer-leaderboard-demo-{width}")
        page.goto(live_server.url + reverse("judgments:pool-create", args=[project.slug]))
        expect(page.get_by_label("Query set")).to_have_value(str(project.query_sets.get(name=QUERY_SET).uuid))
        expect(page.get_by_role("heading", name=f"Coverage of “{QUERY_SET}”")).to_be_visible()
        no_sideways_scroll(page)
        shoot(page, f"pool-form-demo-{width}")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_report_over_17_answers_names_no_metric_and_the_leaderboard_keeps_f1(browser, live_server, people, graded, width):  # noqa: F811
    evaluate_answers(graded)
    with fresh_page(browser, viewport=WIDTHS[width]) as page:
        log_in(page, live_server, people.lead.username, PASSWORD)
        page.goto(live_server.url + reverse("judgments:round-answer-metrics", args=[graded.project.slug, graded.uuid]))
        expect(page.get_by_role("heading", name="Verdict: not enough evidence")).to_be_visible()
        expect(page.get_by_text("17 of the 30 needed")).to_be_visible()
        no_sideways_scroll(page)
        shoot(page, f"answer-metrics-17-{width}")
        page.goto(live_server.url + reverse("evaluation:answer-leaderboard", args=[graded.project.slug]) + f"?query_set={graded.pool.query_set.uuid}")
        expect(page.get_by_text("Ranked by f1, the default")).to_be_visible()
        no_sideways_scroll(page)
        shoot(page, f"answer-leaderboard-17-{width}")
