"""Every page of the app, as each role, on a laptop (1366x768) and a phone (390x844), looked at the way a person
would: a label away from its input, clipped text, a page that scrolls sideways, console errors and CSP violations,
answers of 500 or more, and axe-core's serious and critical accessibility violations in both themes (axe.py). Every problem of the run is reported at once, and every page is saved as a screenshot
under test-results/layout/<size>/<role>/ with an index.html to page through.

The pages come from the URLconf, so a new page is visited without being listed here; the objects that fill
their URLs come from the hostile-parameter test's world (tests/config/test_url_parameters.py), where every new
page must register its URL's values anyway."""

import html
import os
import re
import shutil
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest
from django.conf import settings
from django.contrib.auth.tokens import default_token_generator
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from judgments.demo import DEMO_PROJECT
from judgments.models import Invitation, Project, QueryCollection
from tests.config.test_url_parameters import build_world
from tests.factory import make_user

from .axe import audit, failing, report
from .test_content_security_policy import Watch

pytestmark = pytest.mark.browser

SIZES = {
    "laptop": {"viewport": {"width": 1366, "height": 768}},
    "phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True},
}
SCREENSHOTS = Path(os.environ.get("LAYOUT_SCREENSHOTS", settings.BASE_DIR / "test-results" / "layout"))
SKIPPED_NAMESPACES = {"admin"}  # Django's own pages, styled by Django
# The REST API answers JSON and files, not pages (tests/api covers it); its docs page is looked at.
NOT_PAGES = re.compile(r"^api:(?!openapi-view$)")
MISSING_PAGE = "/p/no-such-project/"  # the 404 page, as each role meets it
ONLY = re.compile(os.environ.get("LAYOUT_PAGES", ""))  # a regular expression: look at the pages it finds in their names

LOOK = (Path(__file__).parent / "layout_check.js").read_text()  # called with MAX_LABEL_GAP
MAX_LABEL_GAP = 24  # px between a label's words and its input


def walk(patterns, namespace=""):
    """(url name, route pattern) of every page in the URLconf, but the skipped namespaces'."""
    for entry in patterns:
        if isinstance(entry, URLResolver):
            if entry.namespace in SKIPPED_NAMESPACES:
                continue
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from walk(entry.url_patterns, inner)
        elif isinstance(entry, URLPattern) and entry.name and not NOT_PAGES.match(f"{namespace}{entry.name}"):
            yield f"{namespace}{entry.name}", entry


def page_urls(world: dict, problems: list[str]) -> list[tuple[str, str]]:
    """(label, path) of every page, its URL filled from the world, and once more with the valid query string
    the world has for it (a sample preview, a chosen measure...). A page the world has no values for is a
    problem: it would go unseen."""
    # A password reset link stays valid until its user logs in, so it is not one of the roles' users.
    forgetful = make_user("forgetful")
    query_set = QueryCollection.objects.get(uuid=world["kwargs"]["set_uuid"])
    kwargs_of = {
        "judgments:query-edit": {"query_id": query_set.queries.order_by("query_id").first().query_id},  # one of that set
        "judgments:invitation": {"token": Invitation.objects.get(project__slug=DEMO_PROJECT["slug"], accepted_at=None).token},
        "password_reset_confirm": {"uidb64": urlsafe_base64_encode(force_bytes(forgetful.pk)),
                                   "token": default_token_generator.make_token(forgetful)},
    }
    pages = []
    for name, pattern in walk(get_resolver().url_patterns):
        label, values = name.replace(":", "-"), {**world["kwargs"], **world["kwargs_of"].get(name, {}), **kwargs_of.get(name, {})}
        if not ONLY.search(label):
            continue
        if unknown := set(pattern.pattern.converters) - set(values):
            problems.append(f"{name} is not looked at: no value for {sorted(unknown)}; add one to build_world in "
                            "tests/config/test_url_parameters.py")
            continue
        path = reverse(name, kwargs={key: values[key] for key in pattern.pattern.converters})
        pages.append((label, path))
        if query := world["valid"].get(name):
            pages.append((f"{label}-with-{'-'.join(list(query)[:2])}", path + "?" + urlencode(query)))
    return pages + [("not-found", MISSING_PAGE)]


def to_look_at(client: Client, pages: list[tuple[str, str]], problems: list[str], role: str) -> list[tuple[str, str]]:
    """The pages this role gets as an HTML page (asked in-process, which is quick): one of each distinct page
    it lands on, and only the first of its error pages of each status."""
    chosen, seen = [], set()
    for label, path in pages:
        response = client.get(path, follow=True)
        status = response.status_code
        if status >= 500:
            problems.append(f"{role}: {path} answers {status}")
            continue
        if status in (405, 410) or "text/html" not in response.get("Content-Type", "") or response.streaming:
            continue  # a form's target, a download
        if not response.content.lstrip().lower().startswith(b"<!doctype html"):
            continue  # an htmx fragment: looked at inside its page
        # A page sent elsewhere (a visitor to the login page) is that page; its own query string makes another.
        query = "" if response.redirect_chain else urlsplit(path).query
        where = response.request["PATH_INFO"] + (f"?{query}" if query else "")
        key = status if status >= 400 else where
        if key not in seen:
            seen.add(key)
            chosen.append((label, path))
    return chosen


def write_index(shots: list[tuple[str, str, str, str, list[str], str]], unseen: list[str]) -> Path:
    """A page listing the problems no screenshot shows (a page not looked at, a 500), then every screenshot
    (size, role, page, its problems), the pages with problems first, in red."""
    rows = "\n".join(
        f'<tr{" class=bad" if found else ""}><td>{size}</td><td>{role}</td><td><a href="{html.escape(file)}">{html.escape(label)}</a>'
        f'<br><small>{html.escape(path)}</small></td><td>{"<br>".join(html.escape(p) for p in found) or "ok"}</td>'
        f'<td><a href="{html.escape(file)}"><img src="{html.escape(file)}" loading="lazy" alt=""></a></td></tr>'
        for size, role, label, path, found, file in sorted(shots, key=lambda shot: not shot[4]))
    index = SCREENSHOTS / "index.html"
    index.write_text(f"""<!doctype html><meta charset="utf-8"><title>Verdict layout screenshots</title>
<style>body {{ font: 14px system-ui; margin: 1rem; }} td {{ vertical-align: top; padding: .3rem .6rem; border-bottom: 1px solid #ddd; }}
img {{ width: 240px; max-height: 320px; object-fit: cover; object-position: top; }} .bad td, p.bad {{ background: #fdecea; }}</style>
<h1>Verdict: every page, each role, laptop and phone</h1>
<p>{len(shots)} screenshots, {sum(1 for shot in shots if shot[4])} with problems (red).</p>
{"".join(f"<p class=bad>{html.escape(problem)}</p>" for problem in unseen)}
<table><tr><th>Size</th><th>Role</th><th>Page</th><th>Problems</th><th>Screenshot</th></tr>
{rows}</table>""")
    return index


@pytest.fixture
def layout_world(transactional_db, tmp_path, settings):
    settings.EMAIL_ENABLED = True  # so that the password reset pages exist
    world = build_world(tmp_path)
    project = Project.objects.get(slug=DEMO_PROJECT["slug"])
    round_ = project.rounds.get(uuid=world["kwargs"]["round_uuid"])
    second_rater = round_.raters.exclude(pk=world["users"]["rater"].pk).order_by("username").first()
    roles = {"lead": world["users"]["lead"], "rater": world["users"]["rater"], "second-rater": second_rater,
             "viewer": world["users"]["viewer"], "anonymous": None}
    return world, roles


def test_every_page_reads_well_for_every_role_on_a_laptop_and_a_phone(layout_world, live_server, browser):
    world, roles = layout_world
    unseen, problems, shots = [], [], []  # problems no screenshot shows, the others, the screenshots
    inaccessible = []  # axe's serious and critical violations (tests/browser/axe.py)
    pages = page_urls(world, unseen)
    for size in SIZES:
        shutil.rmtree(SCREENSHOTS / size, ignore_errors=True)  # the index shows this run only
    for role, user in roles.items():
        client = Client(raise_request_exception=False)
        if user:
            client.force_login(user)
        visits = to_look_at(client, pages, unseen, role)
        cookies = [{"name": settings.SESSION_COOKIE_NAME, "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                    "url": live_server.url}] if user else []
        for size, options in SIZES.items():
            context = browser.new_context(**options)
            context.add_cookies(cookies)
            page = context.new_page()
            page.set_default_timeout(15_000)
            watch, failed = Watch(page), []
            page.on("response", lambda response: failed.append(f"{response.url} answered {response.status}") if response.status >= 500 else None)
            folder = SCREENSHOTS / size / role
            folder.mkdir(parents=True, exist_ok=True)
            for label, path in visits:
                watch.problems.clear()
                failed.clear()
                status = page.goto(live_server.url + path).status
                # An error page (403, 404) is looked at on purpose: chromium logs its status as a console error.
                said = [re.sub(r"^\S+: ", "", problem) for problem in watch.problems
                        if f"responded with a status of {status} " not in problem]
                found = page.evaluate(LOOK, MAX_LABEL_GAP) + said + failed
                file = folder / f"{label}.png"
                page.screenshot(path=file, full_page=True)
                inaccessible += failing(audit(page, f"{urlsplit(path).path} as {role} on a {size}"))
                shots.append((size, role, label, path, found, str(file.relative_to(SCREENSHOTS))))
                problems += [f"{size} {role} {urlsplit(path).path}: {problem}" for problem in found]
            context.close()
    index = write_index(shots, unseen)
    problems = unseen + problems
    if not ONLY.pattern:
        assert len({shot[2] for shot in shots}) > 50, "the suite no longer finds the app's pages"
    assert not problems and not inaccessible, \
        f"{len(problems)} layout problems (screenshots: {index}):\n" + "\n".join(problems) + "\n" + report(inaccessible)
