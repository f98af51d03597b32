"""The endpoint limits and the run's token budget (`judgments.core.rate_limits`): the in-process counters and the Redis
ones behave the same, and the LLM judge honours them through its limiter hook."""

import os
import threading
import time

import pytest

from judgments.core import rate_limits
from judgments.core.rate_limits import Limits, LocalBackend, RedisBackend, RunLimiter
from judgments.judges import JudgeContext, LLMJudge
from judgments.lib.outbound import Policy
from judgments.lib.scales import GRADED
from tests.judges.fake_llm import FakeLLM, Reply

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/14")


@pytest.fixture(params=["local", "redis"])
def store(request):
    if request.param == "local":
        return LocalBackend()
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        pytest.skip(f"Redis at {REDIS_URL} is not reachable ({exc})")
    backend = RedisBackend(REDIS_URL)
    for key in backend.client.scan_iter(RedisBackend.PREFIX + "*"):
        backend.client.delete(key)
    return backend


def limiter(store, limits, budget=0, run="run-1", key="endpoint-1"):
    return RunLimiter(key, limits, run_key=run, budget=budget, store=store)


def test_no_more_requests_in_flight_than_the_limit_and_a_release_frees_a_slot(store):
    first, second = limiter(store, Limits(2, 0, 0)), limiter(store, Limits(2, 0, 0))  # two workers of one endpoint
    stop = threading.Event()
    tickets = [first.acquire(10, stop), second.acquire(10, stop)]
    got = []
    waiter = threading.Thread(target=lambda: got.append(first.acquire(10, stop)))
    waiter.start()
    time.sleep(0.3)
    assert got == []  # both slots are taken
    second.release(tickets[1], 10)
    waiter.join(timeout=5)
    assert len(got) == 1 and got[0] is not None


def test_requests_a_minute_are_paced_evenly(store):
    paced = limiter(store, Limits(100, 600, 0))  # 10 a second: one every 0.1 s
    stop = threading.Event()
    started = []
    for _ in range(6):
        paced.release(paced.acquire(1, stop), 1)
        started.append(time.monotonic())
    gaps = [b - a for a, b in zip(started, started[1:])]
    assert min(gaps) >= 0.08 and sum(gaps) >= 0.45, gaps


def test_tokens_a_minute_space_requests_by_their_tokens(store):
    paced = limiter(store, Limits(100, 0, 6000))  # 100 tokens a second
    stop = threading.Event()
    before = time.monotonic()
    for _ in range(3):
        paced.release(paced.acquire(30, stop), 30)  # 0.3 s each
    assert time.monotonic() - before >= 0.55


def test_a_pause_holds_every_limiter_of_the_endpoint(store):
    one, other = limiter(store, Limits(4, 0, 0)), limiter(store, Limits(4, 0, 0), run="run-2")
    one.pause(0.6)
    before = time.monotonic()
    other.release(other.acquire(1, threading.Event()), 1)
    assert time.monotonic() - before >= 0.5
    third = limiter(store, Limits(4, 0, 0), key="endpoint-2")  # another endpoint is not paused
    before = time.monotonic()
    third.release(third.acquire(1, threading.Event()), 1)
    assert time.monotonic() - before < 0.3


def test_the_token_budget_is_counted_over_every_limiter_of_the_run(store):
    one, other = limiter(store, Limits(4, 0, 0), budget=100), limiter(store, Limits(4, 0, 0), budget=100)
    stop = threading.Event()
    one.release(one.acquire(50, stop), 60)
    other.release(other.acquire(50, stop), 60)
    assert one.used() == 120 and not one.budget_reached
    assert one.acquire(50, stop) is None and one.budget_reached
    assert other.acquire(50, stop) is None
    store.forget("run-1")
    assert one.used() == 0


def test_a_stop_ends_the_wait(store):
    full = limiter(store, Limits(1, 0, 0))
    stop = threading.Event()
    full.acquire(1, stop)
    threading.Timer(0.3, stop.set).start()
    before = time.monotonic()
    assert full.acquire(1, stop) is None and not full.budget_reached
    assert time.monotonic() - before < 2


def test_limits_are_checked():
    with pytest.raises(ValueError, match="positive"):
        RunLimiter("e", Limits(0, 0, 0), run_key="r", store=LocalBackend())
    with pytest.raises(ValueError, match="positive"):
        RunLimiter("e", Limits(1, -1, 0), run_key="r", store=LocalBackend())


def test_the_shared_counters_are_in_redis_when_the_broker_or_the_cache_is(settings):
    settings.CELERY_BROKER_URL, settings.CACHE_URL = "filesystem://", "locmem://"
    assert rate_limits.shared_url() is None and rate_limits.backend() is rate_limits.LOCAL
    settings.CACHE_URL = REDIS_URL
    assert rate_limits.shared_url() == REDIS_URL and isinstance(rate_limits.backend(), RedisBackend)


# ------------------------------------------------------------------------------------------ the judge's hook


def pairs(n):
    return [JudgeContext(f"query {i}", f"document {i}", GRADED) for i in range(n)]


def judge_for(server, **settings):
    return LLMJudge({"base_url": server.base_url, "model": "fake", "backoff": 0.0, **settings},
                    policy=Policy.of(networks=["127.0.0.0/8"]))


class Recording(RunLimiter):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pauses, self.released = [], []

    def pause(self, seconds):
        self.pauses.append(seconds)
        super().pause(seconds)

    def release(self, ticket, tokens):
        self.released.append(tokens)
        super().release(ticket, tokens)


def test_the_judge_passes_a_429s_retry_after_to_its_limiter_and_gives_back_every_ticket():
    with FakeLLM() as server:
        server.script(Reply.status_code(429, retry_after="0.6"))
        judge = judge_for(server, concurrency=1)
        judge.limiter = Recording("endpoint-1", Limits(4, 0, 0), run_key="run-1", store=LocalBackend())
        verdicts = judge.batch_judge(pairs(2))
    assert [v.grade for v in verdicts] == [2, 2]
    assert judge.limiter.pauses == [0.6] and sorted(judge.limiter.released) == [0, 105, 105]
    assert server.requests[1].started - server.requests[0].finished >= 0.55


def test_a_spent_budget_stops_new_requests_and_keeps_those_in_flight():
    with FakeLLM(latency=0.3) as server:  # each reply costs 105 tokens
        judge = judge_for(server, concurrency=2)
        judge.limiter = limiter(LocalBackend(), Limits(8, 0, 0), budget=300)
        verdicts = judge.batch_judge(pairs(10))
    judged = [v for v in verdicts if v.judged]
    assert len(server.requests) == 4 and len(judged) == 4  # 2 + 2 in flight when the 3rd reply passed 300
    assert judge.limiter.budget_reached and judge.limiter.used() == 420
    assert {v.problem for v in verdicts if not v.judged} == {"cancelled"}
