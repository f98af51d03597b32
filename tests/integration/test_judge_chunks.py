"""A judge run split into chunks, taken by two real Celery workers on Redis: they share the endpoint's limits (in
flight, requests a minute, a 429's pause) and the run's token budget, ask no pair twice, and both stop on Cancel."""

import time

import pytest

from judgments.models import Job, JobChunk, LLMEndpoint, MachineGrade
from judgments.ops import automatic, jobs
from judgments.ops.automatic import PairChoice, add_judge
from tests.integration.test_worker import broker, start_worker, wait_for  # noqa: F401 (fixtures)
from tests.judges.fake_llm import FakeLLM, Reply
from tests.judgments.test_automatic_judges import reference_round

pytestmark = pytest.mark.worker
ENDED = {Job.State.SUCCEEDED, Job.State.PARTIAL, Job.State.FAILED}


@pytest.fixture
def two_workers(monkeypatch, request):
    """Two workers allowed to call the fake server on loopback, splitting runs into chunks of 3 pairs."""
    monkeypatch.setenv("OUTBOUND_ALLOWED_NETWORKS", "127.0.0.0/8")
    monkeypatch.setenv("JUDGE_CHUNK_PAIRS", "3")
    start = request.getfixturevalue("start_worker")
    return start(), start()


def llm_judge(people, server, *, in_flight=8, per_minute=0, **settings):
    round = reference_round(people)  # 12 pairs: 4 chunks
    LLMEndpoint.objects.create(project=people.project, base_url=server.base_url, model="fake-model",
                               max_in_flight=in_flight, requests_per_minute=per_minute, tokens_per_minute=0)
    return add_judge(round, name="gpt", kind="llm", settings={"concurrency": 2, "backoff": 0.0, **settings})


def chunk_workers(job) -> set[str]:
    return set(JobChunk.objects.filter(job=job).exclude(worker="").values_list("worker", flat=True))


@pytest.mark.parametrize("broker", ["redis"], indirect=True)
def test_two_workers_share_the_chunks_and_the_endpoints_limits_and_ask_no_pair_twice(broker, transactional_db,
                                                                                      two_workers, people):
    with FakeLLM(latency=0.4) as server:
        judge = llm_judge(people, server, in_flight=3, per_minute=300)  # 3 at once (the workers could 4), 1 each 0.2 s
        job = automatic.start_run(judge, PairChoice(), user=people.lead)
        finished = wait_for(job, ENDED, timeout=90)
        starts = sorted(request.started for request in server.requests)
    assert finished.state == Job.State.SUCCEEDED, finished.error
    result = finished.result
    assert (result["chosen"], result["judged"], result["cancelled"], result["requests"]) == (12, 12, 0, 12)
    assert (result["prompt_tokens"], result["completion_tokens"]) == (1200, 60)
    assert len(server.requests) == 12 and len({request.raw for request in server.requests}) == 12  # none twice
    assert MachineGrade.objects.filter(judge=judge).count() == 12
    assert len(chunk_workers(job)) == 2, "both workers took chunks"
    assert server.max_in_flight == 3
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert min(gaps) >= 0.15, f"requests closer than the 0.2 s the budget allows: {min(gaps):.3f} s"
    assert set(JobChunk.objects.filter(job=job).values_list("state", flat=True)) == {JobChunk.State.DONE}


@pytest.mark.parametrize("broker", ["redis"], indirect=True)
def test_a_429s_retry_after_pauses_both_workers(broker, transactional_db, two_workers, people):
    with FakeLLM(latency=0.3) as server:
        judge = llm_judge(people, server, max_retries=2)
        calls = []

        def answer(request):
            calls.append(request)
            return Reply.status_code(429, retry_after="2") if len(calls) == 6 else Reply()

        server.answer = answer
        job = automatic.start_run(judge, PairChoice(), user=people.lead)
        finished = wait_for(job, ENDED, timeout=90)
        refused = calls[5]
        # A request whose worker took its slot in the moment between the 429's answer and its reading is no breach.
        after = [request.started for request in server.requests if request.started > refused.finished + 0.05]
    assert finished.state == Job.State.SUCCEEDED and finished.result["judged"] == 12, finished.error
    assert len(chunk_workers(job)) == 2
    assert after and min(after) - refused.finished >= 1.9, "a request started during the pause"


@pytest.mark.parametrize("broker", ["redis"], indirect=True)
def test_the_token_budget_stops_every_worker_and_keeps_what_they_got(broker, transactional_db, two_workers, people):
    with FakeLLM(latency=0.4) as server:  # 105 tokens a reply
        judge = llm_judge(people, server)
        job = automatic.start_run(judge, PairChoice(), user=people.lead, token_budget=300)
        finished = wait_for(job, ENDED, timeout=90)
        asked, kept = len(server.requests), MachineGrade.objects.filter(judge=judge).count()
        again = wait_for(automatic.start_run(judge, PairChoice(), user=people.lead), ENDED, timeout=90)
        asked_again = len(server.requests) - asked
    assert finished.state == Job.State.SUCCEEDED, finished.error
    result = finished.result
    used = result["prompt_tokens"] + result["completion_tokens"]
    assert used == 105 * asked and 300 <= used < 300 + 4 * 105  # at most the 4 in flight when it was reached
    assert result["ended"] == f"stopped at the token budget: {used:,} tokens used"
    assert finished.progress_message == f"Stopped at the token budget: {used:,} tokens used"
    assert result["judged"] == asked == kept < 12
    assert result["cancelled"] == 12 - asked
    # The next run, without a budget, asks only the rest.
    assert (again.result["skipped"], again.result["judged"], asked_again) == (asked, 12 - asked, 12 - asked)


@pytest.mark.parametrize("broker", ["redis"], indirect=True)
def test_cancel_stops_both_workers_chunks_within_seconds(broker, transactional_db, two_workers, people):
    with FakeLLM(latency=20) as server:  # every answer would take 20 s
        judge = llm_judge(people, server, max_retries=0)
        job = automatic.start_run(judge, PairChoice(), user=people.lead)
        deadline = time.monotonic() + 60
        while len(server.requests) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(server.requests) == 4 and len(chunk_workers(job)) == 2  # two chunks, two workers, 2 requests each
        asked = time.monotonic()
        assert jobs.cancel_job(job) == Job.State.RUNNING
        finished = wait_for(job, ENDED, timeout=30)
        took = time.monotonic() - asked
    assert took < 5, f"the run ended {took:.1f} s after Cancel"
    assert finished.state == Job.State.SUCCEEDED and finished.result["judged"] == 0
    assert finished.result["cancelled"] == 12 and len(server.requests) == 4
    assert set(JobChunk.objects.filter(job=job).values_list("state", flat=True)) <= {JobChunk.State.DONE,
                                                                                      JobChunk.State.CANCELLED}


@pytest.mark.parametrize("broker", ["filesystem"], indirect=True)
def test_with_the_embedded_broker_one_worker_takes_the_chunks_one_after_another(broker, transactional_db, monkeypatch,
                                                                               request, people):
    monkeypatch.setenv("OUTBOUND_ALLOWED_NETWORKS", "127.0.0.0/8")
    monkeypatch.setenv("JUDGE_CHUNK_PAIRS", "5")
    worker = request.getfixturevalue("start_worker")()
    with FakeLLM(latency=0.05) as server:
        judge = llm_judge(people, server, in_flight=1)
        job = automatic.start_run(judge, PairChoice(), user=people.lead, token_budget=10_000)
        finished = wait_for(job, ENDED, timeout=90)
    assert finished.state == Job.State.SUCCEEDED, finished.error
    assert (finished.result["judged"], len(server.requests), server.max_in_flight) == (12, 12, 1)
    assert "ended" not in finished.result
    chunks = JobChunk.objects.filter(job=job).order_by("index")
    assert [len(chunk.items) for chunk in chunks] == [5, 5, 2]
    assert {chunk.worker for chunk in chunks} == {finished.worker} and finished.worker.endswith(f":{worker.pid}")
