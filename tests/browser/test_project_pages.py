"""The project's menu and the lead's report pages as a person sees them at 1366 and 390 px: the menu on one
line on a laptop whatever the project's name, nothing wider than a phone, documents opening in place."""

import re

import pytest
from playwright.sync_api import expect

from judgments.demo import DEMO_PASSWORD, DEMO_PROJECT, ROUND
from judgments.models import Project, Round

from .conftest import fresh_page, log_in

pytestmark = pytest.mark.browser

LONG_NAME = "Acme Outdoor: product search for the autumn catalogue, tents, jackets and boots, second relevance study"


def lead_pages(round: Round) -> list[str]:
    base = f"/p/{DEMO_PROJECT['slug']}"
    return [f"{base}/", "/reports/", f"{base}/rounds/{round.uuid}/agreement/", f"{base}/rounds/{round.uuid}/adjudication/",
            f"{base}/rounds/{round.uuid}/flags/", f"{base}/rounds/{round.uuid}/q/q0002/"]


def test_the_project_menu_fits_one_line_at_1366_px_with_a_long_name_cut_and_whole_in_its_title(demo, live_server, browser):
    Project.objects.filter(slug=DEMO_PROJECT["slug"]).update(name=LONG_NAME)
    with fresh_page(browser, viewport={"width": 1366, "height": 768}) as page:
        log_in(page, live_server, "lead", DEMO_PASSWORD)
        page.goto(f"{live_server.url}/p/{DEMO_PROJECT['slug']}/")
        menu = page.get_by_role("navigation", name="Project")
        middles = menu.locator(":scope > ul > li").evaluate_all(
            "items => items.map(li => { const r = li.getBoundingClientRect(); return (r.top + r.bottom) / 2; })")
        assert len(middles) >= 6 and max(middles) - min(middles) <= 6  # one line
        name = menu.locator(".project-name")
        expect(name).to_have_attribute("title", LONG_NAME)
        assert name.bounding_box()["height"] < 60  # one line of text (it took four)
        assert name.evaluate("element => element.scrollWidth > element.clientWidth")  # cut, with an ellipsis
        assert page.evaluate("document.documentElement.scrollWidth") <= 1366
        menu.get_by_text("Data").click()
        menu.get_by_role("link", name="Pools").click()
        expect(page.get_by_role("heading", name="Pools")).to_be_visible()


@pytest.mark.parametrize("viewport", [{"width": 1366, "height": 768}, {"width": 390, "height": 844}], ids=["1366", "390"])
def test_the_lead_s_pages_fit_the_screen_and_documents_open_in_place(demo, live_server, browser, viewport):
    round = Round.objects.get(name=ROUND)
    with fresh_page(browser, viewport=viewport) as page:
        log_in(page, live_server, "lead", DEMO_PASSWORD)
        for path in lead_pages(round):
            page.goto(live_server.url + path)
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= viewport["width"], (path, width)
        brief = page.locator("details.document-brief").first
        expect(brief.locator(".document")).not_to_be_visible()
        brief.locator(":scope > summary").click()
        expect(brief.locator(".document")).to_be_visible()


def test_a_rater_opening_the_project_lands_on_their_work_queue(demo, live_server, browser):
    with fresh_page(browser, viewport={"width": 390, "height": 844}) as page:
        log_in(page, live_server, "rater1", DEMO_PASSWORD)
        page.goto(f"{live_server.url}/p/{DEMO_PROJECT['slug']}/")
        expect(page.get_by_role("heading", name="My work queue")).to_be_visible()
        expect(page.get_by_role("button", name=re.compile("(Start|Continue) grading")).first).to_be_visible()  # the demo rater has two rounds
