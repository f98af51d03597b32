"""`Cache-Control: no-store` on every answer to a logged-in person: every page of the URLconf, htmx partials,
downloads, error pages, the token page showing a new secret. Anonymous visitors' public pages keep their own
headers. (The API's answers: tests/api/test_cache_control.py.)"""

import os
import subprocess
import sys
from urllib.parse import urlencode

from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from judgments.models import Invitation, Project, Role
from tests.config import test_url_parameters as fuzz
from tests.factory import make_user

# The hostile-parameter test's world: the demo project with a page's worth of everything, built once.
demo_world, world = fuzz.demo_world, fuzz.world
SKIPPED_NAMESPACES = {"admin", "api"}  # Django's own pages (never_cache already); the API has its own test


def no_store(response) -> bool:
    return "no-store" in [directive.strip() for directive in response.get("Cache-Control", "").split(",")]


def patterns(entries=None, namespace=""):
    """(url name, pattern) of every named URL of the URLconf, but the skipped namespaces'."""
    for entry in get_resolver().url_patterns if entries is None else entries:
        if isinstance(entry, URLResolver) and entry.namespace not in SKIPPED_NAMESPACES:
            yield from patterns(entry.url_patterns, f"{namespace}{entry.namespace}:" if entry.namespace else namespace)
        elif isinstance(entry, URLPattern) and entry.name:
            yield f"{namespace}{entry.name}", entry


def lead(world) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(world["users"]["lead"])
    return client


def test_every_page_answers_a_logged_in_lead_with_no_store(world):
    """Whatever the page answers (a page, a download, a redirect, 405 to a GET of a form's target, 404), once
    plainly and once with the query string the world has for it."""
    client = lead(world)
    invitation = Invitation.objects.filter(accepted_at=None).first()
    values = {**world["kwargs"], "uidb64": "MQ"}  # a password reset link that is not valid: its page says so
    missing, stored = [], []
    for name, pattern in patterns():
        kwargs = {**values, **world["kwargs_of"].get(name, {})}
        if name == "judgments:invitation":
            kwargs["token"] = invitation.token
        if unknown := set(pattern.pattern.converters) - set(kwargs):
            missing.append(f"{name}: {sorted(unknown)}")
            continue
        url = reverse(name, kwargs={key: kwargs[key] for key in pattern.pattern.converters})
        for query in [""] + ([f"?{urlencode(world['valid'][name])}"] if name in world["valid"] else []):
            response = client.get(url + query)
            if not no_store(response):
                stored.append(f"{name}: {response.status_code} Cache-Control {response.get('Cache-Control')!r}")
    assert not missing, f"pages without values to fill their URLs: {missing}"
    assert not stored, "\n".join(stored)


def test_the_page_showing_a_new_token_s_secret_is_no_store(world):
    project = Project.objects.get(slug=world["kwargs"]["slug"])
    response = lead(world).post(reverse("tokens:list"), {"name": "CI", "project": project.pk, "scope": "read", "expires_in_days": "30"})
    assert response.status_code == 201 and response.context["secret"] in response.content.decode()
    assert no_store(response)


def test_downloads_are_no_store(world):
    client, kwargs = lead(world), world["kwargs"]
    slug, round_uuid = kwargs["slug"], kwargs["round_uuid"]
    for url in [reverse("judgments:round-export", args=[slug, round_uuid]) + "?format=qrels",
                reverse("judgments:round-export", args=[slug, round_uuid]) + "?format=consensus-csv",
                reverse("judgments:query-set-csv", args=[slug, kwargs["set_uuid"]])]:
        response = client.get(url)
        assert response.status_code == 200 and response.streaming and "attachment" in response["Content-Disposition"], url
        b"".join(response.streaming_content)
        assert no_store(response), url


def test_error_pages_for_a_logged_in_person_are_no_store(world):
    kwargs = world["kwargs"]
    viewer = Client(raise_request_exception=False)
    viewer.force_login(world["users"]["viewer"])
    forbidden = viewer.post(reverse("judgments:invitation-create", args=[kwargs["slug"]]), {"email": "x@example.com", "role": Role.RATER})
    missing = viewer.get("/p/no-such-project/")
    outsider = make_user("olga")
    elsewhere = Client(raise_request_exception=False)
    elsewhere.force_login(outsider)
    hidden = elsewhere.get(reverse("judgments:project", args=[kwargs["slug"]]))
    bad = viewer.get(reverse("judgments:query-set", args=[kwargs["slug"], kwargs["set_uuid"]]), {"page": "x"})
    assert [r.status_code for r in (forbidden, missing, hidden, bad)] == [403, 404, 404, 400]
    assert all(no_store(r) for r in (forbidden, missing, hidden, bad))


def test_htmx_partials_are_no_store(world):
    client, kwargs = lead(world), world["kwargs"]
    members = client.get(reverse("judgments:members", args=[kwargs["slug"]]), headers={"HX-Request": "true"})
    status = client.get(reverse("judgments:job-status", args=[kwargs["slug"], kwargs["job_uuid"]]), headers={"HX-Request": "true"})
    assert members.status_code == 200 and status.status_code == 286  # a finished job stops the polling
    for partial in (members, status):
        assert not partial.content.lstrip().lower().startswith(b"<!doctype") and no_store(partial)


def test_an_invitation_link_is_no_store_even_to_an_anonymous_visitor(world):
    """It names the project, who invites and the address invited, to whoever holds the link."""
    invitation = Invitation.objects.filter(accepted_at=None).first()
    response = Client().get(reverse("judgments:invitation", args=[invitation.token]))
    assert response.status_code == 200 and invitation.email in response.content.decode()
    assert no_store(response)


def test_anonymous_visitors_public_answers_keep_their_own_headers(db, settings):
    settings.EMAIL_ENABLED = True  # so that the password reset page exists
    client = Client()
    for url in ["/favicon.ico", reverse("password_reset"), "/p/no-such-project/"]:  # the last: the login redirect
        response = client.get(url)
        assert response.status_code in (200, 302) and "Cache-Control" not in response, url
    # Django's own never_cache, as it was: the login page and /healthz say no-store themselves.
    for url in [reverse("login"), "/healthz"]:
        assert client.get(url)["Cache-Control"] == "max-age=0, no-cache, no-store, must-revalidate, private", url


def test_a_logged_in_person_s_request_to_a_public_address_is_no_store(db, settings):
    settings.EMAIL_ENABLED = True
    client = Client()
    client.force_login(make_user("mia"))
    for url in ["/favicon.ico", reverse("password_reset")]:
        assert no_store(client.get(url)), url


def test_static_files_keep_their_own_headers_for_a_logged_in_person_in_production(db, settings, tmp_path):
    """The production middleware (DEBUG off), WhiteNoise first: it answers a static file before the no-store
    middleware sees the request, so the file stays cacheable for a logged-in person too."""
    env = {**os.environ, "DEBUG": "false", "SECRET_KEY": "x" * 60, "ALLOWED_HOSTS": "testserver"}
    script = "import config.settings as s; print(' '.join(s.MIDDLEWARE))"
    result = subprocess.run([sys.executable, "-c", script], cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    settings.MIDDLEWARE = result.stdout.split()
    settings.WHITENOISE_USE_FINDERS, settings.STATIC_ROOT = True, tmp_path  # the files where they are, not collected
    client = Client()
    client.force_login(make_user("mia"))
    static = client.get("/static/css/verdict.css")
    assert static.status_code == 200 and "Cache-Control" in static and not no_store(static)
    assert no_store(client.get(reverse("judgments:projects")))
