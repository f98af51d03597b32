"""The API's frame: JSON errors everywhere, bodies refused from their headers, the OpenAPI schema and its docs page."""

import re

from django.contrib.staticfiles import finders
from django.test import Client
from openapi_spec_validator import validate

from config.http_limits import FORM_ALLOWANCE_BYTES
from tests.judgments.test_http_limits import Tripwire

GIB = 1 << 30


def test_the_openapi_schema_is_valid_and_documents_every_operation(world):
    response = Client().get("/api/openapi.json")
    assert response.status_code == 200
    schema = response.json()
    validate(schema)
    assert schema["openapi"].startswith("3.1") and schema["info"] == {**schema["info"], "title": "Verdict", "version": "1"}
    assert schema["components"]["securitySchemes"]["BearerToken"] == {"type": "http", "scheme": "bearer"}
    for path, operations in schema["paths"].items():
        assert path.startswith("/api/v1/"), path
        for method, operation in operations.items():
            success = operation["responses"].get("200") or operation["responses"].get("201") or operation["responses"].get("202")
            assert success and success.get("content"), f"{method} {path} documents no response body"
            assert {"401", "403", "404"} <= set(operation["responses"]), f"{method} {path} documents no errors"
            assert operation.get("security") == [{"BearerToken": []}], f"{method} {path}"


def test_the_docs_page_loads_nothing_from_another_site(world):
    response = Client().get("/api/docs")
    assert response.status_code == 200
    page = response.content.decode()
    assert "/api/openapi.json" in page
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert sources and all(source.startswith("/static/") for source in sources), sources
    assert "cdn" not in page.lower() and "unpkg" not in page.lower()
    for source in sources:  # each one is a static file Verdict serves
        assert finders.find(source.removeprefix("/static/")), source
    assert "script-src 'self'" in response["Content-Security-Policy"]
    assert not re.search(r"<script>(?!\s*$)", page), "an inline script would be refused by the CSP"
    assert '<html lang="en">' in page and '<meta name="viewport" content="width=device-width, initial-scale=1">' in page


def test_an_unknown_api_address_is_a_404(world):
    assert world.client("lead").get("/api/v1/nothing-here").status_code == 404


def test_a_wrong_method_is_refused(world):
    response = world.client("lead").delete(world.path("/api/v1/projects/{slug}/runs"))
    assert response.status_code == 405


def test_an_anonymous_body_to_the_api_is_not_sent_to_the_login_page(world):
    """Token callers have no session: the app's 64 KB cap for visitors must not refuse their uploads."""
    response = world.client(None).post("/api/v1/projects", b"x" * (200 << 10), content_type="application/octet-stream")
    assert response.status_code in (401, 405)
    assert response.status_code != 302


def test_an_api_body_over_the_limit_is_a_413_in_json_before_it_is_read(world, settings):
    settings.UPLOAD_MAX_BYTES = GIB
    response = world.client("lead").generic("POST", world.path("/api/v1/projects/{slug}/runs"), b"",
                                            CONTENT_TYPE="multipart/form-data; boundary=B", CONTENT_LENGTH=str(GIB + FORM_ALLOWANCE_BYTES + 1),
                                            **{"wsgi.input": Tripwire()})
    assert response.status_code == 413
    assert response.json()["code"] == "too_large" and "UPLOAD_MAX_BYTES" in response.json()["detail"]


def test_a_nul_in_an_api_address_is_a_400_in_json(world):
    response = world.client("lead").get(world.path("/api/v1/projects/{slug}/runs/a%00b"))
    assert response.status_code == 400 and response.json()["code"] == "bad_request"


def test_the_app_pages_keep_their_session_login(world):
    """Mounting the API exempted its views only: the app still sends visitors to log in."""
    response = Client().get(world.path("/p/{slug}/"))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_a_session_does_not_authenticate_the_api(world, people):
    client = Client()
    client.force_login(people.lead)
    assert client.get("/api/v1/projects").status_code == 401


def test_an_unexpected_error_is_json_too_and_says_nothing_of_the_exception(world, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("could not open /srv/verdict/secret-path")

    monkeypatch.setattr("api.projects.Query.objects.filter", broken)
    response = world.client("lead").get(world.path("/api/v1/projects/{slug}"))
    assert response.status_code == 500 and response["Content-Type"].startswith("application/json")
    assert response.json() == {"detail": "An unexpected error stopped this request; the server's log has the details.",
                               "code": "server_error"}
    assert "secret-path" in caplog.text  # the operator's log has it
