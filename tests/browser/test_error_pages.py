"""The 403 and 404 pages as a rater sees them, on a laptop and a phone: the reason, the way back, the
app's menu, nothing wider than the screen and no console errors (the Content-Security-Policy allows no
inline style or script); a refused htmx request says why too. Screenshots go to var/screenshots/ (git-ignored)."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from judgments.demo import DEMO_PASSWORD, DEMO_PROJECT
from judgments.models import Job, Membership, Project, Role

from .conftest import fresh_page, log_in

pytestmark = pytest.mark.browser

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
VIEWPORTS = {"laptop": {"width": 1366, "height": 768}, "phone": {"width": 390, "height": 844}}


@pytest.mark.parametrize("device", VIEWPORTS)
def test_a_rater_sees_why_a_page_is_refused_and_the_way_back(demo, live_server, browser, device):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with fresh_page(browser, viewport=VIEWPORTS[device]) as page:
        errors = []
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        log_in(page, live_server, "rater1", DEMO_PASSWORD)
        response = page.goto(f"{live_server.url}/p/{DEMO_PROJECT['slug']}/settings/")
        assert response.status == 403
        expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
        expect(page.get_by_role("alert")).to_have_text(
            "Your role (rater) does not allow changing the project and its work: only its leads may.")
        expect(page.get_by_text("ask a lead of")).to_contain_text("(lead) to change your role")
        back = page.get_by_role("link", name=f"Back to {DEMO_PROJECT['name']}")
        expect(back).to_be_visible()
        page.screenshot(path=SCREENSHOTS / f"error-403-{device}.png", full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORTS[device]["width"]

        response = page.goto(f"{live_server.url}/no/such/page/")
        assert response.status == 404
        expect(page.get_by_role("alert")).to_have_text("There is no page at this address.")
        expect(page.get_by_role("link", name="Your projects").last).to_be_visible()
        page.screenshot(path=SCREENSHOTS / f"error-404-{device}.png", full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORTS[device]["width"]

        back_response = page.goto(f"{live_server.url}/p/{DEMO_PROJECT['slug']}/settings/")
        assert back_response.status == 403
        page.get_by_role("link", name=f"Back to {DEMO_PROJECT['name']}").click()
        # A rater opening the project lands on their work queue.
        expect(page.get_by_role("heading", name="My work queue")).to_be_visible()
        # The 4xx responses themselves are logged by chromium as failed loads; anything else is an error.
        assert [e for e in errors if "status of 40" not in e] == []


def test_a_refused_htmx_request_shows_the_reason_instead_of_doing_nothing(demo, live_server, browser):
    """htmx swaps no error answer: the page's message area gets the error page's message."""
    project = Project.objects.get(slug=DEMO_PROJECT["slug"])
    job = Job.objects.create(kind="selfcheck", project=project, owner=project.created_by, state=Job.State.FAILED, error="Boom")
    with fresh_page(browser, viewport=VIEWPORTS["laptop"]) as page:
        log_in(page, live_server, "lead", DEMO_PASSWORD)
        page.goto(f"{live_server.url}{job.get_absolute_url()}")
        Membership.objects.filter(project=project, user__username="lead").update(role=Role.VIEWER)  # demoted meanwhile
        page.get_by_role("button", name="Retry").click()
        expect(page.locator("#messages .message-error")).to_have_text(
            "Your role (viewer) does not allow changing the project and its work: only its leads may.")
        page.screenshot(path=SCREENSHOTS / "error-htmx-403-laptop.png")
    job.refresh_from_db()
    assert job.state == Job.State.FAILED
