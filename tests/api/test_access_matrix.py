"""Every API endpoint, with every kind of caller: each role's token, no token, a wrong, expired or revoked one,
another project's, and a read-scoped token on writes.

To cover a new endpoint, add a row to ENDPOINTS: the method, the path (filled from the world: {slug}, {round},
{run}, {pool}, {query_set}, {version}, {answer_run}), the capability its owner needs (as judgments/access.py
names them, None for any member), whether it changes something (then a read-scoped token gets 403), the status
of success, and for a write the request's keyword arguments (`body`, a function of the world). The expected
status of every caller follows from that row.
"""

import re
from dataclasses import dataclass
from typing import Callable

import pytest
from django.urls import URLResolver, get_resolver

from tests.api import bodies

ROLES = {"lead": {"can_manage", "can_read_reports", "can_grade"}, "viewer": {"can_read_reports"}, "rater": {"can_grade"}}
# Project tokens act with a role their scope gives (api/auth.py), never as a rater.
PROJECT_TOKENS = {"project_write": ROLES["lead"], "project_read": ROLES["viewer"]}
UNAUTHENTICATED = ("no_token", "wrong", "expired", "revoked")


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    need: str | None
    write: bool = False
    ok: int = 200
    body: Callable | None = None
    person_only: bool = False  # refused (403) to project tokens whatever their scope

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


P = "/api/v1/projects/{slug}"
ENDPOINTS = [
    Endpoint("GET", "/api/v1/projects", None),
    Endpoint("GET", "/api/v1/version", None),
    Endpoint("GET", P, None),
    Endpoint("GET", P + "/query-sets", "can_read_reports"),
    Endpoint("GET", P + "/query-sets/{query_set}/queries.csv", "can_read_reports"),
    Endpoint("GET", P + "/runs", "can_read_reports"),
    Endpoint("GET", P + "/runs/{run}", "can_read_reports"),
    Endpoint("GET", P + "/runs/{run}/download", "can_read_reports"),
    Endpoint("GET", P + "/answer-runs", "can_read_reports"),
    Endpoint("GET", P + "/answer-runs/{answer_run}", "can_read_reports"),
    Endpoint("GET", P + "/pools", "can_read_reports"),
    Endpoint("GET", P + "/pools/{pool}", "can_read_reports"),
    Endpoint("GET", P + "/rounds", None),
    Endpoint("GET", P + "/rounds/{round}", None),
    Endpoint("PATCH", P + "/rounds/{round}", "can_manage", write=True, body=bodies.round_settings),
    Endpoint("POST", P + "/rounds", "can_manage", write=True, ok=201, body=bodies.round_create),
    Endpoint("POST", P + "/rounds/{round}/judgments", "can_manage", write=True, body=bodies.judgments_upload),
    Endpoint("GET", P + "/rounds/{round}/judgments.qrels", "can_read_reports"),
    Endpoint("GET", P + "/rounds/{round}/judgments.json", "can_read_reports"),
    Endpoint("GET", P + "/rounds/{round}/judgments.csv", "can_read_reports"),
    Endpoint("GET", P + "/rounds/{round}/agreement", "can_read_reports"),
    Endpoint("GET", P + "/rounds/{round}/plan", "can_read_reports"),
    Endpoint("PUT", P + "/rounds/{draft_round}/plan", "can_manage", write=True, body=bodies.plan),
    Endpoint("DELETE", P + "/rounds/{draft_round}/plan", "can_manage", write=True, body=bodies.planned),
    # after the plan's rows: an open round's sample cannot change (the generated-client test runs rows in order)
    Endpoint("POST", P + "/rounds/{draft_round}/open", "can_manage", write=True, body=bodies.draft),
    Endpoint("GET", P + "/versions", "can_read_reports"),
    Endpoint("GET", P + "/versions/{version}/labels.qrels", "can_read_reports"),
    Endpoint("GET", P + "/versions/{version}/labels.json", "can_read_reports"),
    Endpoint("GET", P + "/versions/{version}/labels.csv", "can_read_reports"),
    Endpoint("POST", P + "/runs", "can_manage", write=True, ok=201, body=bodies.run_upload),
    Endpoint("POST", P + "/answer-runs", "can_manage", write=True, ok=201, body=bodies.answer_run_upload),
    Endpoint("POST", P + "/query-sets", "can_manage", write=True, ok=201, body=bodies.query_set_upload),
    Endpoint("POST", P + "/query-sets/{query_set}/references", "can_manage", write=True, body=bodies.references_upload),
    Endpoint("POST", P + "/corpus", "can_manage", write=True, body=bodies.corpus_upload),
    Endpoint("POST", P + "/pools", "can_manage", write=True, ok=202, body=bodies.pool_build),
    Endpoint("POST", P + "/evaluations", "can_manage", write=True, ok=202, body=bodies.evaluation_start),
    Endpoint("GET", P + "/evaluations", "can_read_reports"),
    Endpoint("POST", P + "/judge-only-evaluations", "can_manage", write=True, ok=202, body=bodies.judge_only_start),
    Endpoint("GET", P + "/judge-only-evaluations", "can_read_reports"),
    Endpoint("GET", P + "/judge-only-evaluations/{judge_only}", "can_read_reports", body=bodies.judge_only),
    Endpoint("POST", P + "/judge-estimates", "can_manage", write=True, ok=202, body=bodies.judge_estimate_start),
    Endpoint("GET", P + "/judge-estimates", "can_read_reports"),
    Endpoint("GET", P + "/judge-estimates/{judge_estimate}", "can_read_reports", body=bodies.judge_estimate),
    Endpoint("GET", P + "/measures", "can_read_reports"),
    Endpoint("GET", P + "/evaluations/{evaluation}", "can_read_reports", body=bodies.evaluation),
    Endpoint("GET", P + "/evaluations/{evaluation}/per-query", "can_read_reports", body=bodies.evaluation),
    Endpoint("GET", P + "/evaluations/{evaluation}/comparison", "can_read_reports", body=bodies.evaluation),
    Endpoint("GET", P + "/evaluations/{evaluation}/unjudged", "can_read_reports", body=bodies.unjudged_query),
    Endpoint("POST", P + "/evaluations/{evaluation}/unjudged", "can_manage", write=True, ok=201, body=bodies.unjudged_send),
    Endpoint("GET", P + "/jobs/{job}", "can_read_reports", body=bodies.evaluation),
    Endpoint("GET", P + "/llm-endpoint", "can_manage"),
    Endpoint("PUT", P + "/llm-endpoint", "can_manage", write=True, body=bodies.llm_endpoint),
    Endpoint("GET", P + "/embedding-endpoint", "can_manage"),
    Endpoint("PUT", P + "/embedding-endpoint", "can_manage", write=True, body=bodies.embedding_endpoint),
    Endpoint("PATCH", P, "can_manage", write=True, body=bodies.retention),
    Endpoint("DELETE", P + "/runs/{spare_run}", "can_manage", write=True, body=bodies.spare_run),
    Endpoint("POST", P + "/runs/{run}/promote", "can_manage", write=True),
    Endpoint("DELETE", P + "/answer-runs/{answer_run}", "can_manage", write=True),
    Endpoint("DELETE", P + "/evaluations/{evaluation}", "can_manage", write=True, body=bodies.evaluation),
    Endpoint("GET", P + "/webhooks", "can_manage"),
    Endpoint("POST", P + "/webhooks", "can_manage", write=True, ok=201, body=bodies.webhook),
    Endpoint("DELETE", P + "/webhooks/{webhook}", "can_manage", write=True, body=bodies.webhook_made),
    Endpoint("GET", P + "/tokens", "can_manage"),
    Endpoint("POST", P + "/tokens", "can_manage", write=True, ok=201, body=bodies.project_token, person_only=True),
    Endpoint("DELETE", P + "/tokens/{project_token}", "can_manage", write=True, body=bodies.project_token_made),
]


def expected(endpoint: Endpoint, caller: str) -> int:
    if caller in UNAUTHENTICATED:
        return 401
    if caller == "other_project":
        # Its own project list is all it sees; any path naming this project is a 404, as for outsiders.
        return endpoint.ok if "{slug}" not in endpoint.path else 404
    if caller == "lead_read" or (caller == "project_read" and endpoint.write):
        return 403 if endpoint.write else endpoint.ok
    if caller in PROJECT_TOKENS and endpoint.person_only:
        return 403
    return endpoint.ok if endpoint.need is None or endpoint.need in {**ROLES, **PROJECT_TOKENS}[caller] else 403


CALLERS = [*ROLES, "lead_read", "other_project", *UNAUTHENTICATED]


def call(world, endpoint: Endpoint, caller: str):
    client = world.client(None if caller == "no_token" else caller)
    kwargs = endpoint.body(world) if endpoint.body else {}
    response = getattr(client, endpoint.method.lower())(world.path(endpoint.path), **kwargs)
    if response.streaming:
        b"".join(response.streaming_content)
    return response


def wrong_answers(world, endpoint: Endpoint, callers) -> list[str]:
    wrong = []
    for caller in callers:
        response = call(world, endpoint, caller)
        if response.status_code != expected(endpoint, caller):
            wrong.append(f"{caller}: {response.status_code}, expected {expected(endpoint, caller)}: {response.content[:200]!r}")
            continue
        if response.status_code >= 400:
            assert response["Content-Type"].startswith("application/json"), (caller, response["Content-Type"])
            body = response.json()
            assert set(body) == {"detail", "code"} and body["detail"], (caller, body)
            assert body["code"] == {401: "unauthenticated", 403: "forbidden", 404: "not_found"}[response.status_code], (caller, body)
            if response.status_code == 401:
                assert response["WWW-Authenticate"].startswith("Bearer"), caller
    return wrong


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
def test_each_caller_gets_what_its_role_and_token_allow(world, endpoint):
    wrong = wrong_answers(world, endpoint, CALLERS)
    assert not wrong, f"{endpoint}:\n" + "\n".join(wrong)


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
def test_project_tokens_get_what_their_scope_allows(world, endpoint):
    """In a world of their own: a write succeeding twice (an upload) would answer the second caller otherwise."""
    wrong = wrong_answers(world, endpoint, PROJECT_TOKENS)
    assert not wrong, f"{endpoint}:\n" + "\n".join(wrong)


def served_routes(patterns, prefix=""):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from served_routes(entry.url_patterns, prefix + str(entry.pattern))
        else:
            yield prefix + str(entry.pattern)


def test_the_matrix_covers_every_route_of_the_api():
    """A route added to the API without a row here fails: the table is the list of what is tested."""
    tested = [re.sub(r"\{\w+\}", "x", endpoint.path) for endpoint in ENDPOINTS]
    untested = [route for route in served_routes(get_resolver().url_patterns) if route.startswith("api/v1/")
                and not any(re.fullmatch("/" + re.sub(r"<[^>]+>", "[^/]+", re.escape(route)), path)
                            for path in tested)]
    assert not untested, f"routes without a row in ENDPOINTS: {untested}"
