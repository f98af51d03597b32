"""Issue #30's "Done when", end to end: the lead plans a round with a random sample of queries for raters, raters grade
the sample (over HTTP), an in-process token-overlap judge labels every pair, and the lead starts "Estimate with a judge"
and reads the estimate page; a rater opening it gets 403."""

import os
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse
from playwright.sync_api import expect

from evaluation.models import JudgeEstimate
from judgments.models import Job, Role
from judgments.ops.jobs import execute_job
from tests.evaluation.test_judge_estimates import QUERIES, SAMPLE_SEED, SAMPLE_SIZE, make_planned_round, overlap_judge_on_every_pair, truth
from tests.factory import PASSWORD, add_member, make_project, make_user

from .conftest import fresh_page, log_in, screenshots

pytestmark = pytest.mark.browser

SHOTS = os.environ.get("VERDICT_SCREENSHOTS")


@pytest.fixture
def draft(transactional_db):
    lead, rater = make_user("lead"), make_user("rita")
    project = make_project(lead, name="Shop search")
    add_member(project, rater, Role.RATER)
    round, _runs = make_planned_round(project, lead, [rater], name="Planned round", open=False, plan=False)
    return round, rater


def grade_over_http(round, rater) -> int:
    """The rater grades every pair served to them, as the grading screen posts it; returns how many."""
    client = Client()
    client.force_login(rater)
    graded = 0
    for item in round.items.filter(required__gt=0).select_related("query", "document"):
        url = reverse("judgments:grade-item", args=[round.project.slug, round.uuid, item.uuid])
        response = client.post(url, {"grade": truth(item.query.query_id, item.document.doc_id)})
        assert response.status_code == 302, response.content.decode()[:2000]
        graded += 1
    return graded


def test_the_lead_plans_a_sample_a_judge_labels_the_rest_and_the_estimate_page_is_for_leads_only(draft, live_server, page, browser):
    round, rater = draft
    project = round.project
    log_in(page, live_server, "lead", PASSWORD)
    page.goto(f"{live_server.url}{round.get_absolute_url()}")
    page.get_by_role("button", name="Plan a random sample for raters, the judge labels the rest").click()
    page.get_by_label("Queries raters label (N)").fill(str(SAMPLE_SIZE))
    page.get_by_label("Seed").fill(str(SAMPLE_SEED))
    page.get_by_role("button", name="Draw the sample").click()
    page.goto(f"{live_server.url}{round.get_absolute_url()}")
    page.get_by_role("button", name="Open to raters").click()
    round.refresh_from_db()
    assert round.status == "open" and len(round.human_sample.query_ids) == SAMPLE_SIZE
    assert grade_over_http(round, rater) == 3 * SAMPLE_SIZE  # three pairs a sampled query; the rest are the judge's
    judge = overlap_judge_on_every_pair(round)

    page.goto(f"{live_server.url}/p/{project.slug}/evaluations/")
    page.get_by_role("button", name="Estimate with a judge").click()
    expect(page.get_by_role("heading", name="Estimate with a judge")).to_be_visible()
    page.get_by_label("Round").select_option(label="Planned round")
    page.get_by_label("Automatic judge").select_option(label=f"{judge.name} (Planned round)")
    for name in ("good", "mid", "poor"):
        page.get_by_label(name, exact=True).check()
    page.get_by_role("button", name="Estimate").click()
    expect(page.get_by_role("heading", name="Estimate with a judge on Planned round")).to_be_visible()
    execute_job(Job.objects.get(kind="estimate_with_judge").pk)  # stands in for the worker
    page.reload()
    found = JudgeEstimate.objects.get()
    expect(page.locator("#sample-note")).to_contain_text(f"raters labelled {SAMPLE_SIZE} of the {len(QUERIES)} queries")
    expect(page.locator("#sample-note")).to_contain_text(f"seed {SAMPLE_SEED}")
    good = found.results["runs"][0]["measures"]["nDCG@10"]
    row = page.get_by_role("row", name="good").first
    expect(row).to_contain_text(f"{good['ppi']['mean']:.4f}")
    expect(row).to_contain_text(f"{good['judge_mean']:.4f} judge")
    expect(page.get_by_role("heading", name="nDCG@10: comparisons")).to_be_visible()

    if SHOTS:
        screenshots(page, live_server, Path(SHOTS), {
            "estimates": f"/p/{project.slug}/estimates/", "estimate-form": f"/p/{project.slug}/estimates/new/",
            "estimate": found.get_absolute_url(), "evaluations": f"/p/{project.slug}/evaluations/",
            "evaluation-form": f"/p/{project.slug}/evaluations/new/"})

    with fresh_page(browser) as as_rater:
        log_in(as_rater, live_server, "rita", PASSWORD)
        response = as_rater.goto(f"{live_server.url}{found.get_absolute_url()}")
        assert response.status == 403
        expect(as_rater.get_by_text("does not allow")).to_be_visible()
