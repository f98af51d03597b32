"""The project's home answers "where are we": rounds with exact progress and their gate, the latest
agreement report and evaluation, jobs, and what needs a lead's attention. Raters land on their queue."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from judgments.models import Adjudication, Job, Judgment, Round
from judgments.ops import jobs
from tests.evaluation.test_evaluations import evaluated, setup  # noqa: F401 (a fixture)
from tests.factory import Role, add_member, make_user, run_queued_jobs
from tests.judgments.test_agreement_and_exports import graded_round, url

pytestmark = pytest.mark.django_db


@pytest.fixture
def rosa(people):
    rosa = make_user("rosa")
    add_member(people.project, rosa, Role.RATER)
    return rosa


def overview(client, project) -> str:
    response = client.get(reverse("judgments:project", args=[project.slug]))
    assert response.status_code == 200
    return response.content.decode()


def attention(page: str) -> list[str]:
    section = page[page.index('id="attention-title"'):page.index('id="rounds-title"')]
    return [re.sub(r"\s+", " ", text) for text in re.findall(r"<li[^>]*><a [^>]*>(.*?)</a></li>", section, re.S)]


def computed_report(people, round: Round) -> None:
    people.client("lead").post(url("round-agreement-compute", round))
    [job] = run_queued_jobs()
    assert job.state == Job.State.SUCCEEDED, job.error


def test_each_round_shows_its_exact_progress_and_its_gate(people, rosa):
    round = graded_round(people, rosa)
    items = list(round.items.all())
    judged = {item.pk: Judgment.objects.filter(item=item).count() for item in items}
    done, needed = sum(min(judged[item.pk], item.required) for item in items), sum(item.required for item in items)
    page = overview(people.client("lead"), people.project)
    assert f'data-progress="{done}/{needed}"' in page and "no report yet" in page
    computed_report(people, round)
    page = overview(people.client("viewer"), people.project)
    assert "gate-word-pass" in page and "Latest agreement report" in page and "Gate of 0.60: " in page
    Round.objects.filter(pk=round.pk).update(gate=0.99)
    page = overview(people.client("lead"), people.project)
    assert "gate-word-fail" in page
    assert any(text.startswith("Round 1: the gate fails") for text in attention(page))


def test_pairs_waiting_for_adjudication_are_counted_as_the_queue_lists_them(people, rosa):
    round = graded_round(people, rosa)
    Round.objects.filter(pk=round.pk).update(adjudication_margin=1)
    client = people.client("lead")
    queued = client.get(url("round-adjudication", round)).content.decode().count(' id="pair-')
    assert queued > 1
    assert f"Round 1: {queued} pairs whose grades differ by 1 or more wait for a final label." in attention(overview(client, people.project))
    first = re.search(r' id="pair-([0-9a-f-]+)"', client.get(url("round-adjudication", round)).content.decode())[1]
    client.post(url("round-adjudicate", round, first), {"grade": "1"})
    assert Adjudication.objects.count() == 1
    assert f"Round 1: {queued - 1} pairs whose grades" in " ".join(attention(overview(client, people.project)))


def test_failed_jobs_and_flagged_pairs_need_attention_with_links_to_them(people, rosa):
    round = graded_round(people, rosa)
    job, old = (jobs.start_job(kind="selfcheck", project=people.project, owner=people.lead, params={}) for _ in range(2))
    Job.objects.filter(pk=job.pk).update(state=Job.State.FAILED, error="OSError: disk full\nmore", finished_at=timezone.now())
    Job.objects.filter(pk=old.pk).update(state=Job.State.FAILED, error="KeyError: gone", finished_at=timezone.now() - timedelta(days=8))
    page = overview(people.client("lead"), people.project)
    items = attention(page)
    assert f"Job “{job.label}” failed: OSError: disk full." in items
    assert not any("KeyError" in item for item in items)  # a week later a failure is the Jobs page's, not news
    assert f'href="{job.get_absolute_url()}"' in page
    unrateable = Judgment.objects.filter(item__round=round, grade__isnull=True).count()
    assert unrateable == 1 and f"Round 1: {unrateable} unrateable, 0 put off for later." in items
    assert f'href="{round.get_absolute_url()}flags/"' in page


def test_the_latest_evaluation_shows_the_top_of_its_leaderboard(people, setup):  # noqa: F811
    round, run_a, run_b, _ = setup
    found = evaluated(people, round, [run_a, run_b])
    page = overview(people.client("viewer"), people.project)
    means = {row["run"]: row["mean"]["nDCG@5"] for row in found.results["runs"]}
    best, other = sorted(means, key=means.get, reverse=True)
    leaders = page[page.index('class="leaders"'):]
    assert leaders.index(best) < leaders.index(other)
    assert f"{means[best]:.4f}" in leaders and "by nDCG@5" in page


def test_raters_land_on_their_work_queue_outsiders_get_404_and_viewers_no_lead_controls(people):
    project_url = reverse("judgments:project", args=[people.project.slug])
    response = people.client("rater").get(project_url)
    assert response.status_code == 302 and response["Location"] == reverse("judgments:my-queue")
    assert people.client("outsider").get(project_url).status_code == 404
    assert "worker self-check" not in overview(people.client("viewer"), people.project)
    assert "worker self-check" in overview(people.client("lead"), people.project)
    assert people.client("lead").post(project_url).status_code == 405
