"""A judge run in chunks, in one process (the embedded setup: the job's worker takes every chunk), the run form's
token budget, and the endpoint's limits on its page. Two real workers: tests/integration/test_judge_chunks.py."""

import pytest

from judgments.models import Job, JobChunk, LLMEndpoint, MachineGrade
from judgments.ops import automatic
from judgments.ops.automatic import PairChoice, add_judge
from tests.factory import run_queued_jobs
from tests.judges.fake_llm import FakeLLM
from tests.judgments.test_automatic_judges import overlap_judge, reference_round


def test_a_run_in_chunks_gives_the_result_of_a_run_in_one_piece(people, settings):
    round = reference_round(people)
    settings.JUDGE_CHUNK_PAIRS = 5
    chunked = overlap_judge(round, name="chunked")
    whole = overlap_judge(round, name="whole")
    automatic.start_run(chunked, PairChoice(), user=people.lead)
    [job] = run_queued_jobs()
    assert job.state == Job.State.SUCCEEDED, job.error
    expected = automatic.run_judge(whole, PairChoice())
    assert {key: value for key, value in job.result.items() if key not in ("judge", "link")} == {
        **{key: value for key, value in expected.items() if key not in ("judge", "outcome")}, "could_not_judge": "none"}
    chunks = list(JobChunk.objects.filter(job=job))
    assert [len(chunk.items) for chunk in chunks] == [5, 5, 2] and {chunk.state for chunk in chunks} == {"done"}
    assert sorted(pk for chunk in chunks for pk in chunk.items) == sorted(round.items.values_list("pk", flat=True))
    assert dict(chunked.grades.values_list("item_id", "grade")) == dict(whole.grades.values_list("item_id", "grade"))


@pytest.mark.usefixtures("outbound_loopback")
def test_a_run_stops_at_its_token_budget_and_keeps_what_it_got(people, settings):
    settings.JUDGE_CHUNK_PAIRS = 3
    round = reference_round(people)
    with FakeLLM() as server:  # 105 tokens a reply
        LLMEndpoint.objects.create(project=people.project, base_url=server.base_url, model="fake-model")
        judge = add_judge(round, name="gpt", kind="llm", settings={"concurrency": 1})
        response = people.client("lead").post(f"{judge.get_absolute_url()}run/", {"pairs": "all", "token_budget": "400"})
        job = Job.objects.get()
        assert response.status_code == 302 and job.params["token_budget"] == 400
        [job] = run_queued_jobs()
    assert job.state == Job.State.SUCCEEDED, job.error
    assert len(server.requests) == 4 and job.result["judged"] == 4 and job.result["cancelled"] == 8
    assert job.result["ended"] == "stopped at the token budget: 420 tokens used"
    assert job.progress_message == "Stopped at the token budget: 420 tokens used"
    assert MachineGrade.objects.filter(judge=judge).count() == 4
    states = list(JobChunk.objects.filter(job=job).values_list("state", flat=True))
    assert states == ["done", "done", "cancelled", "cancelled"]
    page = people.client("lead").get(job.get_absolute_url()).content.decode()
    assert "stopped at the token budget: 420 tokens used" in page


def test_the_run_form_offers_a_budget_beside_the_estimate_only_for_llm_judges(people, settings):
    round = reference_round(people)
    LLMEndpoint.objects.create(project=people.project, base_url="https://llm.example.com/v1", model="m")
    llm = add_judge(round, name="gpt", kind="llm", settings={})
    page = people.client("lead").get(llm.get_absolute_url()).content.decode()
    assert 'name="token_budget"' in page and "Tokens in all (about)" in page
    assert page.index("Tokens in all (about)") < page.index('name="token_budget"')
    overlap = overlap_judge(round)
    assert 'name="token_budget"' not in people.client("lead").get(overlap.get_absolute_url()).content.decode()

    response = people.client("lead").post(f"{llm.get_absolute_url()}run/", {"pairs": "all", "token_budget": "0"}, follow=True)
    assert "Token budget: Ensure this value is greater than or equal to 1." in response.content.decode()
    assert not Job.objects.exists()
    for who, status in (("viewer", 403), ("rater", 403), ("outsider", 404)):
        assert people.client(who).post(f"{llm.get_absolute_url()}run/", {"pairs": "all", "token_budget": "9"}).status_code == status
    assert not Job.objects.exists()


def test_the_endpoint_page_sets_the_shared_limits(people):
    url = f"/p/{people.project.slug}/llm-endpoint/"
    lead = people.client("lead")
    page = lead.get(url).content.decode()
    assert 'name="requests_per_minute"' in page and "counted in each worker process" in page
    lead.post(url, {"base_url": "https://api.example.com/v1", "model": "m", "max_in_flight": "8",
                    "requests_per_minute": "500", "tokens_per_minute": "0"})
    endpoint = LLMEndpoint.objects.get()
    assert (endpoint.max_in_flight, endpoint.requests_per_minute, endpoint.tokens_per_minute) == (8, 500, 0)
    assert 'value="500"' in lead.get(url).content.decode()
    lead.post(url, {"base_url": "https://api.example.com/v1", "model": "m"})  # left empty: kept
    assert LLMEndpoint.objects.get().requests_per_minute == 500

    refused = lead.post(url, {"base_url": "https://api.example.com/v1", "model": "m", "max_in_flight": "0"})
    assert refused.status_code == 200 and "greater than or equal to 1" in refused.content.decode()
    for who, status in (("viewer", 403), ("rater", 403), ("outsider", 404)):
        assert people.client(who).post(url, {"base_url": "https://api.example.com/v1", "model": "m",
                                             "max_in_flight": "1"}).status_code == status
    assert LLMEndpoint.objects.get().max_in_flight == 8


@pytest.mark.usefixtures("outbound_loopback")
def test_the_judge_command_stops_at_its_token_budget(people):
    import io

    from django.core.management import call_command

    round = reference_round(people)
    with FakeLLM() as server:
        LLMEndpoint.objects.create(project=people.project, base_url=server.base_url, model="fake-model")
        add_judge(round, name="gpt", kind="llm", settings={"concurrency": 1})
        out = io.StringIO()
        call_command("judge", str(round.uuid), "--judge", "gpt", "--token-budget", "200", stdout=out, stderr=io.StringIO())
    assert len(server.requests) == 2
    assert "2 pairs judged of 12 chosen" in out.getvalue()
    assert out.getvalue().strip().endswith("; stopped at the token budget: 210 tokens used")


def test_a_chunk_whose_worker_went_silent_is_taken_again_without_its_graded_pairs(people, settings, monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    from judgments.ops import judge_runs

    settings.JUDGE_CHUNK_PAIRS, settings.JOB_STALE_AFTER_SECONDS = 5, 1
    round = reference_round(people)
    judge = overlap_judge(round)
    real_run_chunk, died = judge_runs.run_chunk, []

    def dies_in_the_middle(job, judge, grader, chunk, limiter, report=lambda: None):
        if chunk.index == 1 and not died:  # grades 2 of its 5 pairs, then its worker is gone
            died.append(chunk.items[:2])
            automatic.grade_items(judge, grader, chunk.items[:2], progress=lambda n: None)
            JobChunk.objects.filter(pk=chunk.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=5))
            return
        real_run_chunk(job, judge, grader, chunk, limiter, report)

    monkeypatch.setattr(judge_runs, "run_chunk", dies_in_the_middle)
    automatic.start_run(judge, PairChoice(), user=people.lead)
    [job] = run_queued_jobs()
    assert job.state == Job.State.SUCCEEDED, job.error
    assert (job.result["judged"], job.result["graded_by_a_lost_worker"], job.result["cancelled"]) == (10, 2, 0)
    assert judge.grades.count() == 12 and set(JobChunk.objects.filter(job=job).values_list("state", flat=True)) == {"done"}


def test_the_chunks_command_lends_a_running_run_one_more_worker(people):
    import io

    from django.core.management import call_command

    from judgments.ops import judge_runs

    round = reference_round(people)
    judge = overlap_judge(round)
    job = automatic.start_run(judge, PairChoice(), user=people.lead)
    out = io.StringIO()
    call_command("run_judge_chunks", str(job.uuid), stdout=out)
    assert out.getvalue().strip() == f"job {job.uuid}: 0 chunks graded here (the job is queued; no chunk was waiting)"

    Job.objects.filter(pk=job.pk).update(state=Job.State.RUNNING, attempts=1)
    job.refresh_from_db()
    judge_runs.split(job, sorted(round.items.values_list("pk", flat=True)), 5)
    call_command("run_judge_chunks", str(job.uuid), stdout=out)
    assert out.getvalue().strip().endswith(f"job {job.uuid}: 3 chunks graded here")
    assert judge.grades.count() == 12
    assert [chunk.result["judged"] for chunk in JobChunk.objects.filter(job=job)] == [5, 5, 2]
