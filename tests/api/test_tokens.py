"""Bearer tokens: what makes one valid, what its owner's current role lets it do, and what is stored."""

import hashlib
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from api.auth import project_access
from api.errors import ApiError
from api.models import ApiToken, digest_of
from judgments.models import Membership, Role

from .conftest import token_for


def test_only_the_digest_of_the_secret_is_stored(people):
    token, secret = ApiToken.issue(user=people.lead, project=people.project, name="ci", scope="read")
    stored = ApiToken.objects.filter(pk=token.pk).values()[0]
    assert secret.startswith("vrd_") and len(secret) > 40
    assert stored["digest"] == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in {str(value) for value in stored.values()}
    assert secret.startswith(stored["prefix"]) and len(stored["prefix"]) < 16


@pytest.mark.parametrize("header", ["Bearer", "Bearer ", "Token vrd_abc", "vrd_abc", "Bearer vrd_", "Bearer not-a-token", "Basic dXNlcjpwYXNz"])
def test_a_malformed_authorization_header_is_a_401_json(world, header):
    response = world.client(None).get("/api/v1/projects", headers={"Authorization": header})
    assert response.status_code == 401
    assert response.json()["code"] == "unauthenticated"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_expired_and_revoked_tokens_say_so(world):
    assert "expired" in world.client("expired").get("/api/v1/projects").json()["detail"]
    assert "revoked" in world.client("revoked").get("/api/v1/projects").json()["detail"]


def test_a_token_expiring_later_works_until_then(world, people):
    secret = token_for(people.viewer, people.project, expires_at=timezone.now() + timedelta(minutes=5))
    assert world.client(secret).get("/api/v1/projects").status_code == 200


def test_revoking_stops_the_token_at_once(world, people):
    client = world.client("viewer")
    assert client.get(world.path("/api/v1/projects/{slug}/runs")).status_code == 200
    ApiToken.objects.get(user=people.viewer).revoke()
    assert client.get(world.path("/api/v1/projects/{slug}/runs")).status_code == 401


def test_a_demoted_member_s_token_shrinks_with_the_role(world, people):
    client = world.client("viewer")
    path = world.path("/api/v1/projects/{slug}/rounds/{round}/judgments.qrels")
    assert client.get(path).status_code == 200
    Membership.objects.filter(user=people.viewer, project=people.project).update(role=Role.RATER)
    assert client.get(path).status_code == 403


def test_a_removed_member_s_token_is_refused(world, people):
    Membership.objects.filter(user=people.viewer, project=people.project).delete()
    response = world.client("viewer").get("/api/v1/projects")
    assert response.status_code == 401
    assert "no longer a member" in response.json()["detail"]


def test_an_inactive_user_s_token_is_refused(world, people):
    people.viewer.is_active = False
    people.viewer.save()
    assert world.client("viewer").get("/api/v1/projects").status_code == 401


def test_the_projects_list_holds_the_token_s_project_and_role_only(world, people):
    assert world.client("viewer").get("/api/v1/projects").json() == {
        "items": [{"slug": people.project.slug, "name": people.project.name, "role": "viewer"}], "next": None}
    others = world.client("other_project").get("/api/v1/projects").json()["items"]
    assert [item["slug"] for item in others] == [people.outsider.memberships.get().project.slug]


def test_another_project_s_token_gets_404_even_where_its_owner_is_a_member(world, people):
    """A token reaches ONE project: its owner's membership elsewhere does not widen it."""
    other = people.outsider.memberships.get().project
    Membership.objects.create(project=other, user=people.lead, role=Role.LEAD)
    secret = token_for(people.lead, other)
    response = world.client(secret).get(world.path("/api/v1/projects/{slug}/runs"))
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_last_used_is_written_at_most_once_a_minute(world, people):
    client = world.client("viewer")
    token = ApiToken.objects.get(user=people.viewer)
    assert token.last_used_at is None
    client.get("/api/v1/projects")
    first = ApiToken.objects.get(pk=token.pk).last_used_at
    assert first is not None
    with CaptureQueriesContext(connection) as queries:
        client.get("/api/v1/projects")
    assert not [q for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("UPDATE")]
    assert ApiToken.objects.get(pk=token.pk).last_used_at == first
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first - timedelta(seconds=61))
    client.get("/api/v1/projects")
    assert ApiToken.objects.get(pk=token.pk).last_used_at > first


def test_a_read_token_is_refused_on_a_write_with_403(world, rf):
    """The check every write endpoint goes through (the writes themselves are in the access matrix)."""
    read, write = (ApiToken.objects.get(digest=digest_of(world.tokens[who])) for who in ("lead_read", "lead"))
    membership = Membership.objects.get(user=read.user, project=read.project)
    request = rf.post("/api/v1/projects/x")
    request.auth = (read, membership)
    with pytest.raises(ApiError) as refused:
        project_access(request, read.project.slug, None)
    assert refused.value.status_code == 403 and refused.value.code == "forbidden"
    request.auth = (write, membership)
    assert project_access(request, write.project.slug, "can_manage")[0] == write.project
