"""API_RATE_LIMIT: requests per token per minute, counted in the cache that every web process shares."""

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from django.utils import timezone

from api.models import ApiToken, digest_of
from tests.integration.test_worker import require_redis

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/10")


def early_in_a_minute(needed: float = 20) -> None:
    """Counts are per clock minute: a test counting across a minute's end would start afresh halfway."""
    left = 60 - time.time() % 60
    if left < needed:
        time.sleep(left + 0.1)


def test_the_request_past_the_limit_is_a_429_with_retry_after(world, settings):
    settings.API_RATE_LIMIT = 3
    early_in_a_minute()
    client = world.client("viewer")
    assert [client.get("/api/v1/projects").status_code for _ in range(3)] == [200, 200, 200]
    refused = client.get("/api/v1/projects")
    assert refused.status_code == 429
    assert refused.json()["code"] == "rate_limited" and "API_RATE_LIMIT" in refused.json()["detail"]
    assert 1 <= int(refused["Retry-After"]) <= 60
    # Another token, even its owner's, counts apart.
    assert world.client("lead").get("/api/v1/projects").status_code == 200


def test_the_count_starts_again_the_next_minute(world, settings, monkeypatch):
    settings.API_RATE_LIMIT = 2
    early_in_a_minute()
    client = world.client("viewer")
    for _ in range(2):
        client.get("/api/v1/projects")
    assert client.get("/api/v1/projects").status_code == 429
    later = timezone.now() + timedelta(seconds=61)
    monkeypatch.setattr("api.auth.timezone.now", lambda: later)
    assert client.get("/api/v1/projects").status_code == 200


def test_zero_turns_the_limit_off(world, settings):
    settings.API_RATE_LIMIT = 0
    client = world.client("viewer")
    assert {client.get("/api/v1/projects").status_code for _ in range(30)} == {200}


def test_refused_tokens_are_not_counted_against_a_valid_one(world, settings):
    settings.API_RATE_LIMIT = 2
    for _ in range(5):
        world.client("wrong").get("/api/v1/projects")
    assert world.client("viewer").get("/api/v1/projects").status_code == 200


def redis_or_skip():
    import redis

    require_redis(REDIS_URL)
    redis.Redis.from_url(REDIS_URL).flushdb()


def test_with_a_redis_cache_every_process_counts_together(world, settings):
    """Another process (as a second gunicorn worker would) spends the token's requests; this one is then refused."""
    redis_or_skip()
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
    settings.API_RATE_LIMIT = 3
    token = ApiToken.objects.get(digest=digest_of(world.tokens["viewer"]))
    early_in_a_minute(40)
    spend = ("import django; django.setup(); from types import SimpleNamespace; from api.auth import enforce_rate_limit; "
             f"[enforce_rate_limit(SimpleNamespace(pk={token.pk})) for _ in range(3)]")
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "true", "CACHE_URL": REDIS_URL, "API_RATE_LIMIT": "3"}
    subprocess.run([sys.executable, "-c", spend], cwd=ROOT, env=environment, check=True, timeout=60)
    refused = world.client("viewer").get("/api/v1/projects")
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
