"""A judge run whose pairs fail says so (issue #28): every pair failing is a failed job with the causes counted; some
failing is "finished with N failures", amber, with the causes, on the job page, the job list and the API's job answer.
Against a fake OpenAI-compatible server on a loopback port, and a closed port."""

import html
import io
import socket

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from api.models import ApiToken, Scope
from judgments.models import Job, LLMEndpoint
from judgments.ops.automatic import add_judge
from tests.factory import run_queued_jobs
from tests.judges.fake_llm import FakeLLM, Reply
from tests.judgments.test_automatic_judges import llm_round, reference_round

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("outbound_loopback")]


def closed_port() -> int:
    """A loopback port nothing listens on: bound, then released."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_through_the_page(people, judge, pairs="all") -> Job:
    response = people.client("lead").post(f"{judge.get_absolute_url()}run/", {"pairs": pairs, "n": "", "seed": ""})
    assert response.status_code == 302
    [job] = run_queued_jobs()
    return job


def api_job(people, job) -> dict:
    _token, secret = ApiToken.issue(user=people.lead, project=people.project, name="ci", scope=Scope.READ)
    response = people.client("lead").get(f"/api/v1/projects/{people.project.slug}/jobs/{job.uuid}",
                                         HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_judge_pointed_at_a_closed_port_is_a_failed_job_that_names_the_cause(people):
    round = reference_round(people)
    LLMEndpoint.objects.create(project=people.project, base_url=f"http://127.0.0.1:{closed_port()}/v1", model="m")
    judge = add_judge(round, name="gpt", kind="llm", settings={"backoff": 0.0, "max_retries": 1})
    job = run_through_the_page(people, judge)

    assert job.state == Job.State.FAILED  # was: green "Succeeded", 0 judged, "12 endpoint failed", no cause
    assert job.error.startswith("Every one of the 12 pairs it tried failed: 12 connection refused. No pair was judged.")
    assert "LLM endpoint" in job.error
    page = html.unescape(people.client("lead").get(job.get_absolute_url()).content.decode())
    assert 'data-state="failed">Failed</strong>' in page and "12 connection refused" in page and "Succeeded" not in page
    jobs_page = people.client("lead").get(f"/p/{people.project.slug}/jobs/").content.decode()
    assert '<td class="state-failed">Failed</td>' in jobs_page
    answer = api_job(people, job)
    assert answer["state"] == "failed" and "12 connection refused" in answer["message"] and answer["failures"] == {}
    judge_page = people.client("lead").get(judge.get_absolute_url()).content.decode()
    assert '<td class="state-failed">Failed</td>' in judge_page
    with pytest.raises(CommandError, match="every pair it tried failed: 12 connection refused"):
        call_command("judge", str(round.uuid), "--judge", "gpt", stdout=io.StringIO(), stderr=io.StringIO())


def test_some_pairs_failing_is_finished_with_failures_amber_with_the_causes_counted(people):
    with FakeLLM() as server:
        def answer(request):
            if "Text of d12" in request.user:
                return Reply.status_code(503)
            if "Text of d22" in request.user:
                return Reply.text("I would rather not say")  # no "Final grade: N": unreadable
            if "Text of d32" in request.user:
                return Reply.slow(1.5)  # past the judge's 0.5 s timeout
            return Reply.text("Final grade: 2")

        server.answer = answer
        round, judge = llm_round(people, server)
        judge.settings = {**judge.settings, "timeout": 0.5}
        judge.save()
        job = run_through_the_page(people, judge)

    assert job.state == Job.State.PARTIAL and job.get_state_display() == "Finished with failures"
    assert job.result["judged"] == 9
    assert job.result["failures"] == {"HTTP status 503": 1, "timeout": 1, "unreadable reply": 1}
    assert job.failure_count == 3 and job.progress_label == "done, 3 failed"
    page = html.unescape(people.client("lead").get(job.get_absolute_url()).content.decode())
    assert 'class="state-partial" data-state="partial">Finished with failures</strong>' in page
    assert "<li>1 HTTP status 503</li>" in page and "<li>1 timeout</li>" in page and "<li>1 unreadable reply</li>" in page
    assert "state-succeeded" not in page and "Retry" in page
    jobs_page = people.client("lead").get(f"/p/{people.project.slug}/jobs/").content.decode()
    assert '<td class="state-partial">Finished with failures</td>' in jobs_page and "done, 3 failed" in jobs_page
    status = people.client("lead").get(f"/p/{people.project.slug}/jobs/{job.uuid}/status/", HTTP_HX_REQUEST="true")
    assert status.status_code == 286 and "Finished with failures" in status.content.decode()  # polling stops
    answer = api_job(people, job)
    assert answer["state"] == "finished_with_failures" and answer["progress"] == 1.0
    assert answer["failures"] == {"HTTP status 503": 1, "timeout": 1, "unreadable reply": 1}
    assert answer["message"] == "Finished with 3 failures: 1 HTTP status 503, 1 timeout, 1 unreadable reply"  # by count, then name
    judge_page = people.client("lead").get(judge.get_absolute_url()).content.decode()
    assert '<td class="state-partial">Finished with failures: 3 failed</td>' in judge_page


def test_a_run_that_finished_with_failures_can_be_retried_and_then_succeeds(people):
    with FakeLLM() as server:
        broken = {"on": True}
        server.answer = lambda request: Reply.status_code(500) if broken["on"] and "Text of d12" in request.user \
            else Reply.text("Final grade: 1")
        round, judge = llm_round(people, server)
        job = run_through_the_page(people, judge)
        assert job.state == Job.State.PARTIAL and job.result["failures"] == {"HTTP status 500": 1}
        broken["on"] = False
        people.client("lead").post(f"/p/{people.project.slug}/jobs/{job.uuid}/retry/")
        [job] = run_queued_jobs()
    assert job.state == Job.State.SUCCEEDED and job.result["judged"] == 1 and job.result["skipped"] == 11
    assert job.result["failures"] == {}
