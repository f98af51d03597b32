"""Every page of the demo in chromium under the Content-Security-Policy: nothing is blocked, no script
fails, and htmx still swaps (the policy forbids its injected styles and eval)."""

import re
from urllib.parse import parse_qsl, urljoin, urlsplit

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from judgments.demo import DEMO_PASSWORD, DEMO_PROJECT, ROUND

from .conftest import log_in

pytestmark = pytest.mark.browser

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Files (CSV, JSON, qrels downloads) are fetched, not opened as pages.
DOWNLOAD = re.compile(r"\.[A-Za-z0-9]+$")
MAX_PAGES = 300


class Watch:
    """Collects, for every page the browser shows, CSP violations, console errors and uncaught exceptions."""

    def __init__(self, page):
        self.problems: list[str] = []
        page.add_init_script("""document.addEventListener("securitypolicyviolation", function (e) {
            console.error("CSP violation: " + e.violatedDirective + " blocked " + (e.blockedURI || "inline") +
                          " at " + e.sourceFile + ":" + e.lineNumber);
        });""")
        page.on("console", self.console)
        page.on("pageerror", lambda error: self.problems.append(f"{page.url}: {error}"))
        self.page = page

    def console(self, message) -> None:
        # The admin's pages name no icon, so chromium asks for /favicon.ico, which is not there.
        if message.type == "error" and not message.location.get("url", "").endswith("/favicon.ico"):
            self.problems.append(f"{self.page.url}: {message.text}")


def shape(url: str) -> str:
    """Pages that differ only in ids, or in the values of the same query parameters, are one kind of page."""
    parts = urlsplit(url)
    path = re.sub(r"/(q|d)/.*", r"/\1/ID/", UUID.sub("UUID", parts.path))
    path = re.sub(r"/\d+/", "/N/", re.sub(r"/v\d+/", "/vN/", path))
    return path + "?" + ",".join(sorted({key for key, _ in parse_qsl(parts.query)}))


def open_every_page(page, live_server, start: str, *, within: str = "/", skip: str = r"^/admin/") -> set[str]:
    """Open `start` and every page its links lead to under `within` (one of each shape) but those whose path and
    query match `skip`; returns the shapes."""
    seen, queue = set(), [live_server.url + start]
    while queue:
        url = queue.pop(0)
        if shape(url) in seen:
            continue
        seen.add(shape(url))
        assert len(seen) <= MAX_PAGES, "the crawl does not end"
        if DOWNLOAD.search(urlsplit(url).path):
            assert page.request.get(url).status == 200, url
            continue
        response = page.goto(url)
        assert response.status == 200, url
        assert "script-src 'self'" in response.headers.get("content-security-policy", ""), url
        for href in page.eval_on_selector_all("a[href]", "links => links.map(a => a.getAttribute('href'))"):
            target = urljoin(page.url, href).split("#")[0]
            parts = urlsplit(target)
            local = parts.path + (f"?{parts.query}" if parts.query else "")
            if target.startswith(live_server.url) and parts.path.startswith(within) and not re.search(skip, local):
                queue.append(target)
    return seen


@pytest.fixture
def watched(page):
    return Watch(page)


def test_every_page_a_lead_sees_obeys_the_policy(demo, live_server, page, watched):
    log_in(page, live_server, "lead", DEMO_PASSWORD)
    shapes = open_every_page(page, live_server, "/")
    assert len(shapes) > 40, shapes  # projects, rounds, reports, pools, runs, logs, evaluations...
    assert any("/agreement/" in s for s in shapes) and any("/evaluations/UUID/compare/" in s for s in shapes), shapes

    page.goto(f"{live_server.url}/p/{DEMO_PROJECT['slug']}/runs/")
    page.get_by_label("Coverage of").select_option(index=1)  # verdict.js submits the form on change
    expect(page).to_have_url(re.compile(r"\?query_set="))
    assert not watched.problems, "\n".join(watched.problems)


def test_every_page_a_rater_sees_obeys_the_policy_and_grading_swaps_the_next_pair(demo, live_server, page, watched):
    log_in(page, live_server, "rater1", DEMO_PASSWORD)
    shapes = open_every_page(page, live_server, "/")
    assert any(s.endswith("/grade/?") for s in shapes), shapes

    page.goto(live_server.url + "/queue/")
    # The demo's rater has two rounds open (documents and answers): this walks the document round.
    page.locator("article", has=page.get_by_role("heading", name=ROUND)).get_by_role("button", name="Continue grading").click()
    grader = page.locator("#grader")
    shown = grader.get_attribute("data-item")
    page.keyboard.press("2")
    expect(grader).not_to_have_attribute("data-item", shown)
    assert page.url.endswith("/grade/")  # swapped in place by htmx, not a page load
    assert not watched.problems, "\n".join(watched.problems)


def test_the_admin_works_under_the_policy(demo, live_server, page, watched):
    get_user_model().objects.create_superuser("root", "root@verdict.example", DEMO_PASSWORD)
    log_in(page, live_server, "root", DEMO_PASSWORD)
    # Every model's list, add form and one change form; not their filtered lists, delete and history pages,
    # nor "view on site" (the superuser is in no project).
    shapes = open_every_page(page, live_server, "/admin/", within="/admin/", skip=r"\?|/(delete|history)/$|^/admin/r/")
    assert any(s.endswith("/change/?") for s in shapes) and any(s.endswith("/add/?") for s in shapes), shapes
    page.goto(live_server.url + "/admin/auth/user/add/")
    page.get_by_label("Username").fill("newcomer")
    page.locator("#id_password1").fill("a long enough passphrase 7")
    page.locator("#id_password2").fill("a long enough passphrase 7")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    assert not watched.problems, "\n".join(watched.problems)
