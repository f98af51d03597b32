"""The API tokens page: a user's own tokens, made for one of their projects, the secret shown once, revocable."""

from django.test import Client
from django.urls import reverse

from api.models import ApiToken, digest_of
from tests.factory import make_project

from .conftest import token_for

TOKENS = reverse("tokens:list")


def create(client, project, **fields):
    return client.post(TOKENS, {"name": "CI gate", "project": project.pk, "scope": "read", "expires_in_days": "30", **fields})


def test_a_new_token_s_secret_is_shown_once_and_works(people):
    client = people.client("viewer")
    response = create(client, people.project)
    assert response.status_code == 201
    secret = response.context["secret"]
    assert secret in response.content.decode()
    token = ApiToken.objects.get(user=people.viewer)
    assert token.digest == digest_of(secret) and token.scope == "read" and token.project == people.project
    assert 29 <= (token.expires_at - token.created_at).days <= 30
    listed = client.get(TOKENS).content.decode()
    assert secret not in listed and token.prefix in listed and "CI gate" in listed
    api = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.get("/api/v1/projects").json()["items"][0]["role"] == "viewer"


def test_a_token_without_expiry_never_expires(people):
    create(people.client("lead"), people.project, expires_in_days="", scope="write")
    token = ApiToken.objects.get(user=people.lead)
    assert token.expires_at is None and token.scope == "write"


def test_a_token_only_reaches_a_project_of_its_owner(people):
    elsewhere = make_project(people.outsider, name="Not yours")
    response = create(people.client("viewer"), elsewhere)
    assert response.status_code == 200 and "project" in response.context["form"].errors
    assert not ApiToken.objects.exists()


def test_bad_fields_are_refused_naming_them(people):
    response = create(people.client("lead"), people.project, name="", expires_in_days="0", scope="admin")
    assert set(response.context["form"].errors) == {"name", "expires_in_days", "scope"}
    assert not ApiToken.objects.exists()


def test_the_list_shows_only_one_s_own_tokens_and_their_state(people):
    token_for(people.lead, people.project, name="lead's token")
    token_for(people.viewer, people.project, name="viewer's token")
    page = people.client("viewer").get(TOKENS).content.decode()
    assert "viewer&#x27;s token" in page and "lead&#x27;s token" not in page
    assert ">active<" in page


def test_revoking_one_s_token_stops_it(people):
    secret = token_for(people.viewer, people.project)
    token = ApiToken.objects.get(user=people.viewer)
    response = people.client("viewer").post(reverse("tokens:revoke", args=[token.uuid]), follow=True)
    assert response.status_code == 200 and "revoked" in response.content.decode()
    token.refresh_from_db()
    assert token.revoked_at is not None and token.state == "revoked"
    assert Client(HTTP_AUTHORIZATION=f"Bearer {secret}").get("/api/v1/projects").status_code == 401


def test_another_user_s_token_cannot_be_revoked(people):
    token_for(people.lead, people.project)
    token = ApiToken.objects.get(user=people.lead)
    assert people.client("viewer").post(reverse("tokens:revoke", args=[token.uuid])).status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_revoke_takes_post_only_and_the_page_needs_a_login(people):
    token_for(people.viewer, people.project)
    token = ApiToken.objects.get(user=people.viewer)
    assert people.client("viewer").get(reverse("tokens:revoke", args=[token.uuid])).status_code == 405
    assert Client().get(TOKENS).status_code == 302
    assert people.client("viewer").put(TOKENS).status_code == 405


def test_the_user_menu_links_to_the_page(people):
    assert f'href="{TOKENS}"' in people.client("rater").get(reverse("judgments:projects")).content.decode()
