"""What only a browser shows: logging in, the project page, a live progress bar."""

import pytest
from playwright.sync_api import expect

from judgments.demo import DEMO_PASSWORD, DEMO_PROJECT
from judgments.jobs import execute_job
from judgments.models import Job

from .conftest import log_in

pytestmark = pytest.mark.browser


def test_the_demo_lead_logs_in_and_opens_the_demo_project(demo, live_server, page):
    log_in(page, live_server, "lead", DEMO_PASSWORD)
    expect(page.get_by_role("heading", name="Projects")).to_be_visible()
    page.get_by_role("link", name=DEMO_PROJECT["name"]).click()
    expect(page.get_by_role("heading", name=DEMO_PROJECT["name"])).to_be_visible()
    expect(page.get_by_text("You manage this project")).to_be_visible()


def test_a_wrong_password_is_refused_with_a_message(demo, live_server, page):
    log_in(page, live_server, "lead", "not-the-password")
    expect(page.get_by_role("alert")).to_contain_text("enter a correct username and password")


def test_the_job_page_follows_a_job_to_the_end_without_a_reload(demo, live_server, page):
    log_in(page, live_server, "lead", DEMO_PASSWORD)
    page.goto(f"{live_server.url}/p/{DEMO_PROJECT['slug']}/")
    page.get_by_role("button", name="Run a worker self-check").click()
    expect(page.get_by_text("Waiting for a worker")).to_be_visible()
    execute_job(Job.objects.get(kind="selfcheck").pk)  # stands in for the worker
    expect(page.locator("[data-state=succeeded]")).to_be_visible()
    expect(page.locator(".job-progress")).not_to_have_attribute("hx-trigger", "every 1s")


def test_a_lead_changes_a_role_in_place_with_htmx(demo, live_server, page):
    log_in(page, live_server, "lead", DEMO_PASSWORD)
    page.goto(f"{live_server.url}/p/{DEMO_PROJECT['slug']}/members/")
    page.get_by_label("Role of rater2").select_option("viewer")
    page.get_by_role("row", name="rater2").get_by_role("button", name="Change").click()
    expect(page.get_by_text("Members updated.")).to_be_visible()
    assert page.url.endswith("/members/")
    expect(page.get_by_label("Role of rater2")).to_have_value("viewer")
