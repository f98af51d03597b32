"""A real Celery worker process takes jobs from a real broker: Redis, and the embedded filesystem one."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from config.celery import app as celery_app
from judgments.models import Job
from judgments.ops.jobs import Recovered, recover_stale_jobs, start_job
from tests.factory import make_project, make_user

pytestmark = pytest.mark.worker
ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def require_redis(url: str = REDIS_URL) -> None:
    """Skip the test when Redis at `url` does not answer; fail it under CI, which must test against Redis."""
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"Redis at {url} is not reachable ({exc}); CI must test against Redis")
        pytest.skip(f"Redis at {url} is not reachable ({exc})")


def database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    user = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{user}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture(params=["redis", "filesystem"])
def broker(request, tmp_path):
    """Point this process's Celery app at the broker and return the worker's environment for it."""
    if request.param == "redis":
        require_redis()
        url, options = REDIS_URL, {}
        import redis

        redis.Redis.from_url(REDIS_URL).flushdb()
    else:
        url = "filesystem://"
        folder, control = tmp_path / "broker" / "queue", tmp_path / "broker" / "control"
        folder.mkdir(parents=True)
        control.mkdir()
        options = {"data_folder_in": str(folder), "data_folder_out": str(folder), "control_folder": str(control)}
    saved = (celery_app.conf.broker_url, celery_app.conf.broker_transport_options)
    use_broker(url, options)
    yield {"CELERY_BROKER_URL": url, "CELERY_BROKER_DIR": str(tmp_path / "broker")}
    use_broker(*saved)


def use_broker(url: str, options: dict) -> None:
    # Drop the cached connection and producer pools so the next message goes to the new broker.
    celery_app.conf.broker_url, celery_app.conf.broker_transport_options = url, options
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


@pytest.fixture
def start_worker(broker, transactional_db, tmp_path, settings):
    """Starts a worker process on the broker and the test database when called; stops them all afterwards."""
    media = tmp_path / "media"
    settings.MEDIA_ROOT = media
    env = {**os.environ, **broker, "DATABASE_URL": database_url(), "MEDIA_ROOT": str(media)}
    started = []

    def start() -> subprocess.Popen:
        log = (tmp_path / f"worker-{len(started) + 1}.log").open("w+")
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo", "--loglevel=INFO",
             "--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        started.append(process)
        deadline = time.monotonic() + 60
        while "ready." not in Path(log.name).read_text():
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail("the worker did not start:\n" + Path(log.name).read_text()[-3000:])
            time.sleep(0.2)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture
def worker(start_worker):
    return start_worker()


def wait_for(job: Job, states: set[str], timeout: float = 60) -> Job:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.state in states:
            return job
        time.sleep(0.2)
    pytest.fail(f"job stayed {job.state} ({job.progress_message!r}) for {timeout} s")


def test_a_job_sent_through_the_broker_is_run_by_the_worker(worker):
    lead = make_user("lena")
    project = make_project(lead)
    job = start_job(kind="selfcheck", project=project, owner=lead)
    finished = wait_for(job, {Job.State.SUCCEEDED, Job.State.FAILED})
    assert finished.state == Job.State.SUCCEEDED, finished.error
    assert finished.result["members"] == 1
    assert finished.worker.endswith(f":{worker.pid}")


def test_a_killed_workers_job_is_queued_again_and_the_next_worker_finishes_it(worker, start_worker, settings):
    lead = make_user("lena")
    project = make_project(lead)
    job = start_job(kind="selfcheck", project=project, owner=lead, params={"pause": 2})
    wait_for(job, {Job.State.RUNNING})
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=10)
    settings.JOB_STALE_AFTER_SECONDS = 1
    time.sleep(1.5)
    assert recover_stale_jobs() == Recovered(queued_again=1, failed=0)
    assert wait_for(job, {Job.State.QUEUED}).worker == f"{socket.gethostname()}:{worker.pid}"

    next_worker = start_worker()
    finished = wait_for(job, {Job.State.SUCCEEDED, Job.State.FAILED})
    assert (finished.state, finished.attempts, finished.params) == (Job.State.SUCCEEDED, 2, {"pause": 2})
    assert finished.worker == f"{socket.gethostname()}:{next_worker.pid}"


def test_the_beat_entry_runs_due_health_checks_through_the_worker(worker, settings):
    from judgments.models import HealthCheck
    from judgments.tasks import check_due_health

    entry = settings.CELERY_BEAT_SCHEDULE["check-health"]
    assert entry["task"] == check_due_health.name
    lead = make_user("lena")
    project = make_project(lead)
    result = celery_app.send_task(entry["task"])
    deadline = time.monotonic() + 60
    while not HealthCheck.objects.filter(project=project).exists():
        if time.monotonic() > deadline:
            pytest.fail(f"no health check recorded ({result.id})")
        time.sleep(0.2)
    check = HealthCheck.objects.get(project=project)
    assert not check.firing and set(check.triggers) == {"new_systems", "query_drift", "guidelines", "age", "agreement"}
