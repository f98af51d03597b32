"""A lead sees the demo's firing staleness triggers on the overview and the health page, follows the drift
remedy to draw a refresh sample, evaluates the new run in one click, and snoozes a trigger with a reason."""

import re

import pytest
from playwright.sync_api import expect

from judgments.demo import DEMO_PASSWORD, DEMO_PROJECT, NEW_RUN, NEWER_LOG
from judgments.models import Job
from judgments.ops.jobs import execute_job

from .conftest import log_in

pytestmark = pytest.mark.browser


def test_a_lead_sees_the_firing_trigger_and_follows_its_remedy(demo, live_server, page):
    log_in(page, live_server, "lead", DEMO_PASSWORD)
    page.goto(f"{live_server.url}/p/{DEMO_PROJECT['slug']}/")
    summary = page.locator("section.health-summary")
    expect(summary.get_by_text("Query drift", exact=True)).to_be_visible()
    summary.get_by_role("link", name="The health page").click()

    drift = page.locator("#trigger-query_drift")
    expect(drift.get_by_role("heading", name=re.compile("Query drift.*stale", re.I))).to_be_visible()
    expect(drift.get_by_text("Firing since")).to_be_visible()
    drift.get_by_text("head queries in no query set, busiest first").click()
    expect(drift.get_by_text("ski goggles")).to_be_visible()
    drift.get_by_role("link", name="Draw a refresh sample from the new log").click()
    expect(page.get_by_role("heading", name=NEWER_LOG)).to_be_visible()
    expect(page.get_by_role("heading", name="Draw a sample")).to_be_visible()

    page.go_back()
    page.locator("#trigger-new_systems").get_by_role("button", name=f"Evaluate {NEW_RUN}").click()
    execute_job(Job.objects.filter(kind="evaluate_runs").latest("created_at").pk)  # stands in for the worker
    page.reload()
    expect(page.get_by_role("heading", name="Scores")).to_be_visible()

    page.goto(f"{live_server.url}/p/{DEMO_PROJECT['slug']}/health/")
    drift = page.locator("#trigger-query_drift")
    drift.get_by_label("Reason").fill("winter season, sampling in December")
    drift.get_by_role("button", name="Snooze").click()
    expect(page.locator("#trigger-query_drift").get_by_text("winter season, sampling in December")).to_be_visible()
    page.get_by_role("button", name="Check now").click()
    expect(page.get_by_text(re.compile(r"^Checked: [2-5] triggers fire: .*Query drift"))).to_be_visible()  # counted and named
    expect(page.locator("#trigger-new_systems").get_by_role("button", name=f"Evaluate {NEW_RUN}")).to_have_count(0)
