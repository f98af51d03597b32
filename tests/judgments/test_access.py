"""Every project view: members with the right get in, members without it get 403, outsiders 404."""

import io
from uuid import uuid4

import pytest
from django.urls import reverse

from judgments.ops.actions import invite_member, save_guidelines
from judgments.ops.imports import import_corpus, import_queries, import_run
from judgments.ops.pools import create_pool
from tests.factory import make_round, trec_run

from judgments.models import Job
from judgments.ops.jobs import start_job

READERS = {"lead", "viewer"}
EVERYONE = {"lead", "rater", "viewer"}
LEADS = {"lead"}
GRADERS = {"lead", "rater"}  # the round in these tests has both as raters

# (url name, method, who may, needs a job / a member in the URL)
VIEWS = [
    ("judgments:project", "get", EVERYONE, None),
    ("judgments:members", "get", EVERYONE, None),
    ("judgments:project-settings", "get", LEADS, None),
    ("judgments:project-settings", "post", LEADS, None),
    ("judgments:jobs", "get", READERS, None),
    ("judgments:job", "get", READERS, "job"),
    ("judgments:job-status", "get", READERS, "job"),
    ("judgments:job-retry", "post", LEADS, "job"),
    ("judgments:selfcheck", "post", LEADS, None),
    ("judgments:invitation-create", "post", LEADS, None),
    ("judgments:invitation-revoke", "post", LEADS, "invitation"),
    ("judgments:member-role", "post", LEADS, "member"),
    ("judgments:member-remove", "post", LEADS, "member"),
    ("judgments:guidelines", "get", EVERYONE, None),
    ("judgments:guidelines-edit", "get", LEADS, None),
    ("judgments:guidelines-edit", "post", LEADS, None),
    ("judgments:guidelines-version", "get", EVERYONE, "version"),
    ("judgments:query-sets", "get", READERS, None),
    ("judgments:query-set-import", "get", LEADS, None),
    ("judgments:query-set-import", "post", LEADS, None),
    ("judgments:query-set-create", "post", LEADS, None),
    ("judgments:query-set", "get", READERS, "query_set"),
    ("judgments:query-add", "post", LEADS, "query_set"),
    ("judgments:query-edit", "get", LEADS, "query"),
    ("judgments:query-edit", "post", LEADS, "query"),
    ("judgments:corpus", "get", READERS, None),
    ("judgments:corpus-import", "post", LEADS, None),
    ("judgments:display-template", "post", LEADS, None),
    ("judgments:document", "get", READERS, "document"),
    ("judgments:runs", "get", READERS, None),
    ("judgments:run-upload", "get", LEADS, None),
    ("judgments:run-upload", "post", LEADS, None),
    ("judgments:run", "get", READERS, "run"),
    ("judgments:pools", "get", READERS, None),
    ("judgments:pool-create", "get", LEADS, None),
    ("judgments:pool-create", "post", LEADS, None),
    ("judgments:pool", "get", READERS, "pool"),
    ("judgments:pool-add-runs", "post", LEADS, "pool"),
    ("judgments:rounds", "get", READERS, None),
    ("judgments:round-create", "get", LEADS, None),
    ("judgments:round-create", "post", LEADS, None),
    ("judgments:round", "get", READERS, "round"),
    ("judgments:round-edit", "get", LEADS, "round"),
    ("judgments:round-edit", "post", LEADS, "round"),
    ("judgments:round-plan", "get", LEADS, "round"),
    ("judgments:round-plan", "post", LEADS, "round"),
    ("judgments:round-plan-remove", "post", LEADS, "round"),
    ("judgments:round-open", "post", LEADS, "round"),
    ("judgments:round-close", "post", LEADS, "round"),
    ("judgments:round-add-pairs", "post", LEADS, "round"),
    ("judgments:round-successor", "post", LEADS, "round"),
    ("judgments:round-reassign", "post", LEADS, "round"),
    ("judgments:round-flags", "get", READERS, "round"),
    ("judgments:round-reset-flags", "post", LEADS, "round"),
    ("judgments:round-query", "get", READERS, "round_query"),
    ("judgments:round-gold", "post", LEADS, "item"),
    ("judgments:grade", "get", GRADERS, "round"),
    ("judgments:grade-item", "post", GRADERS, "item"),
    ("judgments:grade-bulk", "get", GRADERS, "round_query"),
    ("judgments:run-delete", "post", LEADS, "run"),
    ("judgments:run-promote", "post", LEADS, "run"),
    ("judgments:webhooks", "get", LEADS, None),
    ("judgments:webhooks", "post", LEADS, None),
    ("tokens:project-tokens", "get", LEADS, None),
    ("tokens:project-tokens", "post", LEADS, None),
]
# GET-and-POST views: the wrong method for them is DELETE.
GET_AND_POST = {"judgments:project-settings", "judgments:query-set-import", "judgments:query-set-create", "judgments:query-add",
                "judgments:query-edit", "judgments:run-upload", "judgments:pool-create", "judgments:corpus-import",
                "judgments:guidelines-edit", "judgments:round-create", "judgments:round-edit", "judgments:round-plan",
                "judgments:grade-item", "tokens:project-tokens", "judgments:webhooks"}


def url_for(people, name: str, extra: str | None) -> str:
    project = people.project
    args = [project.slug]
    if extra == "job":
        args.append(Job.objects.create(kind="selfcheck", project=project, owner=people.lead, state="failed").uuid)
    elif extra == "member":
        args.append(project.memberships.get(user=people.viewer).uuid)
    elif extra == "invitation":
        args.append(invite_member(project, email=f"{uuid4()}@example.com", role="rater", invited_by=people.lead,
                                  absolute_url=str)[0].uuid)
    elif extra in ("query_set", "query"):
        collection, _ = import_queries(project, b"query_id,query\nq1,tent\n", "q.csv", name=f"Set {uuid4()}")
        args += [collection.uuid] + (["q1"] if extra == "query" else [])
    elif extra == "version":
        args.append(save_guidelines(project, f"# Rules {uuid4()}", author=people.lead)[0].number)
    elif extra == "document":
        import_corpus(project, io.BytesIO(b'{"doc_id": "d1", "title": "Tent"}\n'), "docs.jsonl")
        args.append("d1")
    elif extra in ("run", "pool"):
        run, _ = import_run(project, trec_run({"q1": ["d1"]}), "r.run", name=f"run {uuid4()}", system="BM25")
        args.append(run.uuid)
        if extra == "pool":
            collection, _ = import_queries(project, b"query_id,query\nq1,tent\n", "q.csv", name=f"Set {uuid4()}")
            args[-1] = create_pool(project, name="P", query_set=collection, depth=10, strategy="best_rank").uuid
    elif extra in ("round", "item", "round_query"):
        round = make_round(project, people.lead, [people.lead, people.rater], name=f"Round {uuid4()}")
        args.append(round.uuid)
        if extra == "item":
            args.append(round.items.first().uuid)
        elif extra == "round_query":
            args.append(round.items.first().query.query_id)
    return reverse(name, args=args)


@pytest.mark.parametrize("name,method,allowed,extra", VIEWS, ids=[f"{v[0]}-{v[1]}" for v in VIEWS])
@pytest.mark.parametrize("who", ["lead", "rater", "viewer", "outsider"])
def test_each_persona_gets_what_its_role_allows(people, name, method, allowed, extra, who):
    url = url_for(people, name, extra)
    response = getattr(people.client(who), method)(url, {"role": "viewer", "user": "otto", "name": "Renamed"})
    if who == "outsider":
        assert response.status_code == 404
        assert "<h1>Not found</h1>" in response.content.decode() and people.project.name not in response.content.decode()
    elif who in allowed:
        assert response.status_code in (200, 302)
    else:
        assert response.status_code == 403
        page = response.content.decode()  # the app's 403 page: the role, what it may not do, the way back
        assert f"Your role ({who}) does not allow" in page or "You are not a rater of this round." in page
        assert f"Back to {people.project.name}" in page


@pytest.mark.parametrize("name,method,allowed,extra", VIEWS, ids=[f"{v[0]}-{v[1]}" for v in VIEWS])
def test_each_view_refuses_the_wrong_method(people, name, method, allowed, extra):
    url = url_for(people, name, extra)
    wrong = "delete" if name in GET_AND_POST else {"get": "put", "post": "get"}[method]
    assert getattr(people.client("lead"), wrong)(url).status_code == 405


@pytest.mark.parametrize("name,method,allowed,extra", VIEWS, ids=[f"{v[0]}-{v[1]}" for v in VIEWS])
def test_anonymous_visitors_are_sent_to_log_in(people, client, name, method, allowed, extra):
    url = url_for(people, name, extra)
    response = getattr(client, method)(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_an_unknown_project_is_404_even_for_a_logged_in_user(people):
    assert people.client("lead").get(reverse("judgments:project", args=["no-such-project"])).status_code == 404


def test_a_job_of_another_project_is_404(people):
    other = people.outsider.memberships.get().project
    job = start_job(kind="selfcheck", project=other, owner=people.outsider)
    url = reverse("judgments:job", args=[people.project.slug, job.uuid])
    assert people.client("lead").get(url).status_code == 404


@pytest.mark.parametrize("name", ["judgments:projects", "judgments:my-queue", "judgments:reports"])
def test_personal_pages_need_a_login_and_then_work(people, client, name):
    assert client.get(reverse(name)).status_code == 302
    assert people.client("rater").get(reverse(name)).status_code == 200
