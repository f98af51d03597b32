"""What only a browser shows: logging in, the project page, a live progress bar."""

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from playwright.sync_api import expect

from judgments.demo import DEMO_PASSWORD, DEMO_PROJECT
from judgments.models import Job
from judgments.ops.jobs import execute_job

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


def test_wrong_passwords_pause_logging_in_until_the_unlock_command_lifts_it(demo, live_server, page, settings):
    settings.AXES_FAILURE_LIMIT = 3
    for _ in range(2):
        log_in(page, live_server, "lead", "not-the-password")
        expect(page.get_by_role("alert")).to_contain_text("enter a correct username and password")
    log_in(page, live_server, "lead", "not-the-password")
    expect(page.get_by_role("alert")).to_contain_text("Logging in is paused: too many failed attempts")
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("ask an administrator of this Verdict to unlock it now")
    call_command("unlock_login", "lead", stdout=io.StringIO())
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Projects")).to_be_visible()


def test_a_lead_invites_by_e_mail_and_the_invitee_accepts_through_the_link(demo, live_server, browser):
    from .conftest import fresh_page

    with fresh_page(browser) as lead:
        log_in(lead, live_server, "lead", DEMO_PASSWORD)
        lead.goto(f"{live_server.url}/p/{DEMO_PROJECT['slug']}/members/")
        lead.get_by_label("E-mail").fill("newcomer@example.com")
        lead.get_by_label(re.compile(r"^Role:?$")).select_option("viewer")
        lead.get_by_role("button", name="Invite").click()
        expect(lead.get_by_text("Invitation for newcomer@example.com created: share its link below with them.")).to_be_visible()
        link = lead.get_by_label("Link to share with newcomer@example.com").input_value()
    get_user_model().objects.create_user("newcomer", email="newcomer@example.com", password=DEMO_PASSWORD)
    with fresh_page(browser) as invitee:
        invitee.goto(link)
        expect(invitee.get_by_text("Verdict has no sign-up")).to_be_visible()
        invitee.get_by_role("button", name="Log in to accept").click()
        invitee.get_by_label("Username").fill("newcomer")
        invitee.get_by_label("Password").fill(DEMO_PASSWORD)
        invitee.get_by_role("button", name="Log in").click()
        invitee.get_by_role("button", name=f"Join {DEMO_PROJECT['name']} as viewer").click()
        expect(invitee.get_by_text(f"Welcome to {DEMO_PROJECT['name']}: you joined as viewer.")).to_be_visible()
