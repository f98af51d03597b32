"""A project with something behind every read endpoint, and tokens for each persona."""

from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from api.models import ApiToken, Scope
from judgments.ops import grading, reports, versions
from tests.factory import make_answer_run, make_round, make_user

# The grades the world's raters give: {(query_id, doc_id): (lead's grade, rater's grade)}. Both grade every pair of q1.
GRADES = {("q1", "d11"): (3, 3), ("q1", "d12"): (2, 1), ("q1", "d13"): (0, 0), ("q1", "d14"): (1, 1)}


@dataclass
class World:
    people: object
    objects: dict  # what fills a path template: {slug}, {round}, {run}...
    tokens: dict = field(default_factory=dict)  # persona -> secret

    def client(self, who: str | None) -> Client:
        """A client sending `who`'s token (None: no Authorization header; a raw string: that header value)."""
        client = Client(raise_request_exception=False)
        if who is None:
            return client
        secret = self.tokens.get(who, who)
        client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {secret}"
        return client

    def path(self, template: str) -> str:
        return template.format(**self.objects)


def token_for(user, project, *, scope=Scope.WRITE, name="test", **fields) -> str:
    token, secret = ApiToken.issue(user=user, project=project, name=name, scope=scope)
    if fields:
        ApiToken.objects.filter(pk=token.pk).update(**fields)
    return secret


def project_token_for(project, *, scope=Scope.WRITE) -> str:
    return ApiToken.issue(user=None, project=project, name=f"project {scope}", scope=scope)[1]


def build(people) -> World:
    project = people.project
    # The lead and the rater grade the round; a second round the rater does not grade stays hidden from them.
    round = make_round(project, people.lead, [people.lead, people.rater], raters_per_pair=2)
    items = {(item.query.query_id, item.document.doc_id): item for item in round.items.select_related("query", "document", "round")}
    for pair, (by_lead, by_rater) in GRADES.items():
        grading.record(items[pair], people.lead, grading.Verdict(grade=by_lead))
        grading.record(items[pair], people.rater, grading.Verdict(grade=by_rater))
    other_round = make_round(project, people.lead, [people.lead], {"q9": ["d91", "d92"]}, name="Lead's own round")
    reports.store(round, reports.compute(round, resamples=50))
    version = versions.publish(round, user=people.lead)
    answer_run = make_answer_run(project, {"q1": "An answer"}, name="rag")
    objects = {"slug": project.slug, "round": round.uuid, "other_round": other_round.uuid, "pool": round.pool.uuid,
               "run": project.runs.get(name="Round 1 pool run").uuid, "query_set": round.pool.query_set.uuid,
               "version": version.uuid, "answer_run": answer_run.uuid}
    world = World(people=people, objects=objects)
    outsider_project = people.outsider.memberships.get().project
    world.tokens = {
        "lead": token_for(people.lead, project), "viewer": token_for(people.viewer, project), "rater": token_for(people.rater, project),
        "lead_read": token_for(people.lead, project, scope=Scope.READ),
        "expired": token_for(people.lead, project, expires_at=timezone.now() - timedelta(seconds=1)),
        "revoked": token_for(people.lead, project, revoked_at=timezone.now()),
        "project_write": project_token_for(project), "project_read": project_token_for(project, scope=Scope.READ),
        "other_project": token_for(people.outsider, outsider_project),
        "wrong": "vrd_" + "x" * 43,
    }
    return world


def kept(stored, returned, where="results") -> list[str]:
    """Where `returned` (the API's typed answer) lost or changed something of `stored` (the stored JSON)."""
    if isinstance(stored, dict):
        if not isinstance(returned, dict):
            return [where]
        return [lost for key, value in stored.items() for lost in kept(value, returned.get(key, KeyError), f"{where}.{key}")]
    if isinstance(stored, list):
        if not isinstance(returned, list) or len(stored) != len(returned):
            return [where]
        return [lost for i, (a, b) in enumerate(zip(stored, returned)) for lost in kept(a, b, f"{where}[{i}]")]
    return [] if stored == returned else [where]



@pytest.fixture
def lead(people) -> Client:
    """A client sending the lead's write token."""
    client = Client(raise_request_exception=False)
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token_for(people.lead, people.project)}"
    return client


@pytest.fixture
def world(people) -> World:
    return build(people)


@pytest.fixture
def someone(db):
    return make_user("sam")
