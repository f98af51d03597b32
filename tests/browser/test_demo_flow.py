"""The demo flow of docs/getting-started.md as a newcomer walks it, through the UI only: sample queries from the demo's log,
pool the demo runs over the sample, set up and open a round, grade as both raters, compute the agreement
report and evaluate the runs on the new labels."""

import re

import pytest
from playwright.sync_api import expect

from judgments.demo import DEMO_PASSWORD, DEMO_PROJECT, SEARCH_LOG
from judgments.models import Job, Judgment, Pool, Round
from judgments.ops.jobs import execute_job

from .conftest import fresh_page, log_in

pytestmark = pytest.mark.browser

PROJECT = f"/p/{DEMO_PROJECT['slug']}/"
DATA = ("Queries", "Logs", "Corpus", "Runs", "Pools")  # the project menu's Data dropdown


def run_the_job(page, kind: str) -> None:
    """Stand in for the worker, then follow the job page to its result."""
    expect(page.get_by_role("heading", name=re.compile("."))).to_be_visible()
    execute_job(Job.objects.filter(kind=kind).latest("created_at").pk)
    page.get_by_role("button", name="Open the result").click()


def project_menu(page, live_server, name: str) -> None:
    page.goto(live_server.url + PROJECT)
    menu = page.get_by_role("navigation", name="Project")
    if name in DATA:
        menu.get_by_text("Data").click()
    menu.get_by_role("link", name=name, exact=True).click()


def grade_everything(browser, live_server, username: str, round_name: str) -> int:
    """Log in as the rater, open the round from My work queue and grade every pair with the keys."""
    graded = 0
    with fresh_page(browser) as page:
        log_in(page, live_server, username, DEMO_PASSWORD)
        page.get_by_role("link", name="My work queue").click()
        page.locator("article", has=page.get_by_role("heading", name=round_name)).get_by_role("button", name="Start grading").click()
        page.wait_for_url(re.compile(r"/grade/$"))  # and for the page's scripts, which bind the keys
        grader = page.locator("#grader")
        while item := grader.get_attribute("data-item"):
            page.keyboard.press(str(graded % 4))
            expect(grader).not_to_have_attribute("data-item", item)
            expect(grader).not_to_have_class(re.compile(r"htmx-"))
            graded += 1
        expect(page.get_by_role("heading", name="Nothing left for you in this round")).to_be_visible()
    return graded


def test_a_newcomer_walks_the_demo_from_log_to_evaluation(demo, live_server, page, browser):
    log_in(page, live_server, "lead", DEMO_PASSWORD)

    # Sample: a few queries of each tier from the demo's search log.
    project_menu(page, live_server, "Logs")
    page.get_by_role("link", name=SEARCH_LOG).click()
    for label, value in (("Head quota", "2"), ("Torso quota", "2"), ("Tail quota", "1"), ("Seed", "5")):
        page.get_by_label(label).fill(value)
    page.get_by_role("button", name="Preview the sample").click()
    expect(page.get_by_role("heading", name="Sample with seed 5")).to_be_visible()
    expect(page.locator(".message-warning")).to_have_count(0)  # every quota is filled
    page.get_by_label("Query set name").fill("Walk sample")
    page.get_by_role("button", name="Save as a query set").click()
    expect(page.get_by_role("heading", name="Walk sample")).to_be_visible()

    # Pool: the coverage follows the chosen query set, and every demo run answers the sample.
    project_menu(page, live_server, "Pools")
    page.get_by_role("button", name="Build a pool").click()
    page.get_by_label(re.compile("^Name")).fill("Walk pool")
    page.get_by_label("Query set").select_option(label="Walk sample")
    coverage = page.locator("#run-coverage")
    expect(coverage.get_by_role("heading")).to_have_text("Coverage of “Walk sample”")
    for run in ("bm25-baseline", "hybrid-v2", "dense-e5"):
        expect(coverage.get_by_role("row", name=run)).to_contain_text("5 of 5")
        page.get_by_role("checkbox", name=run).check()
    page.get_by_label("Depth").fill("3")
    page.get_by_role("button", name="Build the pool").click()
    run_the_job(page, "build_pool")
    expect(page.get_by_role("heading", name="Walk pool")).to_be_visible()

    # Round: both raters judge every pair, so the agreement report has pairs to compare.
    project_menu(page, live_server, "Rounds")
    page.get_by_role("button", name="New round").click()
    page.get_by_label(re.compile("^Name")).fill("Walk round")
    pool = Pool.objects.get(name="Walk pool")
    page.get_by_label("Pool").select_option(label=f"Walk pool ({pool.pairs.count()} pairs)")
    page.get_by_role("checkbox", name="rater1").check()
    page.get_by_label("Raters per pair").fill("2")
    page.get_by_role("button", name="Create the round (as a draft)").click()
    expect(page.get_by_text("1 rater chosen, but every pair needs 2 independent judgments")).to_be_visible()
    page.get_by_role("checkbox", name="rater2").check()
    page.get_by_role("button", name="Create the round (as a draft)").click()
    page.get_by_role("button", name="Open to raters").click()
    expect(page.get_by_text("The round is open")).to_be_visible()
    round = Round.objects.get(name="Walk round")
    pairs = round.items.count()
    assert pairs > 5

    assert grade_everything(browser, live_server, "rater1", "Walk round") == pairs
    assert grade_everything(browser, live_server, "rater2", "Walk round") == pairs
    assert Judgment.objects.filter(item__round=round).count() == 2 * pairs

    # Agreement.
    page.goto(live_server.url + round.get_absolute_url())
    page.get_by_role("button", name="Agreement report").click()
    page.get_by_role("button", name="Compute the report").click()
    run_the_job(page, "agreement_report")
    expect(page.get_by_role("heading", name=re.compile("^Gate: "))).to_be_visible()

    # Evaluation: the page swaps the scores in by itself once the job is done.
    project_menu(page, live_server, "Evaluations")
    page.get_by_role("button", name="Evaluate runs").click()
    page.get_by_label("Round").select_option(label="Walk round")
    for run in ("bm25-baseline", "hybrid-v2", "dense-e5"):
        page.get_by_role("checkbox", name=run).check()
    page.get_by_role("button", name="Evaluate").click()
    expect(page.get_by_text("bm25-baseline: waiting")).to_be_visible()
    execute_job(Job.objects.filter(kind="evaluate_runs").latest("created_at").pk)
    expect(page.get_by_role("heading", name="Scores")).to_be_visible()
    expect(page.get_by_text("Queries scored: 5 · with labels: 5 · in the query set “Walk sample”: 5")).to_be_visible()

    project_menu(page, live_server, "Evaluations")
    page.get_by_role("link", name="Leaderboard").click()
    expect(page.get_by_label("Round")).to_have_value(str(round.uuid))
    page.get_by_label("Ranked by").select_option("P@5")
    expect(page).to_have_url(re.compile(r"measure=P%405"))
    expect(page.get_by_role("row", name=re.compile("dense-e5"))).to_be_visible()
