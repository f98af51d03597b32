"""Project tokens: the project's own, made by a lead (page, API, command); they act as a lead (write) or a viewer
(read), outlive their maker's membership, and show on the members page with their last use."""

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from api.models import ApiToken, digest_of
from judgments.models import Membership, StoredRun
from tests.api.bodies import run_upload

from .conftest import token_for


def bearer(secret: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {secret}", raise_request_exception=False)


def project_token(people, scope="write", name="CI") -> str:
    _token, secret = ApiToken.issue(user=None, created_by=people.lead, project=people.project, name=name, scope=scope)
    return secret


def make_on_page(people, **fields):
    return people.client("lead").post(reverse("tokens:project-tokens", args=[people.project.slug]),
                                      {"name": "CI gate", "scope": "write", "expires_in_days": "", **fields})


def test_a_lead_makes_a_project_token_on_its_page_and_sees_the_secret_once(people):
    response = make_on_page(people)
    assert response.status_code == 201
    secret = response.context["secret"]
    token = ApiToken.objects.get(digest=digest_of(secret))
    assert token.user is None and token.created_by == people.lead and token.scope == "write" and token.expires_at is None
    page = people.client("lead").get(reverse("tokens:project-tokens", args=[people.project.slug])).content.decode()
    assert secret not in page and token.prefix in page and "CI gate" in page
    assert secret not in people.client("lead").get(reverse("tokens:list")).content.decode()


@pytest.mark.parametrize("who, status", [("viewer", 403), ("rater", 403), ("outsider", 404)])
def test_only_leads_reach_the_project_tokens_page(people, who, status):
    client = people.client(who)
    path = reverse("tokens:project-tokens", args=[people.project.slug])
    assert client.get(path).status_code == status
    assert client.post(path, {"name": "x", "scope": "write"}).status_code == status
    assert not ApiToken.objects.exists()


def test_a_write_project_token_acts_as_a_lead_and_outlives_its_maker(people):
    secret = project_token(people)
    Membership.objects.filter(user=people.lead, project=people.project).delete()
    client = bearer(secret)
    assert client.get("/api/v1/projects").json()["items"][0]["role"] == "lead"
    response = client.post(f"/api/v1/projects/{people.project.slug}/runs", **run_upload(None))
    assert response.status_code == 201, response.content
    assert StoredRun.objects.get(uuid=response.json()["uuid"]).uploaded_by is None


def test_a_read_project_token_acts_as_a_viewer(people):
    client = bearer(project_token(people, scope="read"))
    assert client.get("/api/v1/projects").json()["items"][0]["role"] == "viewer"
    assert client.get(f"/api/v1/projects/{people.project.slug}/runs").status_code == 200
    assert client.get(f"/api/v1/projects/{people.project.slug}/llm-endpoint").status_code == 403
    assert client.post(f"/api/v1/projects/{people.project.slug}/runs", **run_upload(None)).status_code == 403


def test_a_project_token_reaches_its_project_only(people):
    other = people.outsider.memberships.get().project
    assert bearer(project_token(people)).get(f"/api/v1/projects/{other.slug}/runs").status_code == 404


def test_a_revoked_project_token_stops_at_once(people):
    secret = project_token(people)
    token = ApiToken.objects.get(digest=digest_of(secret))
    response = people.client("lead").post(reverse("tokens:project-revoke", args=[people.project.slug, token.uuid]), follow=True)
    assert "revoked" in response.content.decode()
    assert bearer(secret).get("/api/v1/projects").status_code == 401


def test_a_personal_token_cannot_be_revoked_as_a_project_token(people):
    token_for(people.viewer, people.project)
    token = ApiToken.objects.get(user=people.viewer)
    assert people.client("lead").post(reverse("tokens:project-revoke", args=[people.project.slug, token.uuid])).status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_the_members_page_shows_project_tokens_with_their_last_use(people):
    secret = project_token(people, name="Nightly gate")
    bearer(secret).get("/api/v1/projects")
    token = ApiToken.objects.get(digest=digest_of(secret))
    assert token.last_used_at is not None
    response = people.client("viewer").get(reverse("judgments:members", args=[people.project.slug]))
    page = response.content.decode()
    assert "Nightly gate" in page and token.prefix in page and "lena" in page
    assert list(response.context["project_tokens"]) == [token]


def test_the_api_lists_makes_and_revokes_project_tokens(people):
    lead = bearer(token_for(people.lead, people.project))
    base = f"/api/v1/projects/{people.project.slug}/tokens"
    made = lead.post(base, data=json.dumps({"name": "deploy", "scope": "read", "expires_in_days": 7}), content_type="application/json")
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["created_by"] == "lena" and body["scope"] == "read" and body["state"] == "active"
    assert bearer(body["secret"]).get("/api/v1/projects").json()["items"][0]["role"] == "viewer"
    listed = lead.get(base).json()["items"]
    assert [item["uuid"] for item in listed] == [body["uuid"]] and "secret" not in listed[0]
    assert lead.delete(f"{base}/{body['uuid']}").status_code == 200
    assert bearer(body["secret"]).get("/api/v1/projects").status_code == 401


def test_the_api_refuses_bad_fields_and_a_project_token_making_tokens(people):
    base = f"/api/v1/projects/{people.project.slug}/tokens"
    bad = bearer(token_for(people.lead, people.project)).post(base, data=json.dumps({"name": "", "expires_in_days": 0}),
                                                              content_type="application/json")
    assert bad.status_code == 400 and "name" in bad.json()["detail"] and "expires_in_days" in bad.json()["detail"]
    refused = bearer(project_token(people)).post(base, data=json.dumps({"name": "x"}), content_type="application/json")
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    assert ApiToken.objects.filter(user__isnull=True).count() == 1


def test_the_command_makes_a_project_token_or_a_member_s_personal_one(people):
    out = io.StringIO()
    call_command("create_token", "--project", people.project.slug, "--name", "CI", "--scope", "write", stdout=out, stderr=io.StringIO())
    token = ApiToken.objects.get(digest=digest_of(out.getvalue().strip()))
    assert token.user is None and token.scope == "write" and token.created_by is None
    out = io.StringIO()
    call_command("create_token", "--project", people.project.slug, "--name", "mine", "--user", "vera", "--expires-in-days", "30",
                 stdout=out, stderr=io.StringIO())
    personal = ApiToken.objects.get(digest=digest_of(out.getvalue().strip()))
    assert personal.user == people.viewer and personal.scope == "read" and personal.expires_at is not None


@pytest.mark.parametrize("arguments, problem", [
    (["--project", "nope", "--name", "CI"], "no project"),
    (["--project", "{slug}", "--name", "CI", "--user", "otto"], "not a member"),
    (["--project", "{slug}", "--name", "CI", "--expires-in-days", "0"], "expires_in_days"),
    (["--project", "{slug}", "--name", ""], "name"),
])
def test_the_command_refuses_bad_input_naming_it(people, arguments, problem):
    with pytest.raises(CommandError, match=problem):
        call_command("create_token", *[argument.format(slug=people.project.slug) for argument in arguments], stdout=io.StringIO())
    assert not ApiToken.objects.exists()
