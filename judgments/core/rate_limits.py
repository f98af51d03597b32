"""Limits on what every worker together asks of a project's LLM endpoint, and a run's token budget.

Each endpoint (`LLMEndpoint`) has three limits: requests in flight at once, requests a minute and tokens a minute
(0: no limit). They are counted where every worker sees them: in Redis (6 or later) when the broker or the cache
is Redis (one Lua script per step, so that two workers never both take the last slot), else in this process (the
embedded setup's single worker). The LLM judge holds a `RunLimiter` (its ``limiter`` hook, `judgments.judges.llm.Limiter`)
and knows nothing of Redis.

- Requests and tokens a minute are paced, not burst: a request may start when the endpoint's request clock and
  token clock have reached now (GCRA without burst tolerance), and moves them on by 60/rpm seconds and by
  tokens x 60/tpm seconds. So no second ever sees more than rpm/60 requests start (rounded up), nor any minute
  more than rpm. A request's tokens are estimated when it starts (prompt characters / 4 + max_tokens) and
  corrected when it ends, with the tokens the endpoint counted.
- In flight: a slot per request, held until it ends, or for ``lease`` seconds (the judge's deadline and a margin)
  when its worker died holding it.
- A 429's Retry-After pauses every worker: one "pause until" time per endpoint, which only grows.
- A run's token budget: the tokens its requests cost so far (all workers' chunks), counted when each ends; once
  they reach the budget no request of the run starts (those in flight finish).
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from dataclasses import dataclass
from functools import cache

from django.conf import settings

POLL = 0.25  # the longest wait between two looks, so that a stop is seen at once
FULL_WAIT = 0.02  # seconds before looking again when every slot is taken


@dataclass(frozen=True)
class Limits:
    concurrency: int
    requests_per_minute: int  # 0: no limit
    tokens_per_minute: int  # 0: no limit

    @property
    def request_interval(self) -> float:
        return 60.0 / self.requests_per_minute if self.requests_per_minute else 0.0

    @property
    def token_interval(self) -> float:
        return 60.0 / self.tokens_per_minute if self.tokens_per_minute else 0.0


BUDGET_SPENT = -1.0  # try_acquire's answer when the run's budget is spent


class LocalBackend:
    """The counters in this process: for one worker (the embedded broker), or tests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[str, dict[str, float]] = {}
        self._clocks: dict[str, float] = {}
        self._paused: dict[str, float] = {}
        self._used: dict[str, int] = {}

    def try_acquire(self, key: str, holder: str, limits: Limits, tokens: int, lease: float, budget_key: str,
                    budget: int) -> float:
        """0 when `holder` got a slot; else the seconds to wait, or BUDGET_SPENT."""
        now = time.monotonic()
        with self._lock:
            if budget and self._used.get(budget_key, 0) >= budget:
                return BUDGET_SPENT
            paused = self._paused.get(key, 0.0)
            if paused > now:
                return paused - now
            slots = {name: until for name, until in self._slots.get(key, {}).items() if until > now}
            self._slots[key] = slots
            if len(slots) >= limits.concurrency:
                return FULL_WAIT
            ready = max(self._clocks.get(key + ":requests", 0.0), self._clocks.get(key + ":tokens", 0.0))
            if ready > now:
                return ready - now
            self._clocks[key + ":requests"] = now + limits.request_interval
            self._clocks[key + ":tokens"] = now + tokens * limits.token_interval
            slots[holder] = now + lease
            return 0.0

    def release(self, key: str, holder: str, limits: Limits, correction: int, budget_key: str, used: int) -> None:
        with self._lock:
            self._slots.get(key, {}).pop(holder, None)
            if correction and key + ":tokens" in self._clocks:
                self._clocks[key + ":tokens"] += correction * limits.token_interval
            if used:
                self._used[budget_key] = self._used.get(budget_key, 0) + used

    def pause(self, key: str, seconds: float) -> None:
        with self._lock:
            self._paused[key] = max(self._paused.get(key, 0.0), time.monotonic() + seconds)

    def used(self, budget_key: str) -> int:
        with self._lock:
            return self._used.get(budget_key, 0)

    def forget(self, budget_key: str) -> None:
        with self._lock:
            self._used.pop(budget_key, None)


# KEYS: slots (sorted set: holder -> lease end), request clock, token clock, pause until, the run's tokens used.
# ARGV: holder, concurrency, request interval, token interval, tokens, lease, budget. Times are Redis's own (TIME),
# so that workers' clocks need not agree. Returns "0" (a slot), "-1" (budget spent) or the seconds to wait.
ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local budget = tonumber(ARGV[7])
if budget > 0 and tonumber(redis.call('GET', KEYS[5]) or '0') >= budget then return '-1' end
local paused = tonumber(redis.call('GET', KEYS[4]) or '0')
if paused > now then return string.format('%.6f', paused - now) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return '0.02' end
local ready = math.max(tonumber(redis.call('GET', KEYS[2]) or '0'), tonumber(redis.call('GET', KEYS[3]) or '0'))
if ready > now then return string.format('%.6f', ready - now) end
redis.call('SET', KEYS[2], string.format('%.6f', now + tonumber(ARGV[3])), 'EX', 3600)
redis.call('SET', KEYS[3], string.format('%.6f', now + tonumber(ARGV[5]) * tonumber(ARGV[4])), 'EX', 3600)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[6]), ARGV[1])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[6])) + 60)
return '0'
"""
# KEYS: slots, token clock, the run's tokens used. ARGV: holder, token correction x interval, tokens used.
RELEASE = """
redis.call('ZREM', KEYS[1], ARGV[1])
local shift = tonumber(ARGV[2])
if shift ~= 0 and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('SET', KEYS[2], string.format('%.6f', tonumber(redis.call('GET', KEYS[2])) + shift), 'KEEPTTL')
end
if tonumber(ARGV[3]) > 0 then
  redis.call('INCRBY', KEYS[3], ARGV[3])
  redis.call('EXPIRE', KEYS[3], 86400)
end
return 1
"""
PAUSE = """
local t = redis.call('TIME')
local until_ = tonumber(t[1]) + tonumber(t[2]) / 1000000 + tonumber(ARGV[1])
if until_ > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], string.format('%.6f', until_), 'EX', math.ceil(tonumber(ARGV[1])) + 60)
end
return 1
"""


class RedisBackend:
    """The counters in Redis, shared by every worker and process that uses the same Redis database."""

    PREFIX = "verdict:llm-limits:"

    def __init__(self, url: str) -> None:
        import redis

        self.client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=10)
        self._acquire = self.client.register_script(ACQUIRE)
        self._release = self.client.register_script(RELEASE)
        self._pause = self.client.register_script(PAUSE)

    def _keys(self, key: str) -> list[str]:
        base = self.PREFIX + key
        return [base + ":slots", base + ":requests", base + ":tokens", base + ":paused"]

    def try_acquire(self, key: str, holder: str, limits: Limits, tokens: int, lease: float, budget_key: str,
                    budget: int) -> float:
        answer = self._acquire(keys=[*self._keys(key), self.PREFIX + budget_key],
                               args=[holder, limits.concurrency, limits.request_interval, limits.token_interval, tokens,
                                     lease, budget])
        return float(answer)

    def release(self, key: str, holder: str, limits: Limits, correction: int, budget_key: str, used: int) -> None:
        slots, _, tokens, _ = self._keys(key)
        self._release(keys=[slots, tokens, self.PREFIX + budget_key],
                      args=[holder, correction * limits.token_interval, used])

    def pause(self, key: str, seconds: float) -> None:
        self._pause(keys=[self._keys(key)[3]], args=[seconds])

    def used(self, budget_key: str) -> int:
        return int(self.client.get(self.PREFIX + budget_key) or 0)

    def forget(self, budget_key: str) -> None:
        self.client.delete(self.PREFIX + budget_key)


LOCAL = LocalBackend()


def shared_url() -> str | None:
    """The Redis every worker reaches: the broker's, else the cache's; None in the embedded setup."""
    for url in (settings.CELERY_BROKER_URL, settings.CACHE_URL):
        if url.startswith(("redis://", "rediss://")):
            return url
    return None


@cache
def _redis_backend(url: str) -> RedisBackend:
    return RedisBackend(url)


def backend() -> LocalBackend | RedisBackend:
    url = shared_url()
    return _redis_backend(url) if url else LOCAL


class RunLimiter:
    """A run's `judgments.judges.llm.Limiter`: the endpoint's limits (`endpoint_key`) and the run's token budget
    (`run_key`: the same for every chunk of one run; `budget` 0 for none)."""

    def __init__(self, endpoint_key: str, limits: Limits, *, run_key: str, budget: int = 0, lease: float = 360.0,
                 store: LocalBackend | RedisBackend | None = None) -> None:
        if limits.concurrency < 1 or limits.requests_per_minute < 0 or limits.tokens_per_minute < 0 or budget < 0:
            raise ValueError(f"limits must be positive (in flight at least 1): {limits}, budget {budget}")
        self.key, self.limits, self.run_key, self.budget, self.lease = endpoint_key, limits, run_key, budget, lease
        self.store = store if store is not None else backend()
        self.budget_reached = False

    def acquire(self, tokens: int, stop: threading.Event) -> tuple[str, int] | None:
        holder = uuid.uuid4().hex
        while not stop.is_set():
            wait = self.store.try_acquire(self.key, holder, self.limits, tokens, self.lease, self.run_key, self.budget)
            if wait == BUDGET_SPENT:
                self.budget_reached = True
                return None
            if wait == 0:
                return holder, tokens
            stop.wait(min(wait, POLL))
        return None

    def release(self, ticket: tuple[str, int], tokens: int) -> None:
        holder, reserved = ticket
        self.store.release(self.key, holder, self.limits, tokens - reserved, self.run_key, tokens)

    def pause(self, seconds: float) -> None:
        self.store.pause(self.key, seconds)

    def used(self) -> int:
        """The tokens the run's requests cost so far, every worker's."""
        return self.store.used(self.run_key)


def endpoint_limits(endpoint) -> Limits:
    """An `LLMEndpoint`'s limits."""
    return Limits(endpoint.max_in_flight, endpoint.requests_per_minute, endpoint.tokens_per_minute)


def for_run(endpoint, run_key: str, *, budget: int | None = None, lease: float = 360.0) -> RunLimiter:
    """The limiter of one run against the project's endpoint: every worker of the run builds the same one."""
    return RunLimiter(endpoint_key(endpoint), endpoint_limits(endpoint), run_key=f"run-{run_key}", budget=budget or 0,
                      lease=lease)


def endpoint_key(endpoint) -> str:
    """One endpoint's counters: its project's endpoint at its address (a new address starts afresh)."""
    return f"endpoint-{endpoint.pk}-{hashlib.sha256(endpoint.base_url.encode()).hexdigest()[:16]}"
