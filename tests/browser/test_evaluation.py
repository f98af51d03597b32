"""A lead evaluates two demo runs in the browser, compares them, follows a query, queues unjudged
documents and reads the leaderboard."""

import pytest
from playwright.sync_api import expect

from judgments.demo import DEMO_PASSWORD, DEMO_PROJECT, ROUND
from judgments.models import Job, Round
from judgments.ops.jobs import execute_job

from .conftest import log_in

pytestmark = pytest.mark.browser


def test_a_lead_evaluates_compares_follows_a_query_queues_unjudged_and_sees_the_leaderboard(demo, live_server, page):
    log_in(page, live_server, "lead", DEMO_PASSWORD)
    page.goto(f"{live_server.url}/p/{DEMO_PROJECT['slug']}/")
    page.get_by_role("navigation", name="Project").get_by_role("link", name="Evaluations").click()
    page.get_by_role("button", name="Evaluate runs").click()
    page.get_by_label("Round").select_option(label=ROUND)
    page.get_by_role("checkbox", name="hybrid-v2").check()
    page.get_by_role("checkbox", name="bm25-baseline").check()
    page.get_by_role("combobox", name="Baseline").select_option(label="bm25-baseline")
    page.get_by_role("button", name="Evaluate").click()
    job = Job.objects.filter(kind="evaluate_runs").latest("created_at")
    execute_job(job.pk)  # stands in for the worker
    page.reload()
    expect(page.get_by_role("heading", name="Scores")).to_be_visible()
    expect(page.get_by_role("columnheader", name="bm25-baseline, traffic-weighted")).to_be_visible()
    expect(page.get_by_role("heading", name="nDCG@10 by tier")).to_be_visible()
    expect(page.get_by_role("img", name="nDCG@10 per tier and run")).to_be_visible()

    page.get_by_role("button", name="Compare the runs").click()
    expect(page.get_by_role("heading", name="hybrid-v2 vs bm25-baseline")).to_be_visible()
    expect(page.get_by_role("img", name="Per-query difference in nDCG@10")).to_be_visible()
    page.get_by_role("link", name="Back to the scores").click()

    page.get_by_role("link", name="q0001").click()
    expect(page.get_by_role("heading", name="q0001: tent")).to_be_visible()
    page.get_by_label("Depth").fill("50")
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_text("unjudged").first).to_be_visible()
    page.get_by_role("link", name="Back to the scores").click()

    page.get_by_role("combobox", name="Run:", exact=True).select_option(label="bm25-baseline")
    page.get_by_label("Top k").fill("20")
    page.get_by_role("combobox", name="Into the round").select_option(label=ROUND)
    page.get_by_role("button", name="Queue the unjudged pairs").click()
    expect(page.get_by_text("queued in round")).to_be_visible()
    assert Round.objects.get(name=ROUND).items.count() > 0

    page.goto(f"{live_server.url}/p/{DEMO_PROJECT['slug']}/evaluations/leaderboard/")
    expect(page.get_by_role("heading", name="Leaderboard")).to_be_visible()
    expect(page.get_by_role("cell", name="dense-e5")).to_be_visible()
