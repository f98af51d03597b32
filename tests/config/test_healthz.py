"""/healthz: database, broker, storage and cache reachable gives 200 `ok`, anything else 503 `fail`, to anyone, with
no detail in the answer (the detail goes to the log), within about CHECK_TIMEOUT seconds."""

import logging
import os
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager

import pytest
from django.test import Client

from config.health import CHECK_TIMEOUT, check_cache
from tests.factory import make_user
from tests.integration.test_worker import require_redis
from tests.s3 import free_port, s3_settings

pytestmark = pytest.mark.django_db
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def redis_cache(url: str) -> dict:
    return {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}}


@contextmanager
def silent_port():
    """A loopback port that accepts connections and never answers."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        yield silent.getsockname()[1]


def healthz(method: str = "get"):
    return getattr(Client(), method)("/healthz")


def assert_fails_without_detail(response) -> None:
    assert response.status_code == 503
    assert response.content == b"fail\n" and response["Content-Type"] == "text/plain"
    assert "no-cache" in response.get("Cache-Control", "")


def assert_fails_within_the_checks_time(check: str, caplog) -> None:
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="config.health"):
        response = healthz()
    elapsed = time.monotonic() - started
    assert_fails_without_detail(response)
    assert elapsed < CHECK_TIMEOUT + 1.5, elapsed
    assert f"health check {check}: no answer within 2 s" in caplog.text


def test_it_answers_ok_to_an_anonymous_caller_without_a_login_or_a_cookie():
    response = healthz()
    assert response.status_code == 200 and response.content == b"ok\n"
    assert response["Content-Type"] == "text/plain" and not response.cookies
    assert healthz("head").status_code == 200


def test_it_answers_only_reads(client):
    assert client.post("/healthz").status_code == 405


def test_the_storage_check_leaves_nothing_behind(settings):
    assert healthz().status_code == 200
    assert not list((settings.MEDIA_ROOT / "healthz").iterdir())


def test_a_redis_broker_that_answers_is_ok(settings):
    require_redis(REDIS_URL)
    settings.CELERY_BROKER_URL = REDIS_URL
    assert healthz().status_code == 200


def test_a_broker_that_is_down_fails_and_only_the_log_says_which(settings, caplog):
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    with caplog.at_level(logging.ERROR, logger="config.health"):
        response = healthz()
    assert_fails_without_detail(response)
    assert "health check broker failed: ConnectionError" in caplog.text
    assert "database" not in caplog.text and "storage" not in caplog.text and "cache" not in caplog.text


def test_a_filesystem_broker_whose_folder_is_gone_fails(settings, tmp_path, caplog):
    missing = str(tmp_path / "no-such-broker" / "queue")
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {**settings.CELERY_BROKER_TRANSPORT_OPTIONS, "data_folder_in": missing}
    with caplog.at_level(logging.ERROR, logger="config.health"):
        assert_fails_without_detail(healthz())
    assert f"data_folder_in {missing} is not a folder" in caplog.text


def test_an_s3_storage_that_answers_is_ok_and_keeps_no_object(s3_bucket):
    assert healthz().status_code == 200
    assert s3_bucket.keys() == []


def test_an_s3_storage_that_is_down_fails(settings, monkeypatch, caplog):
    settings.STORAGES = {**settings.STORAGES, "default": s3_settings(monkeypatch, f"http://127.0.0.1:{free_port()}", "gone")}
    with caplog.at_level(logging.ERROR, logger="config.health"):
        assert_fails_without_detail(healthz())
    assert "health check storage" in caplog.text and "broker" not in caplog.text


def test_a_storage_that_hangs_fails_within_the_checks_time(settings, monkeypatch, caplog):
    with silent_port() as port:
        endpoint = f"http://127.0.0.1:{port}"
        settings.STORAGES = {**settings.STORAGES, "default": s3_settings(monkeypatch, endpoint, f"b{uuid.uuid4().hex[:8]}")}
        assert_fails_within_the_checks_time("storage", caplog)


def test_a_redis_cache_that_answers_is_ok_and_keeps_no_key(settings):
    import redis

    require_redis(REDIS_URL)
    settings.CACHES = redis_cache(REDIS_URL)
    assert healthz().status_code == 200
    assert redis.Redis.from_url(REDIS_URL).keys("*healthz*") == []


def test_a_cache_that_is_down_fails_and_only_the_log_says_which(settings, caplog):
    settings.CACHES = redis_cache(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    with caplog.at_level(logging.ERROR, logger="config.health"):
        assert_fails_without_detail(healthz())
    assert "health check cache failed: ConnectionError" in caplog.text
    assert "database" not in caplog.text and "broker" not in caplog.text and "storage" not in caplog.text


def test_a_cache_that_is_down_fails_for_a_caller_with_a_session_too(settings):
    """A browser of a logged-in person sends its session cookie: its user is not loaded (from the cache) here."""
    client = Client(raise_request_exception=False)
    client.force_login(make_user("mia"))
    settings.CACHES = redis_cache(f"redis://127.0.0.1:{free_port()}/0")
    assert_fails_without_detail(client.get("/healthz"))


def test_a_cache_that_hangs_fails_within_the_checks_time(settings, caplog):
    with silent_port() as port:
        settings.CACHES = redis_cache(f"redis://127.0.0.1:{port}/0")
        assert_fails_within_the_checks_time("cache", caplog)


def test_the_cache_check_itself_gives_up_on_a_hanging_cache(settings):
    """Past the answer's 2 s, the check's own thread stops waiting too, rather than holding it for good."""
    import redis

    with silent_port() as port:
        settings.CACHES = redis_cache(f"redis://127.0.0.1:{port}/0")
        started = time.monotonic()
        with pytest.raises(redis.TimeoutError):
            check_cache()
        elapsed = time.monotonic() - started
    assert elapsed < CHECK_TIMEOUT + 1, elapsed


def test_the_apps_redis_cache_gives_up_on_a_silent_server_in_seconds():
    """Every logged-in request reads the cache: a hung Redis must cost a request seconds, not a thread for good.
    The settings as CACHE_URL=redis://... builds them, in a process of their own."""
    from tests.config.test_settings import ROOT
    from tests.drip import DripServer

    script = ("import time, django; django.setup(); from django.core.cache import cache; started = time.monotonic()\n"
              "try:\n    cache.get('anything')\nexcept Exception as error:\n"
              "    print(type(error).__name__, round(time.monotonic() - started, 1))")
    with DripServer("silent") as server:
        env = {**os.environ, "DEBUG": "true", "DJANGO_SETTINGS_MODULE": "config.settings",
               "CACHE_URL": f"redis://127.0.0.1:{server.port}/0"}
        result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    kind, seconds = result.stdout.split()
    assert kind == "TimeoutError" and 4.5 <= float(seconds) < 7, result.stdout + result.stderr
