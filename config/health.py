"""/healthz, for load balancers and compose health checks: is the database, the Celery broker, the file
storage and the cache reachable? Anonymous callers get `ok` (200) or `fail` (503) and nothing more; which part
failed, and why, goes to the server's log. The checks run side by side, each given CHECK_TIMEOUT seconds."""

import logging
import os
import uuid
from concurrent.futures import ThreadPoolExecutor, wait

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.cache import DEFAULT_CACHE_ALIAS
from django.core.cache.backends.redis import RedisCache
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

CHECK_TIMEOUT = 2.0
FILESYSTEM_BROKER_FOLDERS = ("data_folder_in", "data_folder_out", "control_folder")

log = logging.getLogger(__name__)
# Threads that outlive a request keep their storage client (django-storages makes one per thread; making one
# costs about 0.3 s). A check stuck past its time holds its thread until it ends; more threads than checks
# leave room for the next request's checks meanwhile.
_pool = ThreadPoolExecutor(max_workers=12, thread_name_prefix="healthz")


def check_database() -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    finally:
        connection.close()  # the check's own thread's connection


def check_broker() -> None:
    url = settings.CELERY_BROKER_URL
    if url.startswith("filesystem://"):
        from config.celery import app

        app.conf.broker_url  # noqa: B018 (configuring the app creates the broker's folders, as the worker's start does)
        for key in FILESYSTEM_BROKER_FOLDERS:
            folder = settings.CELERY_BROKER_TRANSPORT_OPTIONS[key]
            if not (os.path.isdir(folder) and os.access(folder, os.R_OK | os.W_OK | os.X_OK)):
                raise OSError(f"the filesystem broker's {key} {folder} is not a folder this process may write in")
    elif url.startswith(("redis://", "rediss://")):
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=CHECK_TIMEOUT, socket_timeout=CHECK_TIMEOUT)
        try:
            client.ping()
        finally:
            client.close()
    elif not url.startswith("memory://"):
        from kombu import Connection

        with Connection(url, connect_timeout=CHECK_TIMEOUT) as broker:
            broker.ensure_connection(max_retries=1)


def check_storage() -> None:
    name = default_storage.save(f"healthz/{uuid.uuid4().hex}.txt", ContentFile(b"ok\n"))
    try:
        with default_storage.open(name, "rb") as handle:
            if handle.read() != b"ok\n":
                raise OSError(f"the storage gave back other bytes than were written to {name}")
    finally:
        default_storage.delete(name)


def check_cache() -> None:
    """A set, get and delete of a random key. Sessions, the API's rate limit and its exports go through the
    cache, so without it every logged-in page and API call fails. The check makes a cache of its own from the
    settings, which for Redis waits at most CHECK_TIMEOUT on each socket: the app's own waits longer (5 s),
    which would keep this thread past the answer."""
    config = settings.CACHES[DEFAULT_CACHE_ALIAS]
    backend = import_string(config["BACKEND"])
    options = config.get("OPTIONS", {})
    if issubclass(backend, RedisCache):
        options = {**options, "socket_connect_timeout": CHECK_TIMEOUT, "socket_timeout": CHECK_TIMEOUT}
    cache = backend(config.get("LOCATION", ""), {**config, "OPTIONS": options})
    key, value = f"healthz:{uuid.uuid4().hex}", uuid.uuid4().hex
    cache.set(key, value, timeout=60)  # gone by itself should the delete below not reach the cache
    try:
        if cache.get(key) != value:
            raise OSError(f"the cache gave back another value than was set under {key}")
    finally:
        cache.delete(key)


CHECKS = {"database": check_database, "broker": check_broker, "storage": check_storage, "cache": check_cache}


def failed_checks() -> list[str]:
    """The names of the checks that failed or did not answer in time, each logged with its reason."""
    futures = {_pool.submit(check): name for name, check in CHECKS.items()}
    _done, late = wait(futures, timeout=CHECK_TIMEOUT)
    failed = []
    for future, name in futures.items():
        if future in late:
            log.error("health check %s: no answer within %.0f s", name, CHECK_TIMEOUT)
        elif error := future.exception():
            log.error("health check %s failed: %s: %s", name, type(error).__name__, error)
        else:
            continue
        failed.append(name)
    return failed


@login_not_required
@never_cache
@require_safe
def healthz(request: HttpRequest) -> HttpResponse:
    failed = failed_checks()
    return HttpResponse("fail\n" if failed else "ok\n", status=503 if failed else 200, content_type="text/plain")
