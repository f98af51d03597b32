"""Cancel reaches into a real worker: an LLM judge run whose endpoint drips a byte at a time is stopped within
5 s of the lead's Cancel, its requests in flight cut, not waited out (each could take the judge's 300 s deadline)."""

import time

import pytest

from judgments.models import Job, LLMEndpoint
from judgments.ops import automatic, jobs
from judgments.ops.automatic import PairChoice, add_judge
from tests.drip import DripServer
from tests.integration.test_worker import broker, start_worker, wait_for, worker  # noqa: F401 (fixtures)
from tests.judgments.test_automatic_judges import reference_round

pytestmark = pytest.mark.worker


@pytest.fixture
def loopback_worker(monkeypatch, request):
    """The worker, started allowed to call the drip server on loopback as an operator would allow a network."""
    monkeypatch.setenv("OUTBOUND_ALLOWED_NETWORKS", "127.0.0.0/8")
    return request.getfixturevalue("worker")


@pytest.mark.parametrize("broker", ["redis"], indirect=True)
def test_cancel_ends_a_judge_run_in_flight_within_5_seconds(broker, transactional_db, loopback_worker, people):
    with DripServer("drip", interval=0.2) as server:
        round = reference_round(people)
        LLMEndpoint.objects.create(project=people.project, base_url=server.url + "/v1", model="fake-model")
        judge = add_judge(round, name="gpt", kind="llm", settings={"max_retries": 0, "concurrency": 2})
        job = automatic.start_run(judge, PairChoice(), user=people.lead)
        wait_for(job, {Job.State.RUNNING})
        deadline = time.monotonic() + 30
        while len(server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(server.requests) == 2  # both requests are in flight, dripping
        asked = time.monotonic()
        assert jobs.cancel_job(job) == Job.State.RUNNING
        finished = wait_for(job, {Job.State.SUCCEEDED, Job.State.FAILED}, timeout=30)
        took = time.monotonic() - asked
        time.sleep(0.5)
        assert len(server.closed_after) == 2  # the worker hung up on both
    assert took < 5, f"the run ended {took:.1f} s after Cancel"
    assert finished.state == Job.State.SUCCEEDED and finished.result["judged"] == 0
    assert finished.result["cancelled"] == 12 and len(server.requests) == 2
