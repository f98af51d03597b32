"""Background jobs: a registry of job kinds, and the lifecycle every job goes through.

A job kind is a plain function `fn(job, progress) -> dict` registered with `@job_kind`. The Celery
task (`tasks.run_job`) and the management command (`run_job`) both call `execute_job`, which
claims the job, runs the function, and records success, success with failed parts ("finished with
failures": the result's ``failures`` counts them by cause), or the failure's reason. While it runs, a
thread keeps the job's heartbeat fresh; `recover_stale_jobs` (beat) queues again a job whose heartbeat
stopped, because its worker died.
"""

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import DatabaseError, connection, transaction
from django.db.models import F
from django.utils import timezone

from evaluation.engine.errors import EngineInputError, UnknownMeasureError

from ..core.job_kinds import JOB_KINDS, job_kind  # noqa: F401 (job kinds register with jobs.job_kind)
from ..core.queue import task
from ..lib.fileformats import FileProblem
from ..lib.querylog import LogProblem
from ..lib.scales import ScaleError
from ..models import Job, JobQuerySet, Project
from .actions import ActionRefused

log = logging.getLogger(__name__)

# Errors whose message is written for the person using the app: a bad input file (named, with its
# line), a refused action, an invalid setting. A failed job shows their message as it is. Any other
# exception is a bug or an outage: its message and traceback may name server paths, so they go to the
# worker's log only (JudgmentFileProblem is a FileProblem; PoolRefused and EvaluationRefused are
# ActionRefused).
USER_ERRORS = (FileProblem, LogProblem, EngineInputError, UnknownMeasureError, ScaleError, ActionRefused, ValidationError)
ERROR_MAX_CHARS = 2000
CANCELLED_BEFORE_START = "Cancelled before it started."
# A running job's heartbeat is written this many times per JOB_STALE_AFTER_SECONDS, so that a beat or two lost to
# a slow database never makes a live job look dead.
HEARTBEATS_PER_STALE_LIMIT = 4


class JobCancelled(Exception):
    """Raised inside a job function when its job row was taken away (retried or failed as stale)."""


def running_here(job: Job) -> JobQuerySet:
    """The job's row while it is still this run's: running, and not claimed again since (attempts). Every write of
    a run goes through it, so a run whose job was taken away (queued again as stale) can no longer change it."""
    return Job.objects.filter(pk=job.pk, state=Job.State.RUNNING, attempts=job.attempts)


class Progress:
    """Reports a running job's progress; writes at most every `interval` seconds."""

    def __init__(self, job: Job, interval: float = 0.5):
        self.job = job
        self.interval = interval
        self._last_write = 0.0

    def __call__(self, done: int, total: int | None = None, message: str = "", *, milestone: bool = False) -> None:
        """`milestone`: a step worth showing however soon after the last write (a run scored, of a few)."""
        now = time.monotonic()
        finished_step = total is not None and done >= total
        if now - self._last_write < self.interval and not (finished_step or milestone):
            return
        self._last_write = now
        updated = running_here(self.job).update(
            progress_done=done,
            progress_total=total,
            progress_message=message[:300],
            heartbeat_at=timezone.now(),
        )
        if updated != 1:
            raise JobCancelled(f"job {self.job.uuid} is no longer running here")


class Heartbeat:
    """Keeps a running job's heartbeat fresh from a thread of its own while the job function runs, so that a job
    silent for JOB_STALE_AFTER_SECONDS means a dead worker, not a long step between two progress reports.

    `rows` are what to touch (by default the job, while it runs here); a beat that touches none stops the thread
    (the work was taken away: the run learns it at its next progress report). The thread uses its own database
    connection (Django's are per thread) and closes it when the work ends.
    """

    def __init__(self, job: Job, every: float, rows: Callable[[], Any] | None = None, name: str = ""):
        self.job, self.every = job, every
        self.rows = rows or (lambda: running_here(job))
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=name or f"heartbeat of job {job.uuid}", daemon=True)

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stopped.set()
        self._thread.join()

    def _beat(self) -> None:
        try:
            while not self._stopped.wait(self.every):
                try:
                    if not self.rows().update(heartbeat_at=timezone.now()):
                        return
                except DatabaseError:
                    # A dropped connection: the next beat opens a new one. Missing beats for longer than the
                    # stale limit gets the work queued again, and this run's writes are refused from then on.
                    log.warning("job %s: could not record its heartbeat", self.job.uuid, exc_info=True)
                    connection.close()
        finally:
            connection.close()


def start_job(*, kind: str, project: Project, owner, params: dict | None = None) -> Job:
    """Create a queued job and hand it to a worker once the surrounding transaction commits."""
    if kind not in JOB_KINDS:
        raise ValueError(f"unknown job kind {kind!r}")
    job = Job.objects.create(kind=kind, project=project, owner=owner, params=params or {})
    _enqueue(job)
    return job


def latest_job(kind: str, param: str, value) -> Job | None:
    """The newest job of `kind` started for the object whose uuid (or other key) `value` its params hold under
    `param`: the one a page about that object shows."""
    return Job.objects.filter(kind=kind, **{f"params__{param}": str(value)}).order_by("-created_at").first()


class RetryRefused(Exception):
    """The job cannot run again; the message says why and what to do instead."""


def retry_job(job: Job) -> bool:
    """Queue a failed job, or one that finished with failures, again. Returns False when the job is neither (nothing
    changed); raises RetryRefused when the file it imports has been removed."""
    queued = _queue_again(job, Job.objects.filter(pk=job.pk, state__in=(Job.State.FAILED, Job.State.PARTIAL))
                          .exclude(params__has_key=Job.UPLOAD_REMOVED))
    job.refresh_from_db()
    if not queued and job.upload_removed_note:
        raise RetryRefused(job.upload_removed_note)
    return queued


def _queue_again(job: Job, row: JobQuerySet) -> bool:
    """Put the job back in the queue with its params, if `row` (its row under the caller's conditions) still finds
    it: the Retry button's way, and a dead worker's job's. False when it no longer does (nothing changed)."""
    if not row.update(state=Job.State.QUEUED, progress_done=0, progress_total=None, progress_message="", error="",
                      result=None, started_at=None, heartbeat_at=None, finished_at=None):
        return False
    _enqueue(job)
    return True


def cancel_job(job: Job) -> str:
    """Stop a job: a queued one fails at once ("cancelled"); a running one is asked to stop, and a job kind
    that checks `cancel_requested` keeps what it finished and stops at its next step. Returns the job's
    state afterwards; a finished job is left as it is."""
    if Job.objects.filter(pk=job.pk, state=Job.State.QUEUED).update(
            state=Job.State.FAILED, error=CANCELLED_BEFORE_START, finished_at=timezone.now()):
        announce_end(job.pk)
        job.refresh_from_db()
        return job.state
    with transaction.atomic():
        running = Job.objects.select_for_update().filter(pk=job.pk, state=Job.State.RUNNING).first()
        if running is not None:
            running.params = {**running.params, "cancel": True}
            running.save(update_fields=["params"])
    job.refresh_from_db()
    return job.state


def cancel_requested(job: Job) -> bool:
    return Job.objects.filter(pk=job.pk, params__cancel=True).exists()


def mark_upload_removed(job: Job, now) -> bool:
    """Take a failed job's upload away from it for good, before the file is deleted. False (nothing changed)
    when the job was retried meanwhile: its file is in use again."""
    return Job.objects.filter(pk=job.pk, state=Job.State.FAILED).exclude(params__has_key=Job.UPLOAD_REMOVED).update(
        params={**job.params, Job.UPLOAD_REMOVED: now.isoformat()}) == 1


def _enqueue(job: Job) -> None:
    task("judgments.tasks.run_job").delay_on_commit(job.pk)


def execute_job(job_id: int) -> Job | None:
    """Claim a queued job, run it, and record the outcome. Returns None if it was not claimable.

    The claim is a conditional UPDATE that must change exactly one row, so a job delivered twice
    (broker redelivery, a command run beside a worker) runs once.
    """
    now = timezone.now()
    worker = f"{socket.gethostname()}:{os.getpid()}"
    claimed = Job.objects.filter(pk=job_id, state=Job.State.QUEUED).update(
        state=Job.State.RUNNING, started_at=now, heartbeat_at=now, worker=worker, attempts=F("attempts") + 1
    )
    if claimed != 1:
        return None
    job = Job.objects.select_related("project").get(pk=job_id)
    kind = JOB_KINDS.get(job.kind)
    if kind is None:
        log.error("job %s: this worker does not know the job kind %r", job.uuid, job.kind)
        _finish(job, Job.State.FAILED, error=f"The worker that took this job does not know the job kind {job.kind!r}: it runs "
                                             "another version of Verdict than the web server. Update the workers, then retry the job.")
        job.refresh_from_db()
        return job
    try:
        with Heartbeat(job, every=settings.JOB_STALE_AFTER_SECONDS / HEARTBEATS_PER_STALE_LIMIT):
            result = kind.function(job, Progress(job)) or {}
    except JobCancelled:
        log.warning("job %s was taken away while running; its outcome is discarded", job.uuid)
        return job
    except USER_ERRORS as problem:
        log.info("job %s (%s) stopped on bad input: %s", job.uuid, job.kind, problem)
        _finish(job, Job.State.FAILED, error=user_message(problem))
    except Exception as exc:
        log.exception("job %s (%s) failed", job.uuid, job.kind)
        _finish(job, Job.State.FAILED, error=unexpected_failure(job, exc))
    else:
        _finish(job, finished_state(result), result=result)
    job.refresh_from_db()
    return job


def finished_state(result: dict) -> str:
    """How a job that returned ended: "finished with failures" when its result counts failed parts
    (``result["failures"]``, cause -> count, as a judge run reports its pairs), else succeeded. A job none of
    whose parts worked raises instead, and fails."""
    failures = result.get("failures") if isinstance(result, dict) else None
    return Job.State.PARTIAL if isinstance(failures, dict) and any(failures.values()) else Job.State.SUCCEEDED


def _finish(job: Job, state: str, *, result: dict | None = None, error: str = "") -> None:
    if running_here(job).update(state=state, result=result, error=error, finished_at=timezone.now(), heartbeat_at=timezone.now()):
        announce_end(job.pk)


def announce_end(job_id: int) -> None:
    """Every way a job ends comes here once (each is a conditional UPDATE that changed the row): the project's
    webhooks hear of it. A webhook's trouble never touches the job."""
    from .webhooks import job_ended

    try:
        job_ended(job_id)
    except DatabaseError:
        log.exception("The webhook events of job %s could not be recorded", job_id)


def user_message(problem: Exception) -> str:
    """What a member reads on the failed job's page: the message of one of the USER_ERRORS."""
    text = " ".join(problem.messages) if isinstance(problem, ValidationError) else str(problem)
    return text if len(text) <= ERROR_MAX_CHARS else text[:ERROR_MAX_CHARS - 1] + "…"


def unexpected_failure(job: Job, exc: Exception) -> str:
    """What a member reads when the job hit a bug or an outage: no message, no traceback (they can name
    server paths and data), only what to quote to the operator, whose log has the traceback."""
    return (f"An unexpected error ({type(exc).__name__}) stopped the job. The worker's log has the details under "
            f"job {job.uuid}: quote this id to whoever runs Verdict.")


@dataclass(frozen=True)
class Recovered:
    """What one pass of recover_stale_jobs did: how many dead workers' jobs it queued again, how many it failed."""

    queued_again: int
    failed: int


def recover_stale_jobs() -> Recovered:
    """Queue again, as the Retry button does, each running job whose worker went silent for JOB_STALE_AFTER_SECONDS
    (a live worker's heartbeat thread keeps it fresh, so the worker died); fail the ones tried JOB_MAX_ATTEMPTS times.

    Each change is a conditional UPDATE on the job as it was read (still running, still silent, same attempt), so
    a job that wakes up or that another beat already recovered is left alone; the dead run's writes are refused
    from then on (`running_here`).
    """
    silent_for, most = settings.JOB_STALE_AFTER_SECONDS, settings.JOB_MAX_ATTEMPTS
    now = timezone.now()
    stale = Job.objects.stale(now - timedelta(seconds=silent_for))
    queued_again = failed = 0
    for job in stale.only("pk", "attempts"):
        row = stale.filter(pk=job.pk, attempts=job.attempts)
        if job.attempts < most:
            queued_again += _queue_again(job, row)
        else:
            ended = row.update(state=Job.State.FAILED, finished_at=now, error=(
                f"The job was tried {job.attempts} times (JOB_MAX_ATTEMPTS is {most}); the last time, its worker went "
                f"silent for more than {silent_for} s (it was probably killed or its machine restarted). Retry the job."))
            if ended:
                announce_end(job.pk)
            failed += ended
    return Recovered(queued_again, failed)


@job_kind("selfcheck", "Worker self-check")
def selfcheck(job: Job, progress: Progress) -> dict:
    """Prove the pipeline end to end: the worker got the job, can use the database and file storage."""
    pause = float(job.params.get("pause", 0))
    steps = 3
    progress(0, steps, "Reading the database")
    members = job.project.memberships.count()
    time.sleep(pause)
    progress(1, steps, "Writing to file storage")
    name = default_storage.save(f"selfcheck/{job.uuid}.txt", ContentFile(b"verdict selfcheck\n"))
    time.sleep(pause)
    progress(2, steps, "Reading it back")
    with default_storage.open(name) as handle:
        ok = handle.read() == b"verdict selfcheck\n"
    default_storage.delete(name)
    time.sleep(pause)
    if not ok:
        raise OSError(f"file storage returned different bytes for {name}")
    progress(steps, steps, "Done")
    return {"members": members, "storage": settings.STORAGES["default"]["BACKEND"], "worker": job.worker}
