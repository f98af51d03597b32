"""/api/docs in chromium: Swagger UI from Verdict's own static files, under the CSP, usable with a token."""

import pytest
from playwright.sync_api import expect

from api.models import ApiToken
from tests.factory import make_project, make_user

from .conftest import fresh_page
from .test_content_security_policy import Watch

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", [1366, 390])
def test_the_docs_render_offline_and_try_a_request_with_a_token(transactional_db, live_server, browser, width):
    lead = make_user("lena")
    project = make_project(lead)
    _, secret = ApiToken.issue(user=lead, project=project, name="docs", scope="read")
    elsewhere = []
    with fresh_page(browser, viewport={"width": width, "height": 844}) as page:
        watch = Watch(page)
        # Any request to another site is recorded and refused: the page must not need one.
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(live_server.url)
                   else (elsewhere.append(route.request.url), route.abort()))
        page.goto(f"{live_server.url}/api/docs")
        expect(page.locator(".swagger-ui .info .title")).to_contain_text("Verdict")
        page.locator("button.authorize").click()
        page.locator(".auth-container input").fill(secret)
        page.locator(".auth-btn-wrapper button.authorize").click()
        page.locator(".btn-done").click()
        operation = page.locator(".opblock-get", has_text="/api/v1/projects").first
        operation.locator(".opblock-summary").click()
        operation.locator("button.try-out__btn").click()
        operation.locator("button.execute").click()
        expect(operation.locator(".live-responses-table tbody .response-col_status").first).to_have_text("200")
        expect(operation.locator(".live-responses-table")).to_contain_text(project.slug)
    assert not elsewhere, f"the docs page asked other sites for {elsewhere}"
    assert not watch.problems, watch.problems
