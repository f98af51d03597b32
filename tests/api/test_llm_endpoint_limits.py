"""The LLM endpoint's shared limits through the API: read, set, kept when absent, checked like the page."""

import json

from django.test import Client

from judgments.models import LLMEndpoint
from tests.api.conftest import token_for


def client(user, project) -> Client:
    client = Client(raise_request_exception=False)
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token_for(user, project)}"
    return client


def put(client, url, body):
    return client.put(url, json.dumps(body), content_type="application/json")


def test_the_endpoint_api_reads_and_sets_the_limits(people):
    url = f"/api/v1/projects/{people.project.slug}/llm-endpoint"
    lead = client(people.lead, people.project)
    assert {key: lead.get(url).json()[key] for key in ("max_in_flight", "requests_per_minute", "tokens_per_minute")} == {
        "max_in_flight": 16, "requests_per_minute": 1000, "tokens_per_minute": 1_000_000}  # the defaults
    body = {"base_url": "https://api.example.com/v1", "model": "m", "max_in_flight": 4, "requests_per_minute": 0,
            "tokens_per_minute": 90_000}
    answer = put(lead, url, body)
    assert answer.status_code == 200 and answer.json()["tokens_per_minute"] == 90_000
    assert put(lead, url, {"base_url": "https://api.example.com/v1", "model": "m"}).json()["max_in_flight"] == 4
    endpoint = LLMEndpoint.objects.get()
    assert (endpoint.max_in_flight, endpoint.requests_per_minute, endpoint.tokens_per_minute) == (4, 0, 90_000)

    refused = put(lead, url, {**body, "requests_per_minute": -1})
    assert refused.status_code == 400 and "requests_per_minute" in refused.content.decode()
    assert put(client(people.rater, people.project), url, {**body, "max_in_flight": 1}).status_code == 403
    outsider_project = people.outsider.memberships.get().project
    assert put(client(people.outsider, outsider_project), url, {**body, "max_in_flight": 1}).status_code == 404
    assert client(people.outsider, outsider_project).get(url).status_code == 404
    assert LLMEndpoint.objects.get().max_in_flight == 4
