"""Browser tests drive Debian's chromium through Playwright (no browser download is possible here)."""

import os
from contextlib import contextmanager
from pathlib import Path

import pytest

from .axe import audit, failing, report

CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: install Debian's chromium package to run the browser tests"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI must run them)")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the Django ORM calls made by the
    # tests themselves are still synchronous and safe.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )
        yield browser
        browser.close()


@contextmanager
def fresh_page(browser, **context_options):
    """A page in a browser context of its own: its own cookies, so its own logged-in user.
    `context_options` go to Playwright's new_context (viewport, java_script_enabled, has_touch...).

    Every page it opens (page.goto), and the page as the test leaves it, is checked with axe-core in both themes:
    a serious or critical violation (or one of axe.ALWAYS_FAILING) fails the test that passed otherwise, all listed."""
    context = browser.new_context(**context_options)
    page = context.new_page()
    page.set_default_timeout(15_000)
    scripts = context_options.get("java_script_enabled", True)  # axe is a script: a page without them goes unchecked
    found = audit_every_goto(page) if scripts else []
    try:
        yield page
        found += audit(page) if scripts else []
    finally:
        context.close()
    assert not failing(found), report(failing(found))


def screenshots(page, live_server, folder, pages: dict[str, str]) -> None:
    """Full-page screenshots of `pages` ({name: path}) as the user `page` is logged in as, at a desktop's
    (1366x768) and a phone's (390x844) size, into `folder` as NAME-WIDTH.png; each page audited as it opens."""
    folder.mkdir(parents=True, exist_ok=True)
    cookies = page.context.cookies()
    for width, height in ((1366, 768), (390, 844)):
        with fresh_page(page.context.browser, viewport={"width": width, "height": height}) as shot:
            shot.context.add_cookies(cookies)
            for name, url in pages.items():
                shot.goto(f"{live_server.url}{url}")
                shot.screenshot(path=str(folder / f"{name}-{width}.png"), full_page=True)


def audit_every_goto(page) -> list:
    """Makes page.goto check the page it opened; returns the list the violations go to."""
    found, goto = [], page.goto

    def goto_and_audit(*args, **kwargs):
        response = goto(*args, **kwargs)
        found.extend(audit(page))
        return response

    page.goto = goto_and_audit
    return found


@pytest.fixture
def demo(transactional_db):
    """The demo project (`make run` loads the same), for tests that drive it through the browser."""
    from django.core.management import call_command

    call_command("load_demo")


@pytest.fixture
def page(browser):
    with fresh_page(browser) as page:
        yield page


def log_in(page, live_server, username: str, password: str) -> None:
    page.goto(f"{live_server.url}/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
