"""Every project view: members with the right get in, members without it get 403, outsiders 404."""

import pytest
from django.urls import reverse

from judgments.jobs import start_job
from judgments.models import Job

READERS = {"lead", "viewer"}
EVERYONE = {"lead", "rater", "viewer"}
LEADS = {"lead"}

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
    ("judgments:member-add", "post", LEADS, None),
    ("judgments:member-role", "post", LEADS, "member"),
    ("judgments:member-remove", "post", LEADS, "member"),
]


def url_for(people, name: str, extra: str | None) -> str:
    args = [people.project.slug]
    if extra == "job":
        args.append(Job.objects.create(kind="selfcheck", project=people.project, owner=people.lead, state="failed").uuid)
    elif extra == "member":
        args.append(people.project.memberships.get(user=people.viewer).uuid)
    return reverse(name, args=args)


@pytest.mark.parametrize("name,method,allowed,extra", VIEWS, ids=[f"{v[0]}-{v[1]}" for v in VIEWS])
@pytest.mark.parametrize("who", ["lead", "rater", "viewer", "outsider"])
def test_each_persona_gets_what_its_role_allows(people, name, method, allowed, extra, who):
    url = url_for(people, name, extra)
    response = getattr(people.client(who), method)(url, {"role": "viewer", "user": "otto", "name": "Renamed"})
    if who == "outsider":
        assert response.status_code == 404
    elif who in allowed:
        assert response.status_code in (200, 302)
    else:
        assert response.status_code == 403


@pytest.mark.parametrize("name,method,allowed,extra", VIEWS, ids=[f"{v[0]}-{v[1]}" for v in VIEWS])
def test_each_view_refuses_the_wrong_method(people, name, method, allowed, extra):
    url = url_for(people, name, extra)
    wrong = {"get": "put", "post": "get"}[method] if name != "judgments:project-settings" else "delete"
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


@pytest.mark.parametrize("name", ["judgments:projects", "judgments:my-queue", "judgments:reports", "judgments:project-create"])
def test_personal_pages_need_a_login_and_then_work(people, client, name):
    assert client.get(reverse(name)).status_code == 302
    assert people.client("rater").get(reverse(name)).status_code == 200
