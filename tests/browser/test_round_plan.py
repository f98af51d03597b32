"""A lead plans a draft round in the browser: raters label a random sample of N queries (N suggested from a
target width with the demo's calibrated judge), the judge the rest; raters cannot open the plan (403)."""

import pytest
from playwright.sync_api import expect

from judgments.demo import DEMO_PASSWORD
from judgments.models import HumanSample, Round
from judgments.ops import planning, rounds

from .conftest import fresh_page, log_in

pytestmark = pytest.mark.browser


def test_a_lead_plans_a_sample_from_a_suggested_n_and_raters_cannot_see_the_plan(demo, live_server, browser):
    launch = Round.objects.get(name="Launch round 1")
    draft = rounds.create_round(launch.project, name="Planned relabel", pool=launch.pool, guidelines=launch.guidelines,
                                scale=launch.grading_scale, raters=list(launch.raters.all()), user=launch.created_by)
    [judge] = planning.calibrated_judges(launch.project)
    expected = planning.suggest_size(draft, half_width=0.1, measure="nDCG@10", judge=judge,
                                     run=launch.pool.runs.get(name="bm25-baseline")).n
    with fresh_page(browser) as lead, fresh_page(browser) as rater:
        log_in(lead, live_server, "lead", DEMO_PASSWORD)
        lead.goto(f"{live_server.url}{draft.get_absolute_url()}")
        lead.get_by_role("button", name="Plan a random sample for raters, the judge labels the rest").click()
        expect(lead.get_by_label("Draw within tiers")).to_be_checked()  # the demo's queries have tiers
        lead.get_by_label("Target interval half-width (±)").fill("0.1")
        lead.get_by_label("Run scored").select_option(label="bm25-baseline")
        lead.get_by_role("button", name="Suggest N from the target half-width").click()
        expect(lead.get_by_text(f"{expected} of 250 queries", exact=True)).to_be_visible()
        expect(lead.get_by_label("Queries raters label (N)")).to_have_value(str(expected))
        lead.get_by_label("Seed").fill("42")
        lead.get_by_role("button", name="Draw the sample").click()
        expect(lead.get_by_text(f"{expected} of 250 queries labelled by raters")).to_be_visible()
        expect(lead.locator(".round-plan")).to_contain_text("seed 42, within tiers")

        log_in(rater, live_server, "rater1", DEMO_PASSWORD)
        response = rater.goto(f"{live_server.url}{draft.get_absolute_url()}plan/")
        assert response.status == 403
    sample = HumanSample.objects.get(round=draft)
    assert (sample.size, sample.seed, sample.by_tier, sample.suggested_from["judge"]) == (expected, 42, True, "overlap")
