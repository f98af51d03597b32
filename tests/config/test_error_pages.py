"""Error pages: a 403 that names the role and what it may not do, with the way back; a 404 that never lists
the URL patterns; a 500 that renders without the database; a refused form token; no traceback in the log
for an ordinary refusal."""

import io
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import DatabaseError
from django.test import Client, RequestFactory
from django.urls import get_resolver, reverse

from judgments import access

ROOT = Path(__file__).resolve().parents[2]


def test_a_rater_refused_a_leads_page_is_told_their_role_what_it_may_not_do_and_whom_to_ask(people):
    response = people.client("rater").get(reverse("judgments:project-settings", args=[people.project.slug]))
    assert response.status_code == 403
    page = response.content.decode()
    assert "Your role (rater) does not allow changing the project and its work: only its leads may." in page
    assert f"ask a lead of {people.project.name} (lena) to change your role" in page
    assert f'href="{people.project.get_absolute_url()}">Back to {people.project.name}</a>' in page
    assert 'href="/static/css/verdict.css"' in page and 'aria-label="Main"' in page  # the app's layout and menu


def test_a_viewer_is_told_that_grading_is_for_leads_and_raters(people):
    from tests.factory import make_round

    round = make_round(people.project, people.lead, [people.rater])
    response = people.client("viewer").get(reverse("judgments:grade", args=[people.project.slug, round.uuid]))
    assert response.status_code == 403
    assert "Your role (viewer) does not allow grading: leads and raters may." in response.content.decode()


def test_a_rater_is_told_that_reports_are_for_leads_and_viewers(people):
    response = people.client("rater").get(reverse("judgments:jobs", args=[people.project.slug]))
    assert response.status_code == 403
    assert "Your role (rater) does not allow reading reports and exports: leads and viewers may." in response.content.decode()


def test_an_outsider_gets_a_styled_404_without_a_link_to_the_project(people):
    response = people.client("outsider").get(reverse("judgments:project-settings", args=[people.project.slug]))
    assert response.status_code == 404
    page = response.content.decode()
    assert "<h1>Not found</h1>" in page and "No such project." in page
    assert people.project.name not in page and "change your role" not in page
    assert 'href="/projects/"' in page or reverse("judgments:projects") in page


def test_an_unknown_address_gets_the_404_page_not_the_url_patterns(people):
    response = people.client("lead").get("/no/such/page/")
    assert response.status_code == 404
    page = response.content.decode()
    assert "There is no page at this address." in page
    assert "Resolver404" not in page and "p/&lt;slug" not in page and "admin/" not in page


def test_a_logged_out_visitor_on_an_unknown_address_is_offered_the_login(db):
    response = Client().get("/no/such/page/")
    assert response.status_code == 404
    assert f'href="{reverse("login")}">Log in</a>' in response.content.decode()


def test_a_missing_object_in_a_project_links_back_to_the_project(people):
    response = people.client("lead").get(reverse("judgments:job", args=[people.project.slug, "00000000-0000-0000-0000-000000000000"]))
    assert response.status_code == 404
    page = response.content.decode()
    assert "No such job." in page and f"Back to {people.project.name}" in page


def test_an_ordinary_403_is_logged_as_one_warning_without_a_traceback(people, caplog):
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = people.client("rater").get(reverse("judgments:project-settings", args=[people.project.slug]))
    assert response.status_code == 403
    [record] = [r for r in caplog.records if r.name == "django.request"]
    assert record.levelno == logging.WARNING and "Forbidden" in record.getMessage()
    assert record.exc_info is None
    assert "Traceback" not in caplog.text


def test_a_bad_query_parameter_is_logged_without_a_traceback(people, caplog):
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = people.client("lead").get(reverse("judgments:runs", args=[people.project.slug]) + "?query_set=not-a-set")
    assert response.status_code == 400
    [record] = [r for r in caplog.records if r.name == "django.request"]
    assert record.exc_info is None and "Traceback" not in caplog.text


def test_a_server_error_shows_the_styled_500_page(people, monkeypatch):
    def database_down(*args, **kwargs):
        raise DatabaseError("the database went away")

    monkeypatch.setattr(access, "project_for_user", database_down)
    client = Client(raise_request_exception=False)
    client.force_login(people.lead)
    response = client.get(reverse("judgments:project", args=[people.project.slug]))
    assert response.status_code == 500
    page = response.content.decode()
    assert "<h1>Something went wrong</h1>" in page and 'href="/static/css/verdict.css"' in page
    assert "database went away" not in page


def test_the_500_page_renders_without_a_database_or_a_user():
    """No `db` fixture: pytest-django refuses every query, so rendering must need none."""
    handler = get_resolver().resolve_error_handler(500)
    response = handler(RequestFactory().get("/p/anything/"))
    assert response.status_code == 500
    assert "Something went wrong" in response.content.decode()


def test_a_form_sent_without_its_token_gets_the_styled_403_saying_what_to_do(people):
    client = Client(enforce_csrf_checks=True)
    client.force_login(people.lead)
    response = client.post(reverse("judgments:project-settings", args=[people.project.slug]), {"name": "Renamed"})
    assert response.status_code == 403
    page = response.content.decode()
    assert "Form expired" in page and "reload the page and send the form again" in page
    people.project.refresh_from_db()
    assert people.project.name != "Renamed"


@pytest.mark.parametrize("client_for", ["anonymous", "lead"])
def test_favicon_ico_points_at_the_svg_icon_every_page_links(people, client_for):
    client = Client() if client_for == "anonymous" else people.client("lead")
    response = client.get("/favicon.ico")
    assert response.status_code == 302 and response["Location"] == "/static/img/favicon.svg"
    page = client.get(reverse("login") if client_for == "anonymous" else reverse("judgments:projects")).content.decode()
    assert '<link rel="icon" href="/static/img/favicon.svg" type="image/svg+xml">' in page


PRODUCTION_CHECK = """
import django, re
django.setup()
from django.core.management import call_command
from django.templatetags.static import static
from django.test import Client
call_command("collectstatic", "--no-input", verbosity=0)
client = Client()
icon = static("img/favicon.svg")
served = client.get(icon)
print(icon, served.status_code, served["Content-Type"])
print(client.get("/favicon.ico")["Location"])
missing = client.get("/no/such/page/")
print(missing.status_code, "There is no page at this address." in missing.content.decode())
print(re.search(r'<link rel="icon" href="([^"]+)"', client.get("/accounts/login/").content.decode()).group(1))
"""


def test_with_debug_off_the_favicon_is_served_and_linked_and_errors_use_the_app_pages(tmp_path):
    """The production settings (DEBUG off, WhiteNoise and hashed static names) in a process of their own."""
    env = {**{k: v for k, v in os.environ.items() if k != "DATABASE_URL"}, "DEBUG": "false", "SECRET_KEY": "s" * 50,
           "ALLOWED_HOSTS": "testserver", "VERDICT_VAR_DIR": str(tmp_path), "SECURE_COOKIES": "false",
           "DJANGO_SETTINGS_MODULE": "config.settings"}
    result = subprocess.run([sys.executable, "-c", PRODUCTION_CHECK], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    icon_line, redirect, missing, linked = result.stdout.splitlines()
    icon, status, content_type = icon_line.split()
    assert re.fullmatch(r"/static/img/favicon\.[0-9a-f]{12}\.svg", icon)  # the hashed, cacheable name
    assert (status, content_type) == ("200", "image/svg+xml")
    assert redirect == icon and linked == icon
    assert missing == "404 True"


def test_a_host_not_allowed_is_one_line_on_the_console_without_a_traceback(db):
    """django.security logs it at ERROR with the traceback; the console (the server's log) gets the line alone."""
    [console] = [h for h in logging.getLogger().handlers if type(h) is logging.StreamHandler]  # settings.LOGGING's
    written = io.StringIO()
    previous = console.setStream(written)
    try:
        response = Client(raise_request_exception=False).get("/", HTTP_HOST="evil.example")
    finally:
        console.setStream(previous)
    assert response.status_code == 400
    assert "Invalid HTTP_HOST header: 'evil.example'" in written.getvalue()
    assert "Traceback" not in written.getvalue()
