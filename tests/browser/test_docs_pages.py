"""The docs served by the app (/docs/), in chromium at a laptop's and a phone's width: the page and its side list
fit the screen, under the Content-Security-Policy, with no serious accessibility violation (fresh_page's axe
audit). Screenshots go to test-results/docs/."""

import pytest
from django.conf import settings as django_settings
from playwright.sync_api import expect

from tests.docs.test_docs_view import write_sample_docs

from .conftest import fresh_page
from .test_content_security_policy import Watch

pytestmark = pytest.mark.browser

SHOTS = django_settings.BASE_DIR / "test-results" / "docs"


@pytest.mark.parametrize("width", [1366, 390])
def test_a_docs_page_fits_the_screen_with_its_list_of_pages(transactional_db, live_server, browser, settings, tmp_path, width):
    settings.DOCS_DIR = write_sample_docs(tmp_path)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with fresh_page(browser, viewport={"width": width, "height": 844}) as page:
        watch = Watch(page)
        page.goto(f"{live_server.url}/docs/leads/judges/")
        expect(page.get_by_role("heading", name="Calibration report")).to_be_visible()
        nav = page.get_by_role("navigation", name="Docs")
        expect(nav.get_by_role("link", name="Automatic judges")).to_have_attribute("aria-current", "page")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), "the page scrolls sideways"
        beside = page.evaluate("""() => { const nav = document.querySelector('.docs-nav').getBoundingClientRect();
            const text = document.querySelector('.docs-page').getBoundingClientRect(); return nav.right <= text.left; }""")
        assert beside == (width >= 1024), "the list of pages is a column beside the page on a wide screen, below it on a phone"
        page.screenshot(path=str(SHOTS / f"leads-judges-{width}.png"), full_page=True)
        page.get_by_role("link", name="the agreement report").click()
        expect(page).to_have_url(f"{live_server.url}/docs/leads/agreement/#agreement-report")
    assert not watch.problems, watch.problems
